import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeWithoutBrowser,
  freePort,
  PUBLIC_CLIENT,
  registerClient,
  startCallback,
} from '../oauth/helpers.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { type DecodedSpan, type OtlpReceiver, SPAN_KIND, startOtlpReceiver } from '../support/otlp.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

/*
 * What the traces of the real server hold of the credentials and personal data a request carries: an
 * API key put in a path and a query, an OAuth interaction's id in the consent page's address, and the
 * rate limits' Redis keys, which name an account or a client's address. Every span the requests made is
 * read as exported over OTLP (the server stopped first, so that its last batch is flushed): no attribute
 * of any span holds the key or the interaction id, and no Redis span an account's id or a key name.
 */

type Seeded = { account_id: string; email: string; password: string; api_key: string };

describe('traces of requests that carry credentials', () => {
  let collector: OtlpReceiver & { errors: string[] };
  let callback: Awaited<ReturnType<typeof startCallback>>;
  let server: ServerProcess | undefined;
  let db: TestDatabase;
  let account: Seeded;
  /** The consent page's uid: the interaction's id. */
  let uid: string;
  let spans: DecodedSpan[] = [];
  const prefix = `test-trace-redaction-${process.pid}`;

  beforeAll(async () => {
    collector = await startOtlpReceiver();
    callback = await startCallback();
    db = await createTestDatabase('postgres');
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      DATABASE_URL: db.databaseUrl as string,
      DATA_DIR: '/nonexistent',
      REDIS_URL: TEST_REDIS_URL,
      JOBS_PREFIX: prefix,
      RATE_LIMIT_KEY_PREFIX: `${prefix}:rl`,
    };
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '1', '--backlinks', '0'],
      env,
    );
    if (seeded.code !== 0) throw new Error(seeded.stderr);
    account = JSON.parse(seeded.stdout) as Seeded;
    server = await startServer({
      ...env,
      PORT: String(port),
      PUBLIC_URL: base,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    const key = account.api_key;
    const auth = { authorization: `Bearer ${key}` };

    // The key in a path, with a key (the account's requests counted in Redis) and without (the address's).
    expect((await fetch(`${base}/api/v1/articles/${key}`, { headers: auth })).status).toBe(404);
    expect((await fetch(`${base}/api/v1/articles/${key}/revisions`)).status).toBe(401);
    // And in a query, under a name that says nothing.
    expect((await fetch(`${base}/api/v1/sites?q=${key}`, { headers: auth })).status).toBeLessThan(500);

    // An assistant connected: the consent page's address holds the interaction's id.
    const registered = await registerClient(base, { ...PUBLIC_CLIENT, redirect_uris: [callback.url] });
    expect(registered.status).toBe(201);
    const clientId = ((await registered.json()) as { client_id: string }).client_id;
    const authorized = await authorizeWithoutBrowser({
      base,
      person: { accountId: account.account_id, email: account.email, password: account.password, name: '' },
      clientId,
      redirectUri: callback.url,
    });
    expect(authorized.back.searchParams.get('code')).toEqual(expect.any(String));
    uid = new URL(authorized.interaction).pathname.split('/').at(-1) ?? '';
    expect(uid.length).toBeGreaterThan(20);

    // Stopping the server exports every span still queued.
    expect(await server.stop()).toBe(0);
    server = undefined;
    spans = collector.spans;
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
    await collector?.close();
    await callback?.close();
    await db?.drop();
    const redis = new Redis(TEST_REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  /** Everything a span says, as text: its name, attributes, events and links. */
  const text = (list: readonly DecodedSpan[]): string =>
    JSON.stringify(
      list.map((s) => [s.name, s.attributes, s.events, s.links]),
      (_, v) => (typeof v === 'bigint' ? String(v) : v),
    );
  /** What holds `needle` (`<span name>: <what it says>`), for a readable failure. */
  const holding = (list: readonly DecodedSpan[], needle: string | RegExp): string[] =>
    list
      .map((s) => `${s.name}: ${text([s])}`)
      .filter((said) => (typeof needle === 'string' ? said.includes(needle) : needle.test(said)));
  const servers = (): DecodedSpan[] => spans.filter((s) => s.kind === SPAN_KIND.server);

  it('exports the requests’ spans', () => {
    expect(collector.errors).toEqual([]);
    const paths = servers().map((s) => String(s.attributes['url.path']));
    expect(paths).toEqual(
      expect.arrayContaining(['/api/v1/articles/[redacted]', '/api/v1/articles/[redacted]/revisions']),
    );
    expect(paths).toContain('/oauth/interaction/[redacted]');
    // fastify's request span carries the same path.
    expect(spans.filter((s) => s.name === 'request').map((s) => s.attributes['url.path'])).toContain(
      '/api/v1/articles/[redacted]',
    );
    // The query keeps its names, never its values.
    expect(servers().map((s) => s.attributes['url.query'])).toContain('q=REDACTED');
  });

  it('holds no API key in any attribute of any span', () => {
    expect(holding(spans, account.api_key)).toEqual([]);
    // Nor a piece of one (the key's random part, without its prefix).
    expect(holding(spans, account.api_key.slice(8, 30))).toEqual([]);
  });

  it('holds no OAuth interaction id in any attribute of any span', () => {
    expect(spans.some((s) => String(s.attributes['url.path']).startsWith('/oauth/'))).toBe(true);
    expect(holding(spans, uid)).toEqual([]);
  });

  it('names Redis commands without their keys: no account id, no client address', () => {
    const redis = spans.filter((s) => s.attributes['db.system.name'] === 'redis');
    // The limits were counted in Redis inside the requests' traces.
    expect(redis.length).toBeGreaterThan(0);
    for (const span of redis) {
      expect(span.attributes['db.query.text']).toBe(span.name);
      const { 'server.address': _server, 'server.port': _port, ...rest } = span.attributes;
      const said = [{ ...span, attributes: rest }];
      expect(holding(said, account.account_id)).toEqual([]);
      expect(holding(said, prefix)).toEqual([]);
      expect(holding(said, /acct:|ip:|127\.0\.0\.1/)).toEqual([]);
    }
  });
});
