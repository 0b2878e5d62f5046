import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOf, unwrap } from '../../apps/application/call.ts';
import { createKeys } from '../../apps/application/keys.ts';
import { openRuntime, type Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { createRequestLimiter } from '../../apps/server/http/limits.ts';
import { createReplicaReads, type ReplicaReads, replicaName } from '../../infra/db/replicas.ts';
import { memoryPositions, redisPositions, type WritePositions } from '../../infra/db/write-positions.ts';
import { createMetrics, type Metrics } from '../../infra/metrics.ts';
import { sampleValue } from '../support/metrics.ts';
import { type ReplicatedPair, replicaTestsSkipped, startReplicatedPair } from '../support/replica.ts';
import { addSiteWithArticle, setUpAccount } from '../support/runtime.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

/*
 * Reads on a real streaming replica (infra/db/replicas.ts): a primary and a replica made for this file
 * (tests/support/replica.ts), the replica applying the WAL 2 s late (`recovery_min_apply_delay`), so
 * that a read sent to it right after a write would find the write missing.
 */

const skip = replicaTestsSkipped('tests/infra/replicas.int.test.ts');

const quiet = { info: () => {}, warn: () => {}, error: () => {} };
const DATABASE = 'content';
const config = {
  PUBLIC_URL: 'http://cs.example.test',
  LOG_LEVEL: 'silent' as const,
  MEDIA_DIR: '/tmp/cs-replica-test',
};

type Account = { accountId: string; articleId: string; key: string };

describe.skipIf(skip !== null)('reads on a streaming replica', () => {
  let pair: ReplicatedPair;
  let runtime: Runtime;
  const closing: Array<() => Promise<unknown>> = [];

  /** An app whose use cases read through `reads`, without the request limit in the way. */
  async function appOn(on: Runtime, reads: ReplicaReads, metrics?: Metrics): Promise<FastifyInstance> {
    const limiter = createRequestLimiter({ perMinute: 100_000, logger: quiet });
    const app = await buildApp({
      runtime: on,
      config,
      logger: false,
      reads,
      limit: limiter.hook,
      ...(metrics ? { metrics } : {}),
    });
    closing.push(async () => {
      await app.close();
      await limiter.close();
    });
    return app;
  }

  async function replicaReads(
    opts: {
      positions?: WritePositions;
      metrics?: Metrics;
      maxLagSeconds?: number;
      checkEveryMs?: number;
    } = {},
  ): Promise<ReplicaReads> {
    const reads = await createReplicaReads({
      primary: runtime.db,
      urls: [pair.replicaUrl(DATABASE)],
      maxLagSeconds: opts.maxLagSeconds ?? 30,
      positions: opts.positions ?? memoryPositions(),
      logger: quiet,
      metrics: opts.metrics,
      checkEveryMs: opts.checkEveryMs ?? 200,
    });
    closing.push(() => reads.close());
    return reads;
  }

  /** The key use cases as the Connect Site page calls them, reading through `reads`. */
  const buildApplicationKeys = (reads: ReplicaReads) =>
    createKeys({ db: runtime.db, reads, commands: runtime.commands });

  async function account(name: string): Promise<Account> {
    const { accountId } = await setUpAccount(runtime, name);
    const { articleId } = await addSiteWithArticle(runtime, accountId);
    const { key } = await runtime.commands.createApiKey(accountId, { name: 'Test key', scope: 'write' });
    return { accountId, articleId, key };
  }

  const getArticle = (app: FastifyInstance, who: Account) =>
    app.inject({
      method: 'GET',
      url: `/api/v1/articles/${who.articleId}`,
      headers: { authorization: `Bearer ${who.key}` },
    });

  const editTitle = (app: FastifyInstance, who: Account, title: string) =>
    app.inject({
      method: 'PUT',
      url: `/api/v1/articles/${who.articleId}`,
      headers: { authorization: `Bearer ${who.key}`, 'content-type': 'application/json' },
      payload: { title },
    });

  const counted = async (metrics: Metrics, name: string, labels: Record<string, string>) =>
    sampleValue(await metrics.scrape(), `content_service_${name}`, labels);

  /** Until the replica's monitor says `ok` of it, within `ms`. */
  async function until(
    reads: ReplicaReads,
    ok: (s: ReturnType<ReplicaReads['status']>[number]) => boolean,
    ms = 15_000,
  ) {
    const deadline = Date.now() + ms;
    for (;;) {
      await reads.check();
      const [status] = reads.status();
      if (status && ok(status)) return;
      if (Date.now() > deadline)
        throw new Error(
          `the replica did not get there: ${JSON.stringify(status, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    pair = await startReplicatedPair({ recovery_min_apply_delay: '2s' });
    const admin = new pg.Client({ connectionString: pair.primaryUrl() });
    await admin.connect();
    await admin.query(`create database ${DATABASE}`);
    await admin.end();
    runtime = await openRuntime(
      { DATABASE_URL: pair.primaryUrl(DATABASE), DATA_DIR: '/tmp/cs-replica-test' },
      { migrate: true, logger: quiet, poolSize: 10 },
    );
  }, 120_000);

  afterAll(async () => {
    for (const close of closing.reverse()) await close().catch(() => {});
    await runtime?.close();
    await pair?.stop();
  }, 60_000);

  it('never reads an older revision after an own write, and reads of an account without writes go to the replica', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const reads = await replicaReads({ metrics });
    const app = await appOn(runtime, reads, metrics);
    const writer = await account('Writer Ltd');
    const reader = await account('Reader Ltd');
    await pair.caughtUp();
    await until(reads, (s) => s.up && s.lagSeconds !== null && s.lagSeconds < 30);

    for (let i = 1; i <= 50; i++) {
      const edited = await editTitle(app, writer, `Title ${i}`);
      expect(edited.statusCode).toBe(200);
      const revision = edited.json<{ revision: number }>().revision;
      const read = await getArticle(app, writer);
      expect(read.statusCode).toBe(200);
      expect(read.json<{ revision: number; title: string }>()).toMatchObject({
        revision,
        title: `Title ${i}`,
      });
    }
    // The replica, 2 s behind, never had them in time: every one of those reads went to the primary.
    expect(await counted(metrics, 'db_replica_fallbacks_total', { reason: 'not_caught_up' })).toBe(50);

    const onReplica = await counted(metrics, 'db_reads_total', { target: replicaName(pair.replicaUrl()) });
    for (let i = 0; i < 10; i++) expect((await getArticle(app, reader)).statusCode).toBe(200);
    expect(await counted(metrics, 'db_reads_total', { target: replicaName(pair.replicaUrl()) })).toBe(
      onReplica + 10,
    );
    expect(await counted(metrics, 'db_replica_fallbacks_total', { reason: 'not_caught_up' })).toBe(50);

    // Once the replica has replayed the writer's last write, the writer's reads go to it too.
    await pair.caughtUp();
    const before = await counted(metrics, 'db_reads_total', { target: 'primary' });
    const last = await getArticle(app, writer);
    expect(last.json<{ title: string }>().title).toBe('Title 50');
    expect(await counted(metrics, 'db_reads_total', { target: 'primary' })).toBe(before);
  }, 120_000);

  it('accepts a key made a moment ago that the replica has not replayed yet, and refuses it once revoked', async () => {
    const reads = await replicaReads();
    const app = await appOn(runtime, reads);
    const who = await account('New Key Ltd');
    await pair.caughtUp();
    await until(reads, (s) => s.up);
    // Made as the CLI makes it, with no write position: the replica, 2 s behind, does not know it yet.
    const { keyId, key } = await runtime.commands.createApiKey(who.accountId, {
      name: 'CLI key',
      scope: 'read',
    });
    const fresh = { ...who, key };
    // The first request finds the key on the primary; the next ones confirm it in their read's statement.
    for (let i = 0; i < 3; i++) expect((await getArticle(app, fresh)).statusCode).toBe(200);
    // Revoked (through the application, as the Connect Site page does): refused at once.
    const holder = { type: 'user' as const, id: who.accountId, name: 'New Key Ltd' };
    const call = callOf({ accountId: who.accountId, actor: holder, origin: 'editor', scope: 'write' });
    unwrap(await buildApplicationKeys(reads).revoke(call, keyId));
    expect((await getArticle(app, fresh)).statusCode).toBe(401);
    expect((await getArticle(app, who)).statusCode).toBe(200);
  }, 120_000);

  it('shares the write positions through Redis: a write through one app is read through another', async () => {
    const redis = new Redis(TEST_REDIS_URL, { lazyConnect: false, maxRetriesPerRequest: 1 });
    closing.push(() => redis.quit());
    const prefix = `cs-test:wal:${Date.now()}:${Math.random().toString(36).slice(2)}`;
    const second = await openRuntime(
      { DATABASE_URL: pair.primaryUrl(DATABASE), DATA_DIR: '/tmp/cs-replica-test' },
      { logger: quiet, poolSize: 4 },
    );
    closing.push(() => second.close());
    const one = await appOn(runtime, await replicaReads({ positions: redisPositions(redis, { prefix }) }));
    const two = await appOn(second, await replicaReads({ positions: redisPositions(redis, { prefix }) }));
    // A third app that knows only its own writes: what the second would read without Redis.
    const alone = await appOn(second, await replicaReads());
    const who = await account('Shared Ltd');
    await pair.caughtUp();

    for (let i = 1; i <= 5; i++) {
      const edited = await editTitle(one, who, `Shared ${i}`);
      expect(edited.statusCode).toBe(200);
      const read = await getArticle(two, who);
      expect(read.json<{ title: string }>().title).toBe(`Shared ${i}`);
    }
    expect((await getArticle(alone, who)).json<{ title: string }>().title).not.toBe('Shared 5');
  }, 120_000);

  it('answers reads from the primary while the replica is down, counting them as down', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    // A monitor that will not look again during the test: the first read finds the replica gone itself.
    const unwatched = await replicaReads({ metrics, checkEveryMs: 3_600_000 });
    const watched = await replicaReads({ metrics });
    const appUnwatched = await appOn(runtime, unwatched, metrics);
    const app = await appOn(runtime, watched);
    const who = await account('Outage Ltd');
    await pair.caughtUp();
    await until(watched, (s) => s.up);
    expect((await getArticle(appUnwatched, who)).statusCode).toBe(200);

    await pair.stopReplica();
    try {
      // Retried once on the primary when its connection fails.
      const read = await getArticle(appUnwatched, who);
      expect(read.statusCode).toBe(200);
      expect(await counted(metrics, 'db_replica_fallbacks_total', { reason: 'down' })).toBe(1);
      // Then skipped.
      expect((await getArticle(appUnwatched, who)).statusCode).toBe(200);
      expect(await counted(metrics, 'db_replica_fallbacks_total', { reason: 'down' })).toBe(2);

      await until(watched, (s) => !s.up);
      for (let i = 0; i < 3; i++) expect((await getArticle(app, who)).statusCode).toBe(200);
    } finally {
      await pair.startReplica();
    }
    await until(watched, (s) => s.up);
  }, 120_000);

  it('skips a replica that lags past REPLICA_MAX_LAG_SECONDS', async () => {
    await pair.stopReplica();
    await pair.startReplica({ recovery_min_apply_delay: '10s' });
    try {
      const metrics = createMetrics({ defaultMetrics: false });
      const reads = await replicaReads({ metrics, maxLagSeconds: 1 });
      const app = await appOn(runtime, reads, metrics);
      const reader = await account('Lagging Ltd');
      const other = await account('Busy Ltd');
      // Writes the replica will hold back for 10 s.
      await editTitle(app, other, 'Busy');
      await until(reads, (s) => s.up && s.lagSeconds !== null && s.lagSeconds > 1);
      const read = await getArticle(app, reader);
      expect(read.statusCode).toBe(200);
      expect(await counted(metrics, 'db_replica_fallbacks_total', { reason: 'lagging' })).toBe(1);
      expect(await counted(metrics, 'db_reads_total', { target: 'primary' })).toBe(1);
      metrics.watchReplicas(reads.status);
      const lag = sampleValue(await metrics.scrape(), 'content_service_db_replica_lag_seconds', {
        replica: replicaName(pair.replicaUrl()),
      });
      expect(lag).toBeGreaterThan(1);
    } finally {
      await pair.stopReplica();
      await pair.startReplica();
    }
  }, 120_000);
});
