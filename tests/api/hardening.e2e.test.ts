import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { recordingClient } from '../support/http.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * The API as an attacker tries it: bad bytes in ids and text, broken URLs, credentials in query
 * strings, a leaked revoked key, forged client addresses. Each answer must be a clean problem+json,
 * nothing may be half-applied, and no one's activity record may be lost.
 */

type Seed = { account_id: string; api_key: string; sites: { id: string }[] };
type Problem = {
  status: number;
  code: string;
  detail: string;
  request_id: string;
  errors?: { in?: string; name?: string; message?: string }[];
};
type Activity = {
  operation: string;
  status: number;
  request_id: string | null;
  client_request_id: string | null;
  article_id: string | null;
  actor: { id: string };
};
type List<T> = { data: T[]; meta: { total: number } };

async function seedAccount(env: Record<string, string>): Promise<Seed> {
  const r = await cli(['seed-demo', '--json', '--sites', '1', '--articles', '6', '--backlinks', '0'], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Seed;
}

/** A raw request, for what fetch will not send as given (an over-long URL) and to read the raw status line. */
function rawGet(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, method: 'GET', headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('hardening of the API through a real server', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let server: ServerProcess;
  let client: ReturnType<typeof recordingClient>;
  let a: Seed;
  let b: Seed;
  let articleA: string;
  let articleB: string;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    env = { DATABASE_URL: db.databaseUrl as string };
    a = await seedAccount(env);
    b = await seedAccount(env);
    server = await startServer({ ...env, RATE_LIMIT_PER_MINUTE: '100000', EDIT_LIMIT_PER_DAY: '100000' });
    client = recordingClient(server.url);
    const first = async (s: Seed): Promise<string> =>
      ((await client.get(`/api/v1/sites/${s.sites[0]?.id}/articles`, s.api_key)).body as List<{ id: string }>)
        .data[0]?.id as string;
    articleA = await first(a);
    articleB = await first(b);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  /**
   * The account's activity records, once the records of `requestIds` (the service's request ids or the
   * clients' own) are all stored.
   */
  async function activityOf(seed: Seed, requestIds: string[]): Promise<Activity[]> {
    return vi.waitFor(async () => {
      const records = (await client.get('/api/v1/activity?per_page=100', seed.api_key))
        .body as List<Activity>;
      const seen = new Set(records.data.flatMap((r) => [r.request_id, r.client_request_id]));
      expect(requestIds.filter((id) => !seen.has(id))).toEqual([]);
      return records.data;
    }, PATIENCE);
  }

  describe('one bad record erases no one else’s activity', () => {
    it('a NUL in a path id is a 400 naming the id, and the calls around it, of any account, are all recorded', async () => {
      const good: string[] = [];
      const bad: string[] = [];
      for (let i = 0; i < 5; i++) {
        const tag = `${Date.now().toString(36)}-${i}`;
        const ids = { bad: `bad-${tag}`, put: `put-${tag}`, get: `get-${tag}`, own: `own-${tag}` };
        const [refused, put, get, own] = await Promise.all([
          client.get('/api/v1/articles/%00', a.api_key, { 'x-request-id': ids.bad }),
          client.call('PUT', `/api/v1/articles/${articleB}`, {
            key: b.api_key,
            body: { title: `Title of try ${i}` },
            headers: { 'x-request-id': ids.put },
          }),
          client.get(`/api/v1/articles/${articleB}`, b.api_key, { 'x-request-id': ids.get }),
          client.get(`/api/v1/articles/${articleA}`, a.api_key, { 'x-request-id': ids.own }),
        ]);
        expect(refused.status).toBe(400);
        const p = refused.body as Problem;
        expect(p.code).toBe('invalid_request');
        expect(p.errors).toEqual([{ in: 'params', name: 'id', message: expect.stringContaining('id') }]);
        expect([put.status, get.status, own.status]).toEqual([200, 200, 200]);
        good.push(ids.put, ids.get);
        bad.push(ids.bad);
        good.push(ids.own);
      }
      const ofB = await activityOf(
        b,
        good.filter((id) => !id.startsWith('own')),
      );
      const ofA = await activityOf(a, [...bad, ...good.filter((id) => id.startsWith('own'))]);
      const idsOf = (records: Activity[]): Set<string | null> =>
        new Set(records.map((r) => r.client_request_id));
      for (const id of good) {
        expect(idsOf(id.startsWith('own') ? ofA : ofB).has(id), id).toBe(true);
      }
      // The refused calls are in A's log too, naming no article.
      for (const id of bad) {
        const record = ofA.find((r) => r.client_request_id === id);
        expect(record, id).toMatchObject({ operation: 'get_article', status: 400, article_id: null });
      }
    });

    it('a NUL in a filter id is a 400 naming it', async () => {
      const r = await client.get('/api/v1/activity?article_id=%00', a.api_key);
      expect(r.status).toBe(400);
      expect((r.body as Problem).errors?.[0]).toMatchObject({ in: 'query', name: 'article_id' });
    });
  });

  describe('client input never makes a 500', () => {
    it.each([
      ['period=0000-01', 'period'],
      ['period=1969-12', 'period'],
    ])('stats with %s is a 400 naming the period', async (query, name) => {
      const r = await client.get(`/api/v1/sites/${a.sites[0]?.id}/stats?${query}`, a.api_key);
      expect(r.status).toBe(400);
      expect((r.body as Problem).errors?.[0]).toMatchObject({ in: 'query', name });
    });

    it.each([
      ['articles', 'from=0000-01-01', 'from'],
      ['backlinks', 'to=0000-12-31', 'to'],
    ])('%s with %s is a 400 naming the date', async (list, query, name) => {
      const r = await client.get(`/api/v1/sites/${a.sites[0]?.id}/${list}?${query}`, a.api_key);
      expect(r.status).toBe(400);
      expect((r.body as Problem).errors?.[0]).toMatchObject({ in: 'query', name });
    });

    it.each([
      ['title', { title: 'Boilers\u0000' }],
      ['title', { title: 'Boilers\n2026' }],
      ['title', { title: 'Boilers \ud800' }],
      ['reason', { title: 'Boilers', reason: 'why\u0000' }],
      ['body', { body: '<p>half a pair \udc00</p>' }],
      ['body', { body: '<p>bell \u0007</p>' }],
    ])(
      'an edit whose %s has a control character or a lone surrogate is a 400 naming it, and changes nothing',
      async (name, edit) => {
        const before = (await client.get(`/api/v1/articles/${articleA}`, a.api_key)).body as {
          revision: number;
        };
        const r = await client.call('PUT', `/api/v1/articles/${articleA}`, { key: a.api_key, body: edit });
        expect(r.status).toBe(400);
        expect((r.body as Problem).errors).toContainEqual(expect.objectContaining({ in: 'body', name }));
        const after = (await client.get(`/api/v1/articles/${articleA}`, a.api_key)).body as {
          revision: number;
        };
        expect(after.revision).toBe(before.revision);
      },
    );

    it('a body with tabs and line breaks is accepted', async () => {
      const current = (await client.get(`/api/v1/articles/${articleA}`, a.api_key)).body as { body: string };
      const r = await client.call('PUT', `/api/v1/articles/${articleA}`, {
        key: a.api_key,
        body: { body: `<p>line one\r\n\tline two</p>${current.body}`, reason: 'two\nlines' },
      });
      expect(r.status).toBe(200);
    });

    it('a restore reason and a featured image alt with a NUL are 400s naming them', async () => {
      const restore = await client.call('POST', `/api/v1/articles/${articleA}/revisions/1/restore`, {
        key: a.api_key,
        body: { reason: 'back\u0000' },
      });
      expect(restore.status).toBe(400);
      expect((restore.body as Problem).errors?.[0]).toMatchObject({ name: 'reason' });
      const image = await client.call('POST', `/api/v1/articles/${articleA}/featured-image`, {
        key: a.api_key,
        body: { url: 'https://images.example.org/a.png', alt: 'a\u0000' },
      });
      expect(image.status).toBe(400);
      expect((image.body as Problem).errors?.[0]).toMatchObject({ name: 'alt' });
    });
  });

  describe('what the router refuses is problem+json with X-Request-Id too', () => {
    it.each([
      ['bad percent-encoding', '/api/v1/articles/%ff%fe', 400],
      ['a path segment over 100 characters', `/api/v1/articles/${'a'.repeat(200)}`, 414],
      ['a URL over the header size limit', `/api/v1/articles/${'a'.repeat(70_000)}`, 431],
    ])('%s', async (_what, path, status) => {
      const r = await rawGet(server.url, path, { authorization: `Bearer ${a.api_key}` });
      expect(r.status).toBe(status);
      expect(r.headers['content-type']).toContain('application/problem+json');
      expect(r.headers['x-request-id']).toMatch(/^req_/);
      const p = JSON.parse(r.body) as Problem;
      expect(p).toMatchObject({ status, code: 'invalid_request', request_id: r.headers['x-request-id'] });
    });
  });

  describe('keys in URLs never reach the log', () => {
    it('api_key, access_token and other secret-like query parameters are redacted in the access log', async () => {
      const secrets = ['SECRETKEY1111', 'SECRETTOKEN222', 'SECRETSIG3333', 'SECRETAUTH444'];
      const r = await client.get(
        `/api/v1/sites?api_key=${secrets[0]}&access_token=${secrets[1]}&X-Amz-Signature=${secrets[2]}&authorization=${secrets[3]}&page=1`,
      );
      expect(r.status).toBe(401);
      const requestId = r.headers['x-request-id'] as string;
      await vi.waitFor(() => {
        const completed = server.logs().some((l) => l.includes(requestId) && l.includes('request completed'));
        expect(completed, 'an access-log line for the request').toBe(true);
      }, PATIENCE);
      const lines = server.logs().filter((l) => l.includes(requestId));
      const logged = lines.join('\n');
      for (const secret of secrets) expect(logged).not.toContain(secret);
      expect(logged).toContain('api_key=[redacted]');
      expect(logged).toContain('page=1');
    });
  });

  describe('revoked keys', () => {
    it('a revoked key is answered exactly as an unknown key', async () => {
      const k = JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--name', 'Revoked soon'], env)).stdout,
      ) as { key_id: string; api_key: string };
      expect((await client.get('/api/v1/sites', k.api_key)).status).toBe(200);
      expect((await cli(['keys', 'revoke', '--account', a.account_id, '--key', k.key_id], env)).code).toBe(0);
      const revoked = await client.get('/api/v1/sites', k.api_key);
      const unknown = await client.get('/api/v1/sites', `cs_live_${'0'.repeat(48)}`);
      expect(revoked.status).toBe(401);
      expect(unknown.status).toBe(401);
      const strip = (p: Problem): Omit<Problem, 'request_id'> => {
        const { request_id: _, ...rest } = p;
        return rest;
      };
      expect(strip(revoked.body as Problem)).toEqual(strip(unknown.body as Problem));
      expect(revoked.headers['www-authenticate']).toBe(unknown.headers['www-authenticate']);
    });

    it('the calls of a revoked key are recorded in the account’s log at most once a minute', async () => {
      const k = JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--name', 'Leaked'], env)).stdout,
      ) as { key_id: string; api_key: string };
      expect((await client.get('/api/v1/sites', k.api_key)).status).toBe(200);
      expect((await cli(['keys', 'revoke', '--account', a.account_id, '--key', k.key_id], env)).code).toBe(0);
      const refused: string[] = [];
      for (let i = 0; i < 8; i++) {
        const r = await client.get(`/api/v1/articles/${articleA}`, k.api_key);
        expect(r.status).toBe(401);
        refused.push(r.headers['x-request-id'] as string);
      }
      const records = await activityOf(a, [refused[0] as string]);
      const ofKey = records.filter((r) => r.actor.id === k.key_id && r.status === 401);
      expect(ofKey.map((r) => r.request_id)).toEqual([refused[0]]);
    });
  });

  describe('tenant data is never cacheable by a shared cache', () => {
    it.each([
      ['an answer', '/api/v1/sites', true],
      ['an error', '/api/v1/articles/art_nothing_here', true],
      ['a refusal', '/api/v1/sites', false],
    ])('%s carries Cache-Control: private, no-store', async (_what, path, withKey) => {
      const r = await client.get(path, withKey ? a.api_key : undefined);
      expect(r.headers['cache-control']).toBe('private, no-store');
    });
  });
});

describe('TRUST_PROXY', () => {
  let db: TestDatabase;
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    await cli(['migrate'], { DATABASE_URL: db.databaseUrl as string });
  });
  afterAll(async () => {
    for (const s of servers) await s.stop();
    await db?.drop();
  });

  /** Unauthenticated calls (limited per client address) from two forwarded addresses, 3 a minute allowed. */
  async function statusesFrom(extra: Record<string, string>): Promise<{ first: number[]; second: number }> {
    const server = await startServer({
      DATABASE_URL: db.databaseUrl as string,
      RATE_LIMIT_PER_MINUTE: '3',
      ...extra,
    });
    servers.push(server);
    const first: number[] = [];
    for (let i = 0; i < 4; i++) {
      first.push(
        (await fetch(`${server.url}/api/v1/sites`, { headers: { 'x-forwarded-for': '203.0.113.7' } })).status,
      );
    }
    const second = (
      await fetch(`${server.url}/api/v1/sites`, { headers: { 'x-forwarded-for': '198.51.100.9' } })
    ).status;
    return { first, second };
  }

  it('unset: X-Forwarded-For is not believed, every client behind the socket address is one', async () => {
    const r = await statusesFrom({});
    expect(r.first).toEqual([401, 401, 401, 429]);
    expect(r.second).toBe(429);
  });

  it('trusting the loopback proxy: each forwarded client has its own budget', async () => {
    const r = await statusesFrom({ TRUST_PROXY: '127.0.0.1/8' });
    expect(r.first).toEqual([401, 401, 401, 429]);
    expect(r.second).toBe(401);
  });

  it('a hop count works the same', async () => {
    const r = await statusesFrom({ TRUST_PROXY: '1' });
    expect(r.second).toBe(401);
  });
});
