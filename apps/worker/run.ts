import pino from 'pino';
import { loadConfigOrExit } from '../../infra/config.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { startAsyncProjections } from '../../infra/projection-runner.ts';
import { stopTracing } from '../../infra/telemetry/tracing.ts';
import { projectors } from '../../projections/index.ts';
import { metricsFor, serveMetricsOrExit, watchProcess } from '../process-metrics.ts';
import { readinessOf } from '../readiness.ts';
import { openRuntimeOrExit } from '../runtime.ts';
import { LOG_REDACTION } from '../server/http/log-redaction.ts';
import { createJobs, startBackground } from './background.ts';
import { modulesFor } from './modules.ts';

/*
 * The async projectors and the background jobs apart from the HTTP processes, for scale-out: run the
 * API processes with RUN_WORKERS=false and RUN_JOBS=false. Several workers may run: each batch of a
 * projector or subscription holds an advisory lock, so they take turns and never apply an event twice;
 * with REDIS_URL the job queues are shared, each job runs once, and a worker that dies has its jobs run
 * by another (docs/jobs.md).
 */
const config = loadConfigOrExit();
const log = pino({ level: config.LOG_LEVEL, base: { app: 'worker' }, ...LOG_REDACTION });
if (!config.DATABASE_URL) {
  log.warn(
    'no DATABASE_URL: the embedded database serves one process; use `npm start`, which runs the workers too',
  );
}
if (!config.REDIS_URL) {
  log.warn("no REDIS_URL: the job queues are this process's own; the API processes cannot add to them");
}
// Metrics (docs/operations.md "Metrics"): with METRICS_PORT, on a listener of their own, from the start.
const metrics = metricsFor(config);
const metricsLog = log.child({ component: 'metrics' });
const metricsServer = metrics ? await serveMetricsOrExit(metrics, config, metricsLog) : null;
const runtime = await openRuntimeOrExit(config, {
  migrate: true,
  logger: log,
  holder: 'the worker (npm run worker)',
  searchLanguage: config.SEARCH_LANGUAGE,
  ...(metrics ? { metrics } : {}),
});
const workers = startAsyncProjections({ handle: runtime.handle, projectors, logger: log });
const jobsLog = log.child({ component: 'jobs' });
const { jobs, modules } = await createJobs(
  config,
  modulesFor(config, {
    db: runtime.db,
    commands: runtime.commands,
    media: createDirectoryMediaStore(config.MEDIA_DIR),
    logger: jobsLog,
    metrics,
  }),
  jobsLog,
  metrics,
);
const background = await startBackground({ jobs, modules, handle: runtime.handle, logger: jobsLog });
if (metrics) {
  watchProcess(metrics, {
    handle: runtime.handle,
    projectors: [...projectors, ...modules.flatMap((m) => m.subscriptions ?? [])],
    jobs,
    logger: metricsLog,
  });
  metricsServer?.serveReadiness(
    readinessOf({ handle: runtime.handle, projectors, jobs, logger: metricsLog }),
  );
}
log.info(
  {
    projectors: projectors.filter((p) => p.mode === 'async').map((p) => p.name),
    jobs: jobs.kind,
    kinds: modules.flatMap((m) => m.kinds.map((k) => k.name)),
  },
  'worker running',
);

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'stopping: running jobs finish or are given back, then the current batch');
  await background.stop();
  await workers.stop();
  await runtime.close();
  await metricsServer?.close();
  await stopTracing();
}
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
