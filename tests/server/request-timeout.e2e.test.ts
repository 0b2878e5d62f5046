import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeWithoutBrowser,
  browserless,
  freePort,
  PUBLIC_CLIENT,
  registerClient,
  startCallback,
  tokenRequest,
} from '../oauth/helpers.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';

/*
 * A request that trickles in (a byte every 200 ms) is answered 408 and its connection closed once
 * REQUEST_BODY_TIMEOUT_SECONDS (2 s here) have passed without it arriving in full: on the pages, the
 * API and MCP (authenticated, so that the body is what is awaited), a request whose headers never
 * end, and a connection that sends nothing. Without the bound the trickles go on until the test's own timeout.
 */

type Seed = {
  account_id: string;
  email: string;
  password: string;
  api_key: string;
  sites: { id: string }[];
};

/** What a raw connection received until the server closed it. */
type Trickled = { status: number; headers: Record<string, string>; body: string };

/**
 * Opens a connection to `base`, writes `head`, then one byte of `drip` every 200 ms (at most `limit`
 * bytes: a body is never completed) until the server closes the connection; resolves with what came back.
 */
function trickle(
  base: string,
  head: string,
  drip = 'a',
  limit = Number.POSITIVE_INFINITY,
): Promise<Trickled> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      socket.write(head);
      timer = setInterval(() => {
        if (sent >= limit || socket.destroyed || !socket.writable) return;
        socket.write(drip);
        sent += 1;
      }, 200);
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // The server closing the connection may reset a write in flight: what arrived before still counts.
    socket.on('error', () => {});
    socket.on('close', () => {
      clearInterval(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) {
        reject(new Error(`closed without an answer: ${JSON.stringify(text)}`));
        return;
      }
      const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: text.slice(end + 4) });
    });
  });
}

/** The answer is a 408 problem, the only answer on the connection, which was closed after it. */
function expectTimedOut(answer: Trickled): void {
  expect(answer.status).toBe(408);
  expect(answer.headers['content-type']).toContain('application/problem+json');
  expect(answer.headers.connection).toBe('close');
  expect(answer.headers['x-request-id']).toMatch(/^req_/);
  // One answer only: its Content-Length is all the rest of what came.
  expect(Buffer.byteLength(answer.body)).toBe(Number(answer.headers['content-length']));
  expect(JSON.parse(answer.body)).toMatchObject({
    status: 408,
    code: 'invalid_request',
    detail: 'The request took too long to arrive',
  });
}

describe('a request that does not arrive in full within REQUEST_BODY_TIMEOUT_SECONDS', () => {
  let test: TestDatabase;
  let server: ServerProcess;
  let seed: Seed;
  let articleId: string;
  let mcpToken: string;

  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    const env = { DATABASE_URL: test.databaseUrl as string };
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '1', '--backlinks', '0'],
      env,
    );
    if (seeded.code !== 0) throw new Error(seeded.stderr);
    seed = JSON.parse(seeded.stdout) as Seed;
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    server = await startServer({
      ...env,
      PORT: String(port),
      PUBLIC_URL: base,
      DEMO_ON_FIRST_START: 'false',
      REQUEST_BODY_TIMEOUT_SECONDS: '2',
    });
    const list = await fetch(`${base}/api/v1/sites/${seed.sites[0]?.id}/articles`, {
      headers: { authorization: `Bearer ${seed.api_key}` },
    });
    articleId = ((await list.json()) as { data: { id: string }[] }).data[0]?.id as string;
    // An assistant's access token, as an MCP client gets one (OAuth, the person allowing it).
    const callback = await startCallback();
    try {
      const registered = await registerClient(base, { ...PUBLIC_CLIENT, redirect_uris: [callback.url] });
      const clientId = ((await registered.json()) as { client_id: string }).client_id;
      const { back, verifier } = await authorizeWithoutBrowser({
        base,
        person: { accountId: seed.account_id, email: seed.email, password: seed.password, name: 'Demo' },
        clientId,
        redirectUri: callback.url,
        jar: browserless(base),
      });
      const tokens = await tokenRequest(base, {
        grant_type: 'authorization_code',
        code: back.searchParams.get('code') ?? '',
        redirect_uri: callback.url,
        client_id: clientId,
        code_verifier: verifier,
        resource: `${base}/mcp`,
      });
      expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
      mcpToken = tokens.body.access_token as string;
    } finally {
      await callback.close();
    }
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    await test?.drop();
  });

  it('POST /sign-in trickling its body: 408 problem, connection closed', { timeout: 30_000 }, async () => {
    const answer = await trickle(
      server.url,
      'POST /sign-in HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n' +
        'Content-Length: 100\r\n\r\n',
      'a',
      99,
    );
    expectTimedOut(answer);
  });

  it('PUT /api/v1/articles/{id} with a valid key, trickling its body: 408, closed', {
    timeout: 30_000,
  }, async () => {
    const answer = await trickle(
      server.url,
      `PUT /api/v1/articles/${articleId} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${seed.api_key}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"title":"',
      'a',
      80,
    );
    expectTimedOut(answer);
    // No access-log line is written for a request that never arrived: a line of its own says so.
    const logs = await server.logsNow();
    expect(
      logs.some(
        (line) => line.includes(answer.headers['x-request-id'] ?? '?') && line.includes('answered 408'),
      ),
    ).toBe(true);
  });

  it('POST /mcp with a valid token, trickling its body: 408, closed', { timeout: 30_000 }, async () => {
    const answer = await trickle(
      server.url,
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${mcpToken}\r\n` +
        'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' +
        'Content-Length: 100\r\n\r\n{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"',
      'a',
      30,
    );
    expectTimedOut(answer);
  });

  it('headers that never end: 408, closed', { timeout: 30_000 }, async () => {
    const answer = await trickle(server.url, 'GET /api/v1/sites HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    expectTimedOut(answer);
  });

  it('a connection that sends nothing: 408, closed', { timeout: 30_000 }, async () => {
    expectTimedOut(await trickle(server.url, '', '', 0));
  });

  it('the server answers complete requests as before', async () => {
    const res = await fetch(`${server.url}/api/v1/articles/${articleId}`, {
      headers: { authorization: `Bearer ${seed.api_key}` },
    });
    expect(res.status).toBe(200);
  });
});
