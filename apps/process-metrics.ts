import { Gauge } from 'prom-client';
import type { Config } from '../infra/config.ts';
import type { DbHandle } from '../infra/db/open.ts';
import type { NewEvent } from '../infra/event-store.ts';
import type { Jobs } from '../infra/jobs/queue.ts';
import {
  createMetrics,
  DATABASE_SCRAPE_TIMEOUT_MS,
  METRIC_PREFIX,
  type Metrics,
  scrapeReading,
  watchActivitySpool,
  watchDatabase,
  watchJobs,
  watchPool,
} from '../infra/metrics.ts';
import { type MetricsServer, serveMetrics } from '../infra/metrics-server.ts';
import type { Projector } from '../infra/projection.ts';
import { webhookBacklog } from '../infra/webhooks/deliveries.ts';

/*
 * The metrics of a process (the server, the worker), put together by its root (serve.ts, run.ts): made before the
 * parts that count (the runtime's commands, the jobs, the app), then, once those exist, the gauges read
 * at each scrape and the listener on METRICS_PORT. Without METRICS_PORT there are none at all.
 */

/** This process's metrics, or undefined when METRICS_PORT is unset. */
export function metricsFor(config: Pick<Config, 'METRICS_PORT'>): Metrics | undefined {
  return config.METRICS_PORT === undefined ? undefined : createMetrics();
}

type Log = { warn(obj: object, msg: string): void; error(obj: object, msg: string): void };

/** What a process's gauges read at each scrape. */
export type ProcessParts = {
  handle: Pick<DbHandle, 'db' | 'pool'>;
  /** The async projectors and the subscriptions (their lag). */
  projectors: readonly Projector<NewEvent>[];
  jobs: Pick<Jobs, 'kind' | 'status'>;
  /** The limits' Redis connection, where there is one. */
  limitsRedis?: { readonly status: string } | undefined;
  /** The activity records not stored yet (a process that records calls: the server). */
  unstoredActivity?: (() => number) | undefined;
  /** The read replicas as their monitor last found them (a process with DATABASE_REPLICA_URLS). */
  replicas?: (() => readonly { name: string; up: boolean; lagSeconds: number | null }[]) | undefined;
  logger: Log;
};

/** Registers the gauges read at each scrape: pool, database and projector lag, queues, Redis, webhooks, the activity spool. */
export function watchProcess(metrics: Metrics, parts: ProcessParts): void {
  const { handle, logger } = parts;
  const onError = (what: string) => (error: unknown) =>
    logger.warn({ err: error }, `metrics: ${what} did not answer this scrape`);
  watchPool(metrics, handle.pool);
  watchDatabase(metrics, handle.db, parts.projectors, { onError: onError('the database') });
  watchJobs(metrics, parts.jobs, { onError: onError('the job queues') });
  const redis = parts.limitsRedis;
  if (redis) metrics.probeRedis('limits', () => redis.status === 'ready');
  if (parts.unstoredActivity) watchActivitySpool(metrics, parts.unstoredActivity);
  if (parts.replicas) metrics.watchReplicas(parts.replicas);
  const backlog = scrapeReading(
    () => webhookBacklog(handle.db),
    DATABASE_SCRAPE_TIMEOUT_MS,
    onError('the database (webhooks)'),
  );
  const registers = [metrics.registry];
  new Gauge({
    name: `${METRIC_PREFIX}webhook_endpoints_failing`,
    help: 'Enabled webhook endpoints whose last attempt failed',
    registers,
    async collect() {
      const b = await backlog();
      if (b) this.set(b.failingEndpoints);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}webhook_deliveries_pending`,
    help: 'Webhook deliveries waiting to be sent (due now, or retries planned)',
    registers,
    async collect() {
      const b = await backlog();
      if (b) this.set(b.pendingDeliveries);
    },
  });
}

/**
 * Starts the metrics listener on METRICS_HOST:METRICS_PORT; a port that cannot be had stops the start
 * with one line on stderr naming the variable, as a bad value does.
 */
export async function serveMetricsOrExit(
  metrics: Metrics,
  config: Pick<Config, 'METRICS_HOST' | 'METRICS_PORT'>,
  logger: Log & { info(obj: object, msg: string): void },
): Promise<MetricsServer> {
  try {
    const server = await serveMetrics(metrics, {
      host: config.METRICS_HOST,
      port: config.METRICS_PORT ?? 0,
      logger,
    });
    logger.info({ metrics_url: server.url }, `metrics listening at ${server.url}`);
    return server;
  } catch (error) {
    process.stderr.write(
      `Cannot serve metrics on METRICS_HOST=${config.METRICS_HOST} METRICS_PORT=${config.METRICS_PORT}: ${(error as Error).message}\n`,
    );
    process.exit(1);
  }
}
