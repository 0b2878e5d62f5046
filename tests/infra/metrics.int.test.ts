import { Agent, request } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRuntime, type Runtime } from '../../apps/runtime.ts';
import { countingFailures } from '../../apps/worker/background.ts';
import type { Database } from '../../infra/db/schema.ts';
import { createInProcessJobs } from '../../infra/jobs/in-process.ts';
import type { JobKind } from '../../infra/jobs/queue.ts';
import { createMetrics, scrapeReading, watchDatabase, watchJobs, watchPool } from '../../infra/metrics.ts';
import { serveMetrics } from '../../infra/metrics-server.ts';
import { catchUp } from '../../infra/projection-runner.ts';
import { asyncProjectors } from '../../projections/index.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { metricTypes, parseSamples, sampleValue } from '../support/metrics.ts';
import { catchUpAll, setUpAccount } from '../support/runtime.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * The metrics seam (infra/metrics.ts): a registry per instance, names by Prometheus's conventions, and
 * the gauges read at each scrape (projector lag, database, pool, job queues) moving with what they
 * measure; the listener of its own (infra/metrics-server.ts).
 */

const quiet = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} };
const backlinks = asyncProjectors.find((p) => p.name.startsWith('backlinks'));

describe.each(backends)('the gauges read from the database on %s', (backend) => {
  let test: TestDatabase;
  let runtime: Runtime;
  let accountId: string;
  let siteId: string;

  beforeAll(async () => {
    test = await createTestDatabase(backend);
    runtime = createRuntime(test.handle);
    ({ accountId, siteId } = await setUpAccount(runtime));
    await catchUpAll(runtime.db);
  });
  afterAll(async () => {
    await test?.drop();
  });

  const acquire = (n: number) =>
    runtime.commands.acquireBacklink(accountId, {
      siteId,
      acquiredOn: '2026-10-01',
      sourceDomain: `lag${n}.example`,
      sourceUrl: `https://lag${n}.example/page`,
      targetUrl: 'https://northside.example/',
      anchorText: `anchor ${n}`,
      anchorType: 'branded',
      category: 'industry',
    });

  it('shows an async projector that is not running falling behind, in events and seconds, and nothing once it caught up', async () => {
    if (!backlinks) throw new Error('no backlinks projector');
    const metrics = createMetrics({ defaultMetrics: false });
    watchDatabase(metrics, runtime.db, asyncProjectors);
    const projector = { projector: backlinks.name };

    let text = await metrics.scrape();
    expect(sampleValue(text, 'content_service_database_up')).toBe(1);
    expect(sampleValue(text, 'content_service_projector_lag_events', projector)).toBe(0);
    expect(sampleValue(text, 'content_service_projector_lag_seconds', projector)).toBe(0);
    // Every async projector has its series, and only those.
    const named = parseSamples(text)
      .filter((s) => s.name === 'content_service_projector_lag_events')
      .map((s) => s.labels.projector);
    expect(named.sort()).toEqual(asyncProjectors.map((p) => p.name).sort());

    // Nothing runs the projectors here: three backlinks wait for the backlinks projector.
    for (const n of [1, 2, 3]) await acquire(n);
    text = await metrics.scrape();
    expect(sampleValue(text, 'content_service_projector_lag_events', projector)).toBe(3);
    expect(sampleValue(text, 'content_service_projector_lag_seconds', projector)).toBeGreaterThan(0);
    // The seconds grow while it stays stopped.
    const first = sampleValue(text, 'content_service_projector_lag_seconds', projector);
    await expect
      .poll(
        async () => sampleValue(await metrics.scrape(), 'content_service_projector_lag_seconds', projector),
        PATIENCE,
      )
      .toBeGreaterThan(first);

    await catchUp(runtime.db, backlinks);
    text = await metrics.scrape();
    expect(sampleValue(text, 'content_service_projector_lag_events', projector)).toBe(0);
    expect(sampleValue(text, 'content_service_projector_lag_seconds', projector)).toBe(0);
  });

  it('reads the pool: its size, and a connection busy while a transaction holds it', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    watchPool(metrics, test.handle.pool);
    const before = await metrics.scrape();
    expect(sampleValue(before, 'content_service_db_pool_max')).toBe(backend === 'pglite' ? 1 : 10);
    expect(sampleValue(before, 'content_service_db_pool_waiting')).toBe(0);
    const busy = async () =>
      sampleValue(await metrics.scrape(), 'content_service_db_pool_connections', { state: 'busy' });
    // The announcer's NOTIFY for the appends before this test may hold a connection for a moment of
    // its own, so each count is waited for rather than read once.
    await runtime.db.transaction().execute(async () => {
      await expect.poll(busy, PATIENCE).toBe(1);
    });
    await expect.poll(busy, PATIENCE).toBe(0);
    const after = await metrics.scrape();
    expect(
      sampleValue(after, 'content_service_db_pool_connections', { state: 'idle' }),
    ).toBeGreaterThanOrEqual(1);
  });
});

describe('a database that does not answer', () => {
  let silent: Server;
  const sockets = new Set<Socket>();
  let db: Kysely<Database>;
  let pool: pg.Pool;

  beforeAll(async () => {
    // Takes connections and never says a word: a PostgreSQL gone silent.
    silent = createServer((socket) => {
      sockets.add(socket);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    pool = new pg.Pool({ host: '127.0.0.1', port, max: 1 });
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await db?.destroy().catch(() => {});
    await new Promise<void>((resolve) => silent?.close(() => resolve()));
  });

  it('is database_up 0 within the timeout, its lag series left out, and the scrape still answers', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    watchDatabase(metrics, db, asyncProjectors, { timeoutMs: 300 });
    const started = performance.now();
    const text = await metrics.scrape();
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(sampleValue(text, 'content_service_database_up')).toBe(0);
    expect(parseSamples(text).filter((s) => s.name.startsWith('content_service_projector_lag'))).toEqual([]);
    // A second scrape joins the read still hanging rather than queueing another behind it.
    await metrics.scrape();
    expect(pool.totalCount).toBe(1);
    expect(pool.waitingCount).toBe(0);
  });
});

describe('scrapeReading', () => {
  it('gives the gauges of one scrape one read, a new one for the next scrape', async () => {
    let reads = 0;
    const reading = scrapeReading(async () => ++reads, 1_000);
    const [a, b] = await Promise.all([reading(), reading()]);
    expect([a, b]).toEqual([1, 1]);
    expect(await reading()).toBe(2);
  });

  it('gives undefined for a read that fails, and says why', async () => {
    const errors: unknown[] = [];
    const reading = scrapeReading(
      async () => {
        throw new Error('no answer');
      },
      1_000,
      (error) => errors.push(error),
    );
    expect(await reading()).toBeUndefined();
    expect(String(errors[0])).toContain('no answer');
  });
});

describe('the job queues', () => {
  it('shows jobs waiting by queue, counts each failed run, the last one as final, and the failed job', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const failing: JobKind<{ n: number }> = {
      name: 'test.fails',
      queue: 'maintenance',
      attempts: 2,
      backoffMs: 1,
      run: async () => {
        throw new Error('it fails');
      },
    };
    const jobs = createInProcessJobs({
      kinds: countingFailures([failing as JobKind<never>], metrics.jobFailures),
      logger: quiet,
    });
    watchJobs(metrics, jobs);
    try {
      await jobs.add('test.fails', { n: 1 });
      let text = await metrics.scrape();
      expect(
        sampleValue(text, 'content_service_job_queue_jobs', { queue: 'maintenance', state: 'waiting' }),
      ).toBe(1);
      expect(
        sampleValue(text, 'content_service_job_queue_jobs', { queue: 'webhooks', state: 'waiting' }),
      ).toBe(0);
      // In-process queues have no Redis to report.
      expect(parseSamples(text).some((s) => s.name === 'content_service_redis_up')).toBe(false);

      jobs.startWorkers();
      await vi.waitFor(async () => {
        text = await metrics.scrape();
        expect(
          sampleValue(text, 'content_service_job_queue_jobs', { queue: 'maintenance', state: 'failed' }),
        ).toBe(1);
      }, PATIENCE);
      const job = { queue: 'maintenance', job: 'test.fails' };
      expect(sampleValue(text, 'content_service_job_failures_total', { ...job, final: 'false' })).toBe(1);
      expect(sampleValue(text, 'content_service_job_failures_total', { ...job, final: 'true' })).toBe(1);
      expect(
        sampleValue(text, 'content_service_job_queue_jobs', { queue: 'maintenance', state: 'waiting' }),
      ).toBe(0);
    } finally {
      await jobs.close();
    }
  });

  it('reports Redis down for BullMQ queues that do not answer in time', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    watchJobs(metrics, { kind: 'bullmq', status: () => new Promise(() => {}) }, { timeoutMs: 100 });
    const text = await metrics.scrape();
    expect(sampleValue(text, 'content_service_redis_up', { connection: 'jobs' })).toBe(0);
    expect(parseSamples(text).some((s) => s.name === 'content_service_job_queue_jobs')).toBe(false);
  });
});

describe('the registry', () => {
  it('is its own per instance: two in one process count apart', async () => {
    const one = createMetrics({ defaultMetrics: false });
    const two = createMetrics({ defaultMetrics: false });
    one.edits.inc({ origin: 'api', change: 'edit' });
    expect(sampleValue(await one.scrape(), 'content_service_edits_total', { origin: 'api' })).toBe(1);
    expect(sampleValue(await two.scrape(), 'content_service_edits_total', { origin: 'api' })).toBe(0);
  });

  it('names every metric by the conventions: the prefix, _total on counters, base units, snake_case labels', async () => {
    const metrics = createMetrics();
    metrics.probeRedis('limits', () => true);
    watchJobs(metrics, createInProcessJobs({ kinds: [], logger: quiet }));
    const text = await metrics.scrape();
    const ours = [...metricTypes(text)].filter(([name]) => name.startsWith('content_service_'));
    expect(ours.length).toBeGreaterThan(10);
    for (const [name, type] of ours) {
      expect(name).toMatch(/^content_service_[a-z0-9_]+$/);
      if (type === 'counter') expect(name).toMatch(/_total$/);
      else expect(name).not.toMatch(/_total$/);
      if (type === 'histogram') expect(name).toMatch(/_seconds$/);
      expect(name).not.toMatch(/_(ms|milliseconds|minutes|hours)$/);
    }
    for (const sample of parseSamples(text)) {
      for (const label of Object.keys(sample.labels)) expect(label).toMatch(/^[a-z][a-z0-9_]*$/);
    }
    // Node's own: event-loop delay and heap.
    expect(text).toContain('nodejs_eventloop_lag_p99_seconds');
    expect(text).toContain('nodejs_heap_size_used_bytes');
  });
});

describe('the metrics listener', () => {
  const keepAlive = new Agent({ keepAlive: true });
  const get = (url: string, method = 'GET') =>
    new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
      const req = request(url, { method, agent: keepAlive }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => {
          body += d.toString();
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }),
        );
      });
      req.on('error', reject);
      req.end();
    });

  it('serves /metrics in the Prometheus text format on its own port, nothing else, and closes with a connection kept open', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    metrics.edits.inc({ origin: 'mcp', change: 'edit' });
    const server = await serveMetrics(metrics, { host: '127.0.0.1', port: 0 });
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const scraped = await get(server.url);
    expect(scraped.status).toBe(200);
    expect(scraped.type).toContain('text/plain');
    expect(scraped.type).toContain('version=0.0.4');
    expect(sampleValue(scraped.body, 'content_service_edits_total', { origin: 'mcp', change: 'edit' })).toBe(
      1,
    );
    expect((await get(server.url.replace('/metrics', '/'))).status).toBe(404);
    expect((await get(server.url, 'POST')).status).toBe(405);
    await server.close();
    await expect(get(server.url)).rejects.toThrow();
  });
  it('serves /readyz from the check it is given: 503 starting until then, 200 or 503 as the check says', async () => {
    const server = await serveMetrics(createMetrics({ defaultMetrics: false }), {
      host: '127.0.0.1',
      port: 0,
    });
    const readyz = server.url.replace('/metrics', '/readyz');
    try {
      const starting = await get(readyz);
      expect(starting.status).toBe(503);
      expect(starting.type).toContain('application/json');
      expect(JSON.parse(starting.body)).toEqual({ status: 'starting' });
      let ready = true;
      server.serveReadiness(async () => ({ ready, body: { status: ready ? 'ready' : 'not_ready' } }));
      expect(await get(readyz)).toMatchObject({ status: 200, body: '{"status":"ready"}' });
      ready = false;
      expect(await get(readyz)).toMatchObject({ status: 503, body: '{"status":"not_ready"}' });
      expect((await get(readyz, 'POST')).status).toBe(405);
    } finally {
      await server.close();
    }
  });
});
