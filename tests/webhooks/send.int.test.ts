import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { allowNetworks, createGuardedPost, type HostLookup } from '../../infra/net/guarded-fetch.ts';
import { ANSWER_READ_BYTES, createWebhookSender, signatureHeaders } from '../../infra/webhooks/send.ts';

/*
 * Sending one webhook message: the Standard Webhooks signature, the POST through the SSRF guard (any
 * status is an answer, a redirect is not followed, 64 KiB of the answer read at most, a deadline), http
 * only to the deployment's own networks, and an outcome in every case, never a throw. A plain http
 * server and an https one (a certificate made here, trusted through `ca`) listen on 127.0.0.1; each
 * counts its connections, so a refusal that failed open would show.
 */

/** A Standard Webhooks secret: `whsec_` and base64 of 24 random bytes. */
const newSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

type Seen = { method: string; path: string; headers: IncomingMessage['headers']; body: string };

let workDir: string;
let ca: Buffer;
let http: Server;
let https: Server;
let httpPort: number;
let httpsPort: number;
let connections = 0;
const seen: Seen[] = [];

const HOSTS: Record<string, string[]> = {
  'hooks.test.example': ['127.0.0.1'],
  'public.test.example': ['93.184.215.14'],
  'mixed.test.example': ['127.0.0.1', '10.0.0.5'],
};
const lookup: HostLookup = async (hostname) => {
  const answer = HOSTS[hostname];
  if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return answer;
};
/** Loopback is one of the deployment's networks (as OUTBOUND_ALLOW_NETWORKS=127.0.0.1/32 says). */
const loopbackAllowed = allowNetworks(['127.0.0.1/32']);

function handle(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const where = req.url ?? '/';
    seen.push({
      method: req.method ?? '',
      path: where,
      headers: req.headers,
      body: Buffer.concat(chunks).toString(),
    });
    switch (where) {
      case '/ok':
        res.writeHead(204).end();
        return;
      case '/teapot':
        res.writeHead(418, { 'content-type': 'text/plain' }).end('short and stout');
        return;
      case '/moved':
        res.writeHead(301, { location: '/ok' }).end();
        return;
      case '/stall':
        return; // never answers
      case '/huge': {
        // An answer that never ends: 16 KiB at a time until the client goes away.
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        const pump = (): void => {
          while (!res.destroyed && res.write(Buffer.alloc(16 * 1024, 1))) {
            /* until the socket pushes back */
          }
        };
        res.on('drain', pump);
        pump();
        return;
      }
      default:
        res.writeHead(404).end();
    }
  });
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(tmpdir(), 'webhook-send-'));
  const key = path.join(workDir, 'key.pem');
  const cert = path.join(workDir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
      ...['-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=hooks.test.example'],
      ...['-addext', 'subjectAltName=DNS:hooks.test.example'],
    ],
    { stdio: 'ignore' },
  );
  ca = await readFile(cert);
  http = createHttpServer(handle);
  https = createHttpsServer({ key: await readFile(key), cert: ca }, handle);
  for (const server of [http, https]) {
    server.on('connection', (socket) => {
      connections++;
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  }
  httpPort = (http.address() as AddressInfo).port;
  httpsPort = (https.address() as AddressInfo).port;
});

afterAll(async () => {
  for (const server of [http, https]) {
    (server as ReturnType<typeof createHttpServer>)?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  }
  await rm(workDir, { recursive: true, force: true });
});

beforeEach(() => {
  connections = 0;
  seen.length = 0;
});

const message = (url: string, secret = newSecret()) => ({
  url,
  secret,
  id: '0196f1c2-8a4b-7c3d-9e5f-0123456789ab',
  timestamp: new Date(),
  body: JSON.stringify({
    id: '0196f1c2-8a4b-7c3d-9e5f-0123456789ab',
    type: 'article.created',
    data: { a: 'é' },
  }),
});

describe('signatures', () => {
  it('signs as Standard Webhooks specifies: v1, base64 HMAC-SHA256 of id.timestamp.body with the key', async () => {
    const { createHmac } = await import('node:crypto');
    const secret = newSecret();
    const at = new Date('2026-11-02T09:30:00Z');
    const headers = signatureHeaders(secret, 'msg_1', at, '{"a":1}');
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key)
      .update(`msg_1.${at.getTime() / 1000}.{"a":1}`)
      .digest('base64');
    expect(headers).toEqual({
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(at.getTime() / 1000),
      'webhook-signature': `v1,${expected}`,
    });
  });
});

describe('sending a webhook message', () => {
  const sender = createWebhookSender({ allowAddresses: loopbackAllowed, lookup, timeoutMs: 1_000 });

  it('POSTs the JSON body with the signature headers; the receiver verifies it with the library', async () => {
    const m = message(`http://hooks.test.example:${httpPort}/ok`);
    const outcome = await sender(m);
    expect(outcome).toMatchObject({ statusCode: 204, error: null });
    expect(outcome.durationMs).toBeGreaterThanOrEqual(0);
    const [request] = seen;
    expect(request).toMatchObject({ method: 'POST', path: '/ok', body: m.body });
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.headers['user-agent']).toMatch(/^ContentService-Webhooks\//);
    const headers = {
      'webhook-id': String(request?.headers['webhook-id']),
      'webhook-timestamp': String(request?.headers['webhook-timestamp']),
      'webhook-signature': String(request?.headers['webhook-signature']),
    };
    expect(headers['webhook-id']).toBe(m.id);
    expect(new Webhook(m.secret).verify(request?.body ?? '', headers)).toEqual(JSON.parse(m.body));
  });

  it('reaches an https endpoint (its certificate verified against its name)', async () => {
    const trusting = createWebhookSender({ allowAddresses: loopbackAllowed, lookup, ca, timeoutMs: 2_000 });
    expect(await trusting(message(`https://hooks.test.example:${httpsPort}/ok`))).toMatchObject({
      statusCode: 204,
      error: null,
    });
    // Without the certificate's issuer trusted: no answer, and why.
    const outcome = await sender(message(`https://hooks.test.example:${httpsPort}/ok`));
    expect(outcome).toMatchObject({ statusCode: null, error: expect.stringMatching(/TLS certificate/) });
  });

  it('takes any status as the answer, and follows no redirect', async () => {
    expect(await sender(message(`http://hooks.test.example:${httpPort}/teapot`))).toMatchObject({
      statusCode: 418,
      error: null,
    });
    expect(await sender(message(`http://hooks.test.example:${httpPort}/moved`))).toMatchObject({
      statusCode: 301,
      error: null,
    });
    expect(seen.map((s) => s.path)).toEqual(['/teapot', '/moved']);
  });

  it('reads at most 64 KiB of an answer and does not wait for the rest', async () => {
    const post = createGuardedPost({
      noun: 'endpoint',
      userAgent: 'test',
      maxAnswerBytes: ANSWER_READ_BYTES,
      timeoutMs: 5_000,
      allowAddresses: loopbackAllowed,
      lookup,
    });
    const started = Date.now();
    const answer = await post(`http://hooks.test.example:${httpPort}/huge`, { headers: {}, body: '{}' });
    expect(answer.statusCode).toBe(200);
    expect(answer.body.length).toBe(ANSWER_READ_BYTES);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('gives up at the deadline: no status, and why', async () => {
    const started = Date.now();
    const outcome = await sender(message(`http://hooks.test.example:${httpPort}/stall`));
    expect(outcome).toEqual({
      statusCode: null,
      durationMs: expect.any(Number),
      error: 'The endpoint did not answer within 1 s.',
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(outcome.durationMs).toBeGreaterThanOrEqual(950);
  });

  it('reports a refused connection', async () => {
    const closed = createHttpServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    expect(await sender(message(`http://127.0.0.1:${port}/ok`))).toMatchObject({
      statusCode: null,
      error: 'The endpoint host refused the connection.',
    });
  });

  it('never throws: a malformed URL, another scheme, credentials in the URL, a bad secret', async () => {
    expect((await sender(message('not a url'))).error).toMatch(/not a valid absolute URL/);
    expect((await sender(message('ftp://hooks.test.example/x'))).error).toMatch(/Only https/);
    expect((await sender(message(`http://user:pw@hooks.test.example:${httpPort}/ok`))).error).toMatch(
      /user name or password/,
    );
    expect((await sender(message(`http://hooks.test.example:${httpPort}/ok`, 'whsec_'))).error).toMatch(
      /signing secret/,
    );
    expect(connections).toBe(0);
  });
});

describe('where a webhook may go (the SSRF guard)', () => {
  it('refuses loopback and private addresses by default, over http and https alike, without connecting', async () => {
    const publicOnly = createWebhookSender({ lookup, ca, timeoutMs: 1_000 });
    for (const url of [
      `http://hooks.test.example:${httpPort}/ok`,
      `https://hooks.test.example:${httpsPort}/ok`,
      `http://127.0.0.1:${httpPort}/ok`,
      `http://[::ffff:127.0.0.1]:${httpPort}/ok`,
    ]) {
      const outcome = await publicOnly(message(url));
      expect(outcome.statusCode, url).toBeNull();
      expect(outcome.error, url).toMatch(
        /not at an address the service may send to|http endpoint URL is sent to only/,
      );
    }
    expect(connections).toBe(0);
    expect(seen).toEqual([]);
  });

  it('sends over http only when every address of the host is on an allowed network, never to a public one', async () => {
    const sender = createWebhookSender({ allowAddresses: loopbackAllowed, lookup, timeoutMs: 1_000 });
    // A public address: http is refused (https would be required), nothing is connected to.
    const toPublic = await sender(message('http://public.test.example/ok'));
    expect(toPublic).toMatchObject({ statusCode: null, error: expect.stringMatching(/use https/) });
    // One address allowed, one not: refused.
    const mixed = await sender(message(`http://mixed.test.example:${httpPort}/ok`));
    expect(mixed).toMatchObject({ statusCode: null, error: expect.stringMatching(/use https/) });
    expect(connections).toBe(0);
    // Every address allowed: sent.
    expect(await sender(message(`http://hooks.test.example:${httpPort}/ok`))).toMatchObject({
      statusCode: 204,
    });
  });

  it('gives one answer for a name that does not resolve and an address that is not allowed', async () => {
    const publicOnly = createWebhookSender({ lookup, timeoutMs: 1_000 });
    const unknown = await publicOnly(message('https://nowhere.test.example/ok'));
    const loopback = await publicOnly(message(`https://hooks.test.example:${httpsPort}/ok`));
    expect(unknown.error).toBe(loopback.error);
    expect(unknown.error).not.toMatch(/127\.0\.0\.1|resolve|nowhere/);
  });
});
