import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { type DbHandle, openDatabase } from '../../infra/db/open.ts';
import { CONNECT_TIMEOUT_MS, DatabaseUnreachableError, POOL_WAIT_MS } from '../../infra/db/reachability.ts';
import { isDatabaseUnavailable } from '../../infra/db/unavailable.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createProxiedTestRuntime, type PgProxy, startPgProxy } from '../support/pg-proxy.ts';
import { setUpAccount } from '../support/runtime.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * A database that does not answer (its connections dropped, new ones accepted and never answered: a
 * network black hole) is found out within the connect timeout (5 s), not the pool's wait (30 s): every
 * request then fails as unavailable (a 503) within seconds, those waiting for a pooled connection with
 * the attempts. Under load with the database there, a request waits for a free connection longer than
 * the connect timeout and succeeds.
 */

const quiet = { info: () => {}, warn: () => {}, error: () => {} };

/** How a query ended, and after how long. */
type Outcome = { error: unknown; ms: number };

/** An error's message and its causes'. */
function messages(error: unknown): string {
  const said: string[] = [];
  for (let e = error; e instanceof Error; e = e.cause) said.push(e.message);
  return said.join(' <- ');
}

async function timed(work: Promise<unknown>): Promise<Outcome> {
  const started = performance.now();
  const error = await work.then(
    () => null,
    (e: unknown) => e,
  );
  return { error, ms: performance.now() - started };
}

describe('a pool of 2 in front of a database that stops answering', () => {
  let test: TestDatabase;
  let proxy: PgProxy;
  let handle: DbHandle;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    proxy = await startPgProxy(test.databaseUrl as string);
    handle = await openDatabase({ databaseUrl: proxy.url, dataDir: 'memory://', poolSize: 2, logger: quiet });
  });
  afterEach(async () => {
    await proxy.restore();
  });
  afterAll(async () => {
    await proxy.restore();
    await handle?.close();
    await proxy?.close();
    await test?.drop();
  });

  it('fails every request of a burst as unavailable within seconds, then serves again once it answers', async () => {
    await sql`select 1`.execute(handle.db);
    proxy.stall();
    // The pool has seen its connections go.
    await vi.waitFor(() => expect(handle.pool.totalCount).toBe(0), PATIENCE);

    // Eight requests at once: two open a connection each (never answered), six wait for the pool.
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, () => timed(sql`select 1`.execute(handle.db))),
    );
    for (const { error } of outcomes) {
      expect(error).toBeInstanceOf(Error);
      expect(isDatabaseUnavailable(error), String(error)).toBe(true);
    }
    // Those waiting for the pool were told by the attempts, not left to the pool's 30 s wait.
    const refused = outcomes.filter((o) => o.error instanceof DatabaseUnreachableError);
    expect(refused.length).toBeGreaterThanOrEqual(6);
    expect(outcomes.some((o) => String(o.error).includes('timeout exceeded when trying to connect'))).toBe(
      false,
    );
    // The attempts' error says how far they got: connected, the startup never answered.
    const said = outcomes.map((o) => messages(o.error)).join('\n');
    expect(said).toMatch(
      new RegExp(
        `did not answer within ${CONNECT_TIMEOUT_MS} ms: .*\\(TCP connected in \\d+ ms, no answer to the startup\\)`,
      ),
    );
    // Within seconds: the connect timeout, far from the pool's wait.
    expect(Math.max(...outcomes.map((o) => o.ms))).toBeLessThan(POOL_WAIT_MS / 2);

    // While it is away, a request that would wait behind attempts is refused at once, as unavailable.
    const again = await timed(sql`select 1`.execute(handle.db));
    expect(isDatabaseUnavailable(again.error), String(again.error)).toBe(true);

    await proxy.restore();
    await vi.waitFor(async () => expect(await sql`select 2 as two`.execute(handle.db)).toBeTruthy(), {
      ...PATIENCE,
      timeout: PATIENCE.timeout + CONNECT_TIMEOUT_MS,
    });
  }, 60_000);

  it('under load, requests wait longer than the connect timeout for a free connection, and succeed', async () => {
    // Both connections busy for longer than it takes to give up opening one.
    const holdSeconds = CONNECT_TIMEOUT_MS / 1000 + 1.5;
    const holders = [1, 2].map(() => sql`select pg_sleep(${holdSeconds})`.execute(handle.db));
    await vi.waitFor(() => {
      expect(handle.pool.totalCount).toBe(2);
      expect(handle.pool.idleCount).toBe(0);
    }, PATIENCE);
    const waiting = Array.from({ length: 4 }, (_, n) =>
      sql<{ n: number }>`select ${n}::int as n`.execute(handle.db),
    );
    await vi.waitFor(() => expect(handle.pool.waitingCount).toBe(4), PATIENCE);
    const answers = await Promise.all(waiting);
    expect(answers.map((a) => a.rows[0]?.n)).toEqual([0, 1, 2, 3]);
    await Promise.all(holders);
  }, 60_000);
});

describe('a pool of 2 whose new connections do not get through while its open one answers', () => {
  let test: TestDatabase;
  let proxy: PgProxy;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    proxy = await startPgProxy(test.databaseUrl as string);
  });
  afterEach(async () => {
    await proxy.restore();
  });
  afterAll(async () => {
    await proxy?.close();
    await test?.drop();
  });

  /**
   * A pool of 2 with one connection, held by `select pg_sleep(holdSeconds)` when new connections stop
   * getting through; then a request, which must open the second. Returns how it ended.
   */
  async function requestBesideAHeldConnection(
    holdSeconds: number,
  ): Promise<{ error: unknown; value?: number; warned: string[] }> {
    const warned: string[] = [];
    const logger = {
      ...quiet,
      warn: (obj: object, msg: string) => warned.push(`${msg} ${JSON.stringify(obj)}`),
    };
    const handle = await openDatabase({ databaseUrl: proxy.url, dataDir: 'memory://', poolSize: 2, logger });
    try {
      await sql`select 1`.execute(handle.db);
      expect(handle.pool.totalCount).toBe(1);
      proxy.stallNew();
      const held = sql`select pg_sleep(${holdSeconds})`.execute(handle.db);
      await vi.waitFor(() => expect(handle.pool.idleCount).toBe(0), PATIENCE);
      const request = sql<{ n: number }>`select 42 as n`.execute(handle.db).then(
        (r) => ({ error: null, value: r.rows[0]?.n, warned }),
        (error: unknown) => ({ error, warned }),
      );
      await vi.waitFor(() => expect(proxy.stalled()).toBe(1), PATIENCE);
      await held;
      return await request;
    } finally {
      await proxy.restore();
      await handle.close();
    }
  }

  it('lets the request whose attempt fails wait for the connection that answered meanwhile', async () => {
    // The held statement ends within the attempt's 5 s: the server is there, and the request is
    // served by that connection once it is free.
    const outcome = await requestBesideAHeldConnection(1);
    expect(outcome.error).toBeNull();
    expect(outcome.value).toBe(42);
    // The failed attempt is in the log, with how far it got.
    expect(outcome.warned).toEqual([
      expect.stringMatching(
        /^an attempt to open a PostgreSQL connection failed while the others answered; its request waits for one of them .*TCP connected in \d+ ms, no answer to the startup/,
      ),
    ]);
  }, 60_000);

  it('fails the request as unavailable when nothing answered during its attempt', async () => {
    // The held statement outlasts the attempt: no sign of the server, as in an outage.
    const outcome = await requestBesideAHeldConnection(CONNECT_TIMEOUT_MS / 1000 + 2);
    expect(isDatabaseUnavailable(outcome.error), String(outcome.error)).toBe(true);
    expect(messages(outcome.error)).toMatch(/connection attempt given up/);
    expect(outcome.warned.join('\n')).not.toMatch(/failed while the others answered/);
  }, 60_000);
});

describe('the API while the database does not answer', () => {
  let runtime: Runtime;
  let proxy: PgProxy;
  let drop: () => Promise<void>;
  let app: FastifyInstance;
  let key: string;
  beforeAll(async () => {
    ({ runtime, proxy, drop } = await createProxiedTestRuntime());
    const { accountId } = await setUpAccount(runtime);
    ({ key } = await runtime.commands.createApiKey(accountId, { name: 'Test key', scope: 'write' }));
    app = await buildApp({
      runtime,
      config: {
        PUBLIC_URL: 'http://cs.example.test',
        LOG_LEVEL: 'silent',
        MEDIA_DIR: '/tmp/cs-reachability',
      },
      logger: false,
    });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await drop?.();
  });

  it('answers a burst of requests 503 unavailable within seconds, and 200 once it answers again', async () => {
    const call = () =>
      app.inject({ method: 'GET', url: '/api/v1/sites', headers: { authorization: `Bearer ${key}` } });
    expect((await call()).statusCode).toBe(200);
    proxy.stall();
    // The pool has seen its open connections go (none idle to hand out). The server's own background
    // readers (the async projections' poll, the LISTEN connection) may be opening new ones meanwhile,
    // each for up to the connect timeout: those count in `totalCount`, so it need not reach 0.
    await vi.waitFor(() => expect(runtime.handle.pool.idleCount).toBe(0), PATIENCE);
    const started = performance.now();
    // More requests than the pool's 10 connections.
    const answers = await Promise.all(
      Array.from({ length: 14 }, async () => {
        const res = await call();
        return { res, ms: performance.now() - started };
      }),
    );
    for (const { res } of answers) {
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('5');
      expect(res.json()).toMatchObject({ status: 503, code: 'unavailable' });
    }
    expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(POOL_WAIT_MS / 2);
    await proxy.restore();
    await vi.waitFor(async () => expect((await call()).statusCode).toBe(200), {
      ...PATIENCE,
      timeout: PATIENCE.timeout + CONNECT_TIMEOUT_MS,
    });
  }, 60_000);
});
