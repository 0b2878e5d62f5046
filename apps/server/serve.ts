import pino from 'pino';
import { demoOnFirstStart, loadConfigOrExit } from '../../infra/config.ts';
import { orExit } from '../../infra/config-error.ts';
import { beginOpenDatabase, databaseOptions } from '../../infra/db/open.ts';
import { createLogDestination } from '../../infra/log-destination.ts';
import { stopTracing } from '../../infra/telemetry/tracing.ts';
import { LOG_REDACTION } from './http/log-redaction.ts';
import { loadStartModules } from './start-modules.ts';

/*
 * The server's composition root (`npm start`, through main.js). The database's opening is begun
 * first (the embedded engine starts in a thread of its own: infra/db/open.ts) and the rest of the
 * server is loaded while it opens; then the app is built on it and listens.
 */

const config = loadConfigOrExit();

// The database layer (pool, LISTEN connection) logs as JSON lines too, `component: "database"`: its
// connection losses and recoveries are what an operator looks for when PostgreSQL restarts.
const databaseLog = pino({ level: config.LOG_LEVEL, ...LOG_REDACTION }).child({ component: 'database' });
// Metrics (docs/operations.md "Metrics"): with METRICS_PORT, on a listener of their own, from the start;
// without it there are none, and nothing of them is loaded.
const processMetrics = config.METRICS_PORT === undefined ? undefined : await import('../process-metrics.ts');
const metrics = processMetrics?.metricsFor(config);
const metricsLog = pino({ level: config.LOG_LEVEL, ...LOG_REDACTION }).child({ component: 'metrics' });
const metricsServer = metrics ? await processMetrics?.serveMetricsOrExit(metrics, config, metricsLog) : null;
const database = await orExit(
  beginOpenDatabase(databaseOptions(config, { holder: 'the server (npm start)', logger: databaseLog })),
);
const [
  { runtimeOn },
  { createEditLimiter, createHeavyPageLimiter, createPageLimiter },
  { createDirectoryMediaStore },
  { startAsyncProjections },
  { projectors },
  { FIRST_START_DEMO, firstStartMessage, seedDemoIfEmpty },
  { boundedSink, createJobs, startBackground },
  { modulesFor },
  { buildApp },
  { createRequestLimiter },
  { createDrain },
  { readinessOf },
] = await loadStartModules();
const runtime = await orExit(
  runtimeOn(database.handle, {
    migrate: true,
    logger: databaseLog,
    sanitizeThreads: config.SANITIZE_THREADS,
    activitySpoolMax: config.ACTIVITY_SPOOL_MAX,
    searchLanguage: config.SEARCH_LANGUAGE,
    ...(metrics ? { metrics } : {}),
  }),
);
// A newcomer's first start: a demo account to sign in with (printed once the server listens).
const demo = demoOnFirstStart(config)
  ? await seedDemoIfEmpty(runtime, { ...FIRST_START_DEMO, shared: config.DATABASE_URL !== undefined })
  : null;
// Limits: shared through Redis when REDIS_URL is set (docs/operations.md, "Limits"). The limiter and
// the Redis client log through their own pino instance: they exist before the app and its logger.
const limitsLog = pino({ level: config.LOG_LEVEL, ...LOG_REDACTION }).child({ component: 'limits' });
const redisClient = config.REDIS_URL ? await import('../../infra/redis.ts') : undefined;
const redis = config.REDIS_URL
  ? redisClient?.openRedis(config.REDIS_URL, { name: 'content-service:limits', logger: limitsLog })
  : undefined;
// Waiting lets the first requests count in Redis too; an unreachable Redis does not hold up or stop the start.
const redisReady = redis ? await redisClient?.waitForRedis(redis, 2_000) : false;
const limiter = createRequestLimiter({
  perMinute: config.RATE_LIMIT_PER_MINUTE,
  refusalPauseMs: config.RATE_LIMIT_REFUSAL_PAUSE_MS,
  keyPrefix: config.RATE_LIMIT_KEY_PREFIX,
  logger: limitsLog,
  ...(redis ? { redis } : {}),
});
const pages = createPageLimiter({
  perMinute: config.PAGE_RATE_LIMIT_PER_MINUTE,
  keyPrefix: config.RATE_LIMIT_KEY_PREFIX,
  logger: limitsLog,
  ...(redis ? { redis } : {}),
});
// Heavy pages (revisions, restores, large saves) per account: the API's quota (docs/web.md).
const heavyPages = createHeavyPageLimiter({
  perMinute: config.RATE_LIMIT_PER_MINUTE,
  keyPrefix: config.RATE_LIMIT_KEY_PREFIX,
  logger: limitsLog,
  ...(redis ? { redis } : {}),
});
const edits = createEditLimiter({
  perDay: config.EDIT_LIMIT_PER_DAY,
  keyPrefix: config.RATE_LIMIT_KEY_PREFIX,
  logger: limitsLog,
  ...(redis ? { redis } : {}),
});
// Read replicas (docs/operations.md, "Read replicas"): the use cases' reads, with each account's last
// write position shared through Redis when there is one.
const replicaReads = config.DATABASE_REPLICA_URLS
  ? await (async () => {
      const [{ createReplicaReads }, { memoryPositions, redisPositions }] = await Promise.all([
        import('../../infra/db/replicas.ts'),
        import('../../infra/db/write-positions.ts'),
      ]);
      return createReplicaReads({
        primary: runtime.db,
        urls: config.DATABASE_REPLICA_URLS ?? [],
        maxLagSeconds: config.REPLICA_MAX_LAG_SECONDS,
        positions: redis
          ? redisPositions(redis, { prefix: `${config.RATE_LIMIT_KEY_PREFIX}:wal`, logger: databaseLog })
          : memoryPositions(),
        logger: databaseLog,
        metrics,
      });
    })()
  : undefined;
// Background jobs (docs/jobs.md): BullMQ queues shared through Redis with REDIS_URL, else in process.
// Every process can add jobs; RUN_JOBS=false leaves running them to `npm run worker`.
const jobsLog = pino({ level: config.LOG_LEVEL, ...LOG_REDACTION }).child({ component: 'jobs' });
const media = createDirectoryMediaStore(config.MEDIA_DIR);
const { jobs, modules } = await createJobs(
  config,
  modulesFor(config, { db: runtime.db, commands: runtime.commands, media, logger: jobsLog, metrics }),
  jobsLog,
  metrics,
);
// The access log and the app's other lines go out in batches (infra/log-destination.ts).
const appLog = createLogDestination(1);
const drain = createDrain();
const app = await buildApp({
  runtime,
  config,
  logger: { stream: appLog.stream },
  limit: limiter.hook,
  editLimit: edits.limit,
  pageLimit: pages,
  heavyPageLimit: heavyPages,
  media,
  drain,
  jobSink: boundedSink(jobs, jobsLog),
  ...(metrics ? { metrics } : {}),
  ...(replicaReads ? { reads: replicaReads } : {}),
});
// Refusals waiting out their pause are answered as soon as the server starts closing.
app.addHook('preClose', async () => limiter.release());
app.addHook('onClose', async () => appLog.flush());
// On the embedded database, which this process holds alone: the CLI's accounts, keys and staff commands,
// run here for a CLI that finds DATA_DIR locked, over DATA_DIR/admin.sock (owner only, never TCP:
// docs/operations.md, "The admin socket").
const adminSocket =
  runtime.handle.kind === 'pglite' && !config.DATA_DIR.startsWith('memory://')
    ? await (async () => {
        const [{ listenAdminSocket }, { commandsForServer }] = await Promise.all([
          import('../../infra/admin-socket.ts'),
          import('../cli/through-server.ts'),
        ]);
        return listenAdminSocket({
          dataDir: config.DATA_DIR,
          handle: commandsForServer(runtime, config),
          logger: app.log.child({ component: 'admin-socket' }),
        });
      })()
    : null;
const workers = config.RUN_WORKERS
  ? startAsyncProjections({ handle: runtime.handle, projectors, logger: app.log })
  : null;
const background = config.RUN_JOBS
  ? await startBackground({ jobs, modules, handle: runtime.handle, logger: jobsLog })
  : null;
if (metrics) {
  processMetrics?.watchProcess(metrics, {
    handle: runtime.handle,
    projectors: [...projectors, ...modules.flatMap((m) => m.subscriptions ?? [])],
    jobs,
    limitsRedis: redis,
    unstoredActivity: runtime.commands.unstoredCalls,
    ...(replicaReads ? { replicas: replicaReads.status } : {}),
    logger: metricsLog,
  });
  metricsServer?.serveReadiness(
    readinessOf({ handle: runtime.handle, projectors, jobs, logger: metricsLog }),
  );
}

let shuttingDown = false;
/** Ends the drain at once: a second signal during it. */
let endDrain: (() => void) | undefined;
async function shutdown(signal: string): Promise<void> {
  if (shuttingDown) {
    if (endDrain) app.log.info({ signal }, 'draining cut short');
    endDrain?.();
    return;
  }
  shuttingDown = true;
  // The drain (docs/operations.md, "Stopping"): /readyz answers 503 `stopping` at once, and for
  // SHUTDOWN_DRAIN_SECONDS every request is still served, its connection closed once answered, so that
  // a load balancer sees the check fail and stops sending before the server stops listening.
  drain.begin();
  if (config.SHUTDOWN_DRAIN_SECONDS > 0) {
    app.log.info(
      { signal, drain_seconds: config.SHUTDOWN_DRAIN_SECONDS },
      'draining: /readyz answers 503 stopping; requests still served, with Connection: close',
    );
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, config.SHUTDOWN_DRAIN_SECONDS * 1000);
      endDrain = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    endDrain = undefined;
  }
  app.log.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
  const force = setTimeout(() => {
    app.log.error('shutdown took too long; exiting');
    process.exit(1);
  }, config.SHUTDOWN_TIMEOUT_SECONDS * 1000);
  force.unref();
  try {
    await app.close();
    await adminSocket?.close();
    if (background) await background.stop();
    else await jobs.close();
    await limiter.close();
    edits.close();
    pages.close();
    heavyPages.close();
    if (redis) await redisClient?.closeRedis(redis);
    await workers?.stop();
    await replicaReads?.close();
    await runtime.close();
    await metricsServer?.close();
    app.log.info('stopped');
  } catch (error) {
    app.log.error({ err: error }, 'error during shutdown');
    process.exitCode = 1;
  }
  // The spans of the last requests and of the shutdown itself, exported before the process ends.
  await stopTracing();
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

try {
  // Fastify's "Server listening at" names the socket's address (http://127.0.0.1:3000); the pages
  // are PUBLIC_URL's (their forms are checked against its origin), so that is the address to open.
  await app.listen({
    host: config.HOST,
    port: config.PORT,
    listenTextResolver: (address) =>
      address === config.PUBLIC_URL
        ? `Server listening at ${address}`
        : `Server listening at ${address}; open ${config.PUBLIC_URL}`,
  });
  // The sanitise pool's threads, now that the start is done (the first large edit would start them too).
  runtime.startThreads();
  app.log.info(
    {
      database: runtime.handle.kind,
      public_url: config.PUBLIC_URL,
      workers: Boolean(workers),
      jobs: background ? `${jobs.kind}, workers here` : `${jobs.kind}, workers elsewhere`,
      limits: redis
        ? redisReady
          ? 'redis'
          : 'redis unreachable: per process until it answers'
        : 'per process',
      read_replicas: replicaReads
        ? replicaReads.status().map((r) => `${r.name}${r.up ? '' : ' (down)'}`)
        : [],
    },
    'content service ready',
  );
  if (demo) {
    // After the log lines of the start ("Server listening at", "content service ready"), which wait in
    // the log's batch: written first, the way in would scroll away above them.
    appLog.flush();
    process.stderr.write(firstStartMessage(demo, config.PUBLIC_URL));
  }
} catch (error) {
  app.log.error({ err: error }, 'could not start');
  await adminSocket?.close();
  await limiter.close();
  if (redis) await redisClient?.closeRedis(redis);
  if (background) await background.stop();
  else await jobs.close();
  await workers?.stop();
  await replicaReads?.close();
  await runtime.close();
  await metricsServer?.close();
  await stopTracing();
  process.exitCode = 1;
}
