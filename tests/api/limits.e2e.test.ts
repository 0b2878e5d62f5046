import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

const REDIS_URL = TEST_REDIS_URL;

type Seed = { account_id: string; api_key: string };
type Answer = { status: number; headers: Headers; body: Record<string, unknown> };

async function get(
  server: ServerProcess,
  path: string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await fetch(`${server.url}${path}`, { headers });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });
/** r=<remaining> of the `requests` item of the RateLimit field. */
const remaining = (a: Answer): number =>
  Number(/^"requests";r=(\d+);t=\d+$/.exec(a.headers.get('ratelimit') ?? '')?.[1]);

/** A port nothing listens on (taken from the OS, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

function expectRefused(a: Answer, policy: string): void {
  expect(a.status).toBe(429);
  expect(a.headers.get('content-type')).toContain('application/problem+json');
  expect(a.body).toMatchObject({
    status: 429,
    code: 'rate_limited',
    request_id: a.headers.get('x-request-id'),
  });
  const retryAfter = a.headers.get('retry-after') ?? '';
  expect(retryAfter).toMatch(/^[1-9]\d*$/);
  expect(Number(retryAfter)).toBeLessThanOrEqual(60);
  expect(a.headers.get('ratelimit-policy')).toBe(policy);
  expect(a.headers.get('ratelimit')).toBe(`"requests";r=0;t=${retryAfter}`);
}

describe('request limits through real servers', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let a: Seed;
  let b: Seed;
  let a2: string;
  let revoked: string;
  const servers: ServerProcess[] = [];
  const start = async (extra: Record<string, string>): Promise<ServerProcess> => {
    const server = await startServer({ ...env, ...extra });
    servers.push(server);
    return server;
  };
  const prefix = (): string => `cs:test:${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    env = { DATABASE_URL: db.databaseUrl as string, RUN_WORKERS: 'false' };
    const seed = async (): Promise<Seed> => {
      const r = await cli(
        ['seed-demo', '--json', '--sites', '1', '--articles', '1', '--backlinks', '1'],
        env,
      );
      if (r.code !== 0) throw new Error(r.stderr);
      return JSON.parse(r.stdout) as Seed;
    };
    const key = async (account: string): Promise<{ key_id: string; api_key: string }> => {
      const r = await cli(['keys', 'create', '--account', account, '--scope', 'read'], env);
      if (r.code !== 0) throw new Error(r.stderr);
      return JSON.parse(r.stdout) as { key_id: string; api_key: string };
    };
    [a, b] = await Promise.all([seed(), seed()]);
    const [second, old] = await Promise.all([key(a.account_id), key(b.account_id)]);
    a2 = second.api_key;
    const r = await cli(['keys', 'revoke', '--account', b.account_id, '--key', old.key_id], env);
    if (r.code !== 0) throw new Error(r.stderr);
    revoked = old.api_key;
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await db?.drop();
  });

  describe('at the CONTRACT quota of 60 a minute, with Redis', () => {
    let server: ServerProcess;
    beforeAll(async () => {
      server = await start({ REDIS_URL, RATE_LIMIT_KEY_PREFIX: prefix() });
    });

    it('gives an account 60 requests across its keys, counting down in RateLimit, then 429; another account is unaffected', async () => {
      const seen: number[] = [];
      for (let i = 0; i < 60; i++) {
        const r = await get(server, '/api/v1/sites', bearer(i % 2 === 0 ? a.api_key : a2));
        expect(r.status).toBe(200);
        expect(r.headers.get('ratelimit-policy')).toBe('"requests";q=60;w=60');
        expect(r.headers.get('ratelimit')).toMatch(/^"requests";r=\d+;t=([1-9]|[1-5]\d|60)$/);
        expect(r.headers.get('retry-after')).toBeNull();
        seen.push(remaining(r));
      }
      expect(seen).toEqual(Array.from({ length: 60 }, (_, i) => 59 - i));
      expectRefused(await get(server, '/api/v1/sites', bearer(a2)), '"requests";q=60;w=60');
      expectRefused(await get(server, '/api/v1/sites', bearer(a.api_key)), '"requests";q=60;w=60');

      const other = await get(server, '/api/v1/sites', bearer(b.api_key));
      expect(other.status).toBe(200);
      expect(remaining(other)).toBe(59);
      // Errors from the API carry the fields too.
      const missing = await get(server, '/api/v1/sites/site_nope/articles', bearer(b.api_key));
      expect(missing.status).toBe(404);
      expect(remaining(missing)).toBe(58);
    });

    it('limits requests without a usable key per client address: no key, malformed, unknown, revoked', async () => {
      const kinds: Record<string, string>[] = [
        {},
        { 'x-api-key': 'not-a-key' },
        { 'x-api-key': `cs_live_${'0'.repeat(48)}` },
        bearer(revoked),
      ];
      const seen: number[] = [];
      for (let i = 0; i < 60; i++) {
        const r = await get(server, '/api/v1/sites', kinds[i % kinds.length]);
        expect(r.status).toBe(401);
        seen.push(remaining(r));
      }
      expect(seen).toEqual(Array.from({ length: 60 }, (_, i) => 59 - i));
      for (const headers of kinds)
        expectRefused(await get(server, '/api/v1/sites', headers), '"requests";q=60;w=60');
      // The account of the revoked key keeps its own budget, and so does a valid key from this address.
      const valid = await get(server, '/api/v1/sites', bearer(b.api_key));
      expect(valid.status).toBe(200);
      expect(remaining(valid)).toBe(57);
    });
  });

  it('two server processes sharing Redis allow the quota between them, not twice', async () => {
    const shared = {
      REDIS_URL,
      RATE_LIMIT_KEY_PREFIX: prefix(),
      RATE_LIMIT_PER_MINUTE: '5',
    };
    const [one, two] = await Promise.all([start(shared), start(shared)]);
    if (!one || !two) throw new Error('servers did not start');
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await get(i % 2 === 0 ? one : two, '/api/v1/sites', bearer(i % 2 === 0 ? a.api_key : a2));
      expect(r.status).toBe(200);
      seen.push(remaining(r));
    }
    expect(seen).toEqual([4, 3, 2, 1, 0]);
    expectRefused(await get(one, '/api/v1/sites', bearer(a.api_key)), '"requests";q=5;w=60');
    expectRefused(await get(two, '/api/v1/sites', bearer(a2)), '"requests";q=5;w=60');
  });

  it('with Redis unreachable, a server starts, answers, still limits per process, logs it, and stops cleanly', async () => {
    const server = await start({
      REDIS_URL: `redis://127.0.0.1:${await closedPort()}`,
      RATE_LIMIT_KEY_PREFIX: prefix(),
      RATE_LIMIT_PER_MINUTE: '5',
    });
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await get(server, '/api/v1/sites', bearer(a.api_key));
      expect(r.status).toBe(200);
      seen.push(remaining(r));
    }
    expect(seen).toEqual([4, 3, 2, 1, 0]);
    expectRefused(await get(server, '/api/v1/sites', bearer(a2)), '"requests";q=5;w=60');
    expect((await get(server, '/api/v1/sites', bearer(b.api_key))).status).toBe(200);

    expect(await server.stop()).toBe(0);
    const logs = server
      .logs()
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; component?: string });
    const warnings = logs.filter((l) => l.component === 'limits' && l.level === 40).map((l) => l.msg);
    expect(warnings).toContain('Redis unreachable; reconnecting in the background');
    expect(warnings).toContain(
      'Redis unavailable: limits are counted in each process until it answers again (failing open)',
    );
    expect(logs.filter((l) => l.level >= 50)).toEqual([]);
  });
});
