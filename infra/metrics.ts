import { sql } from 'kysely';
import type pg from 'pg';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Db } from './db/schema.ts';
import type { NewEvent } from './event-store.ts';
import type { Jobs } from './jobs/queue.ts';
import type { Projector } from './projection.ts';
import { lagDetail } from './projection-runner.ts';

/*
 * Metrics in the Prometheus text format (docs/operations.md "Metrics"). Each process makes one
 * registry with `createMetrics` and hands it through its wiring to what counts (the HTTP hook, the
 * command handlers, the webhook sender, the jobs); prom-client's global default registry is never
 * used, so several apps in one test process each count their own. What is counted as it happens is a
 * counter or a histogram here; what is a state (pool, queues, projector lag) is a gauge read when
 * Prometheus scrapes (`watch*`), so that it costs nothing between scrapes.
 *
 * Names follow Prometheus's conventions: the `content_service_` prefix, base units (`_seconds`),
 * `_total` on counters, snake_case labels whose values come from small fixed sets (route templates,
 * never URLs or ids). Node's own metrics (event-loop delay, heap, GC, CPU) keep prom-client's
 * standard names, without the prefix, so that the usual dashboards read them.
 */

export const METRIC_PREFIX = 'content_service_';

/** The faces an HTTP request is counted under (apps/server/http/metrics.ts says which path is which). */
export type Face = 'api' | 'mcp' | 'pages' | 'probes';

/** Seconds: from a millisecond fast read to a 30 s slow one. */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds an activity record waits for its batch: the batch goes 100 ms after its first record. */
const BATCH_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds from a delivery's creation to its success: most within a second, retries up to a day. */
const DELIVERY_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 36000, 86400];

export type Metrics = {
  readonly registry: Registry;
  /** The Content-Type of `scrape`'s text. */
  readonly contentType: string;
  /** Every HTTP request answered, by face, route template, method and status. */
  readonly requestDuration: Histogram<'face' | 'route' | 'method' | 'status'>;
  /** Every error answer (a problem document, a refusal page, an MCP tool error), by face and code. */
  readonly refusals: Counter<'face' | 'code'>;
  /** Every new article revision, by origin and kind of change. */
  readonly edits: Counter<'origin' | 'change'>;
  /** How long each activity record waited in its batch before it was stored. */
  readonly activityBatchDelay: Histogram;
  /** Every webhook attempt, by what came of it. */
  readonly webhookAttempts: Counter<'result'>;
  /** Seconds from a webhook delivery's creation to the attempt that succeeded. */
  readonly webhookDeliveryDelay: Histogram;
  /** Webhook endpoints turned off by the service, by reason (gone: a 410; failing: for days). */
  readonly webhookEndpointsDisabled: Counter<'reason'>;
  /** Every job run that failed, by queue, job and whether it was the last attempt. */
  readonly jobFailures: Counter<'queue' | 'job' | 'final'>;
  /** The use cases' reads, by where they ran: a read replica (`host:port`) or `primary`. */
  readonly dbReads: Counter<'target'>;
  /** Reads that went to the primary although there are read replicas, by why: lagging, down, not_caught_up. */
  readonly replicaFallbacks: Counter<'reason'>;
  /** The read replicas as their monitor last found them (infra/db/replicas.ts): asked at each scrape. */
  watchReplicas(status: () => readonly ReplicaGauge[]): void;
  /** Whether Redis answers, per connection: `up` is asked at each scrape. */
  probeRedis(connection: string, up: () => boolean | Promise<boolean>): void;
  /** The text Prometheus reads: every metric, the gauges read now. */
  scrape(): Promise<string>;
};

/** What the replica gauges show of one read replica. */
export type ReplicaGauge = { name: string; up: boolean; lagSeconds: number | null };

/** Whether a probe says yes; a probe that throws says no. */
async function answers(probe: () => boolean | Promise<boolean>): Promise<boolean> {
  try {
    return await probe();
  } catch {
    return false;
  }
}

/**
 * A new registry with this service's instruments. `defaultMetrics` (default true) adds Node's own:
 * event-loop delay, heap and other memory, GC, CPU, handles.
 */
export function createMetrics(opts: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const redisProbes = new Map<string, () => boolean | Promise<boolean>>();
  new Gauge({
    name: `${METRIC_PREFIX}redis_up`,
    help: 'Whether Redis answered at this scrape (1) or not (0), per connection: limits (the server), jobs (BullMQ)',
    labelNames: ['connection'],
    registers,
    async collect() {
      const probes = [...redisProbes];
      const readings = await Promise.all(probes.map(([, up]) => answers(up)));
      this.reset();
      probes.forEach(([connection], i) => {
        this.set({ connection }, readings[i] ? 1 : 0);
      });
    },
  });
  let replicas: () => readonly ReplicaGauge[] = () => [];
  new Gauge({
    name: `${METRIC_PREFIX}db_replica_lag_seconds`,
    help: 'Seconds each read replica is behind the primary (0: it has replayed all it received), at its last check; absent while it is down',
    labelNames: ['replica'],
    registers,
    collect() {
      this.reset();
      for (const r of replicas()) if (r.lagSeconds !== null) this.set({ replica: r.name }, r.lagSeconds);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}db_replica_up`,
    help: 'Whether each read replica answered its last check as a streaming replica (1) or not (0)',
    labelNames: ['replica'],
    registers,
    collect() {
      this.reset();
      for (const r of replicas()) this.set({ replica: r.name }, r.up ? 1 : 0);
    },
  });
  return {
    registry,
    contentType: registry.contentType,
    requestDuration: new Histogram({
      name: `${METRIC_PREFIX}http_request_duration_seconds`,
      help: 'HTTP requests answered, by face (api, mcp, pages, probes), route template, method and status',
      labelNames: ['face', 'route', 'method', 'status'],
      buckets: REQUEST_BUCKETS,
      registers,
    }),
    refusals: new Counter({
      name: `${METRIC_PREFIX}refusals_total`,
      help: 'Error answers by face and code (rate_limited, edit_limit_reached, protected_links_modified, revision_mismatch, conflict, unavailable, ...)',
      labelNames: ['face', 'code'],
      registers,
    }),
    edits: new Counter({
      name: `${METRIC_PREFIX}edits_total`,
      help: 'Article revisions made, by origin (api, mcp, editor, rewrite) and change (create, edit, featured_image, restore, status)',
      labelNames: ['origin', 'change'],
      registers,
    }),
    activityBatchDelay: new Histogram({
      name: `${METRIC_PREFIX}activity_batch_delay_seconds`,
      help: 'How long an activity record waited in its batch before it was stored',
      buckets: BATCH_BUCKETS,
      registers,
    }),
    webhookAttempts: new Counter({
      name: `${METRIC_PREFIX}webhook_attempts_total`,
      help: 'Webhook delivery attempts by result: delivered (2xx), retry (failed, tried again later), failed (failed for good, or its endpoint disabled)',
      labelNames: ['result'],
      registers,
    }),
    webhookDeliveryDelay: new Histogram({
      name: `${METRIC_PREFIX}webhook_delivery_delay_seconds`,
      help: 'Seconds from a webhook delivery being queued to the attempt that delivered it (retries included)',
      buckets: DELIVERY_BUCKETS,
      registers,
    }),
    webhookEndpointsDisabled: new Counter({
      name: `${METRIC_PREFIX}webhook_endpoints_disabled_total`,
      help: 'Webhook endpoints the service turned off, by reason: gone (answered 410), failing (failing for days)',
      labelNames: ['reason'],
      registers,
    }),
    jobFailures: new Counter({
      name: `${METRIC_PREFIX}job_failures_total`,
      help: 'Background job runs that failed, by queue, job and final (true: no attempt left)',
      labelNames: ['queue', 'job', 'final'],
      registers,
    }),
    dbReads: new Counter({
      name: `${METRIC_PREFIX}db_reads_total`,
      help: 'Reads of the use cases (lists, articles, backlinks, stats, activity, revisions), by where they ran: a read replica (host:port) or primary',
      labelNames: ['target'],
      registers,
    }),
    replicaFallbacks: new Counter({
      name: `${METRIC_PREFIX}db_replica_fallbacks_total`,
      help: "Reads sent to the primary although read replicas are configured, by reason: lagging (every replica past REPLICA_MAX_LAG_SECONDS), down (none answers, or the read failed on one), not_caught_up (none had replayed the account's last write in time)",
      labelNames: ['reason'],
      registers,
    }),
    watchReplicas(status) {
      replicas = status;
    },
    probeRedis(connection, up) {
      redisProbes.set(connection, up);
    },
    scrape: () => registry.metrics(),
  };
}

/**
 * A reading shared by the gauges of one scrape: the gauges' collect callbacks run together, and the
 * first starts the read that the others join. A read still running (a database that does not answer)
 * is joined, never started again; each caller waits at most `timeoutMs`, then gets undefined, as it
 * does when the read fails (`onError` hears why).
 */
export function scrapeReading<T>(
  read: () => Promise<T>,
  timeoutMs: number,
  onError?: (error: unknown) => void,
): () => Promise<T | undefined> {
  let inFlight: Promise<T | undefined> | null = null;
  return async () => {
    if (!inFlight) {
      const started = read().then(
        (value) => value,
        (error: unknown) => {
          onError?.(error);
          return undefined;
        },
      );
      inFlight = started;
      void started.finally(() => {
        if (inFlight === started) inFlight = null;
      });
    }
    const current = inFlight;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        current,
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), timeoutMs);
          timer.unref();
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  };
}

/** The database pool's connections (busy, idle), requests waiting for one, and its size. */
export function watchPool(metrics: Metrics, pool: pg.Pool): void {
  const registers = [metrics.registry];
  new Gauge({
    name: `${METRIC_PREFIX}db_pool_connections`,
    help: 'Database pool connections by state: busy (checked out) or idle',
    labelNames: ['state'],
    registers,
    collect() {
      this.set({ state: 'busy' }, pool.totalCount - pool.idleCount);
      this.set({ state: 'idle' }, pool.idleCount);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}db_pool_waiting`,
    help: 'Queries waiting for a database pool connection',
    registers,
    collect() {
      this.set(pool.waitingCount);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}db_pool_max`,
    help: 'The database pool size (1 on the embedded database)',
    registers,
    collect() {
      this.set(pool.options.max ?? 10);
    },
  });
}

/**
 * The activity records this process holds that are not stored yet: a batch's worth (up to 100 ms of
 * calls) normally; growing while the database cannot take them, up to ACTIVITY_SPOOL_MAX, where calls
 * that would be recorded are refused (docs/operations.md "PostgreSQL restarts").
 */
export function watchActivitySpool(metrics: Metrics, unstored: () => number): void {
  new Gauge({
    name: `${METRIC_PREFIX}activity_records_unstored`,
    help: 'Activity records held in this process, not stored yet: their batch, or the spool while the database is away',
    registers: [metrics.registry],
    collect() {
      this.set(unstored());
    },
  });
}

/** How long a scrape waits for the database's answers before it reports it down. */
export const DATABASE_SCRAPE_TIMEOUT_MS = 2_000;

/**
 * Read from the database at each scrape: whether it answers, and how far each async projector (and
 * subscription) is behind the log, in events and in seconds since the oldest event it has not applied
 * was recorded. A database that does not answer within `timeoutMs` is `database_up 0`, and the lag
 * series are left out of that scrape.
 */
export function watchDatabase(
  metrics: Metrics,
  db: Db,
  projectors: readonly Projector<NewEvent>[],
  opts: { timeoutMs?: number; onError?: (error: unknown) => void } = {},
): void {
  const registers = [metrics.registry];
  const asyncOnes = projectors.filter((p) => p.mode === 'async');
  const reading = scrapeReading(
    async () => {
      await sql`select 1`.execute(db);
      const lag: Array<{ name: string; events: number; seconds: number }> = [];
      // One after the other: the embedded database has one connection, and requests come first.
      for (const p of asyncOnes) lag.push({ name: p.name, ...(await lagDetail(db, p)) });
      return lag;
    },
    opts.timeoutMs ?? DATABASE_SCRAPE_TIMEOUT_MS,
    opts.onError,
  );
  new Gauge({
    name: `${METRIC_PREFIX}database_up`,
    help: 'Whether the database answered at this scrape (1) or not within 2 s (0)',
    registers,
    async collect() {
      this.set((await reading()) ? 1 : 0);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}projector_lag_events`,
    help: 'Events of its types that an async projector or subscription has not applied yet',
    labelNames: ['projector'],
    registers,
    async collect() {
      const lag = await reading();
      this.reset();
      for (const p of lag ?? []) this.set({ projector: p.name }, p.events);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}projector_lag_seconds`,
    help: 'Seconds since the oldest event an async projector or subscription has not applied was recorded (0: caught up)',
    labelNames: ['projector'],
    registers,
    async collect() {
      const lag = await reading();
      this.reset();
      for (const p of lag ?? []) this.set({ projector: p.name }, p.seconds);
    },
  });
}

/** How long a scrape waits for the job queues (as the detailed /readyz does: apps/readiness.ts). */
export const JOBS_SCRAPE_TIMEOUT_MS = 1_000;

/**
 * The job queues at each scrape: jobs by queue and state (waiting, active, delayed, failed) and the
 * age of the oldest waiting job; with BullMQ also `redis_up{connection="jobs"}`, whether they answered.
 */
export function watchJobs(
  metrics: Metrics,
  jobs: Pick<Jobs, 'kind' | 'status'>,
  opts: { timeoutMs?: number; onError?: (error: unknown) => void } = {},
): void {
  const registers = [metrics.registry];
  const reading = scrapeReading(() => jobs.status(), opts.timeoutMs ?? JOBS_SCRAPE_TIMEOUT_MS, opts.onError);
  new Gauge({
    name: `${METRIC_PREFIX}job_queue_jobs`,
    help: 'Jobs by queue and state: waiting, active, delayed, failed (failed for good, kept for `jobs failed`)',
    labelNames: ['queue', 'state'],
    registers,
    async collect() {
      const queues = await reading();
      this.reset();
      for (const q of queues ?? []) {
        this.set({ queue: q.queue, state: 'waiting' }, q.waiting);
        this.set({ queue: q.queue, state: 'active' }, q.active);
        this.set({ queue: q.queue, state: 'delayed' }, q.delayed);
        this.set({ queue: q.queue, state: 'failed' }, q.failed);
      }
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}job_queue_oldest_waiting_seconds`,
    help: 'Age of the oldest job waiting to run, by queue (0: none waits)',
    labelNames: ['queue'],
    registers,
    async collect() {
      const queues = await reading();
      this.reset();
      for (const q of queues ?? []) this.set({ queue: q.queue }, (q.oldestWaitingMs ?? 0) / 1000);
    },
  });
  if (jobs.kind === 'bullmq') metrics.probeRedis('jobs', async () => (await reading()) !== undefined);
}
