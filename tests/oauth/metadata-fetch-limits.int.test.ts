import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeUrl,
  type DocumentServer,
  pkce,
  startDocumentServer,
  startTestApp,
  type TestApp,
} from './helpers.ts';

/*
 * Client ID metadata documents are fetched when an authorization request names an https client_id: for
 * anyone, so the fetches are limited per client address and per process (a burst, then a steady rate;
 * METADATA_FETCH_LIMITS), a refused request gets the error page with 429 and Retry-After and fetches
 * nothing, and a fetched document is served from a short cache. Requests come from different loopback
 * addresses (127.0.0.x) to stand for different clients.
 */

let t: TestApp;
let docs: DocumentServer;
/** When this process first fetched: the process's steady rate has refilled one fetch a second since. */
let firstFetchAt = 0;
const REDIRECT = 'https://assistant.example/callback';

type Answer = { status: number; location: string | undefined; retryAfter: string | undefined; body: string };

/** GET /oauth/authorize for this client_id, sent from the given local address. */
function authorizeFrom(localAddress: string, clientId: string): Promise<Answer> {
  const url = authorizeUrl(t.url, {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    scope: 'content:read',
    state: 's',
    code_challenge: pkce().challenge,
    code_challenge_method: 'S256',
  });
  return send(localAddress, url, 'GET');
}

/** An HTTP request from the given local address (a form body makes it a POST). */
function send(
  localAddress: string,
  url: URL,
  method: 'GET' | 'POST',
  form?: Record<string, string>,
): Promise<Answer> {
  const body = form ? new URLSearchParams(form).toString() : undefined;
  const headers: Record<string, string> = form
    ? { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' }
    : { accept: 'text/html' };
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { localAddress, method, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          location: res.headers.location,
          retryAfter: res.headers['retry-after'],
          body,
        }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

function document(path: string, extra: Record<string, unknown> = {}): string {
  const clientId = `${docs.origin}${path}`;
  docs.documents.set(path, {
    client_id: clientId,
    client_name: 'Document Assistant',
    redirect_uris: [REDIRECT],
    token_endpoint_auth_method: 'none',
    ...extra,
  });
  return clientId;
}

function hitsOf(path: string): number {
  return docs.hits.filter((hit) => hit === path).length;
}

beforeAll(async () => {
  docs = await startDocumentServer();
  t = await startTestApp({ config: docs.config });
});

afterAll(async () => {
  await t?.close();
  await docs?.close();
});

describe('client metadata document fetches', () => {
  it('fetches a document once and serves it from the cache afterwards (Cache-Control within 1 to 5 minutes)', async () => {
    firstFetchAt = Date.now();
    const clientId = document('/cached.json');
    docs.headers.set('/cached.json', { 'cache-control': 'max-age=0' });
    for (let i = 0; i < 3; i++) {
      const answer = await authorizeFrom('127.0.0.1', clientId);
      expect(answer.status).toBe(303);
      expect(answer.location).toMatch(/^\/oauth\/interaction\//);
    }
    expect(hitsOf('/cached.json')).toBe(1);
  });

  it('fetches a failing document once per request (not again when reporting the failure)', async () => {
    const answer = await authorizeFrom('127.0.0.1', `${docs.origin}/missing.json`);
    expect(answer.status).toBe(400);
    expect(answer.body).toContain('<code>invalid_client</code>');
    expect(hitsOf('/missing.json')).toBe(1);
  });

  it('limits one client address to a burst (11 fetches at once), then answers 429 on the error page and fetches nothing', async () => {
    const from = '127.0.0.3';
    const answers: Answer[] = [];
    for (let i = 0; i < 11; i++) answers.push(await authorizeFrom(from, `${docs.origin}/burst-${i}.json`));
    expect(answers.map((a) => a.status)).toEqual(Array(11).fill(400));
    expect(answers.every((a) => a.body.includes('<code>invalid_client</code>'))).toBe(true);

    const refused = await authorizeFrom(from, document('/real-but-refused.json'));
    expect(refused.status).toBe(429);
    expect(refused.location).toBeUndefined();
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(refused.retryAfter)).toBeLessThanOrEqual(6);
    expect(refused.body).toContain('<code>temporarily_unavailable</code>');
    expect(refused.body).toContain('Too many client metadata documents fetched for this address');
    expect(hitsOf('/real-but-refused.json')).toBe(0);

    // The token endpoint looks such a client up too: refused the same way, as JSON.
    const token = await send(from, new URL('/oauth/token', t.url), 'POST', {
      grant_type: 'authorization_code',
      code: 'whatever',
      client_id: document('/token-client.json'),
      code_verifier: pkce().verifier,
    });
    expect(token.status).toBe(429);
    expect(Number(token.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(token.body)).toEqual({
      error: 'temporarily_unavailable',
      error_description: expect.stringContaining(
        'Too many client metadata documents fetched for this address',
      ),
    });
    expect(hitsOf('/token-client.json')).toBe(0);

    // Another address is not refused for it; a cached document costs no fetch, so it is never refused.
    const other = await authorizeFrom('127.0.0.4', `${docs.origin}/real-but-refused.json`);
    expect(other.status).toBe(303);
    expect(hitsOf('/real-but-refused.json')).toBe(1);
    const again = await authorizeFrom(from, `${docs.origin}/real-but-refused.json`);
    expect(again.status).toBe(303);
    expect(hitsOf('/real-but-refused.json')).toBe(1);
  });

  it('limits the whole process: many addresses together get a burst, then 429', async () => {
    let refused: Answer | undefined;
    let sent = 0;
    for (let host = 10; host < 40 && !refused; host++) {
      for (let i = 0; i < 8 && !refused; i++) {
        const path = `/process-${host}-${i}.json`;
        const answer = await authorizeFrom(`127.0.0.${host}`, `${docs.origin}${path}`);
        sent++;
        if (answer.status === 429) {
          refused = answer;
          expect(hitsOf(path)).toBe(0);
        } else {
          expect(answer.status).toBe(400);
        }
      }
    }
    expect(refused?.body).toContain('Too many client metadata documents fetched just now');
    expect(Number(refused?.retryAfter)).toBeGreaterThanOrEqual(1);
    // 31 at once (1 steady + 30 burst), less the 14 fetched above, plus what the steady rate refilled.
    const refilled = Math.ceil((Date.now() - firstFetchAt) / 1000);
    expect(sent).toBeGreaterThanOrEqual(31 - 14 + 1);
    expect(sent).toBeLessThanOrEqual(31 - 14 + refilled + 1);
  });
});
