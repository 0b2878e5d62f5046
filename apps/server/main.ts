import pino from 'pino';
import { loadConfigOrExit } from '../../infra/config.ts';
import { housekeepingJobs, startJobs } from '../../infra/jobs/scheduler.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { startAsyncProjections } from '../../infra/projection-runner.ts';
import { closeRedis, openRedis, waitForRedis } from '../../infra/redis.ts';
import { projectors } from '../../projections/index.ts';
import { openRuntime } from '../runtime.ts';
import { createEditLimiter } from './api/edit-limit.ts';
import { createRequestLimiter } from './api/limits.ts';
import { buildApp } from './app.ts';

const config = loadConfigOrExit();

const runtime = await openRuntime(config, { migrate: true, sanitizeThreads: config.SANITIZE_THREADS });
// Limits: shared through Redis when REDIS_URL is set (docs/operations.md, "Limits"). The limiter and
// the Redis client log through their own pino instance: they exist before the app and its logger.
const limitsLog = pino({ level: config.LOG_LEVEL }).child({ component: 'limits' });
const redis = config.REDIS_URL
  ? openRedis(config.REDIS_URL, { name: 'content-service:limits', logger: limitsLog })
  : undefined;
// Waiting lets the first requests count in Redis too; an unreachable Redis does not hold up or stop the start.
const redisReady = redis ? await waitForRedis(redis, 2_000) : false;
const limiter = createRequestLimiter({
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
const app = await buildApp({ runtime, config, limit: limiter.hook, editLimit: edits.limit });
const workers = config.RUN_WORKERS
  ? startAsyncProjections({ handle: runtime.handle, projectors, logger: app.log })
  : null;
// The housekeeping jobs (docs/operations.md, "Jobs"); RUN_JOBS=false leaves them to `npm run worker`.
const jobs = config.RUN_JOBS
  ? startJobs(housekeepingJobs({ db: runtime.db, media: createDirectoryMediaStore(config.MEDIA_DIR) }), {
      logger: app.log.child({ component: 'jobs' }),
    })
  : null;

let shuttingDown = false;
async function shutdown(signal: string): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  app.log.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
  const force = setTimeout(() => {
    app.log.error('shutdown took too long; exiting');
    process.exit(1);
  }, config.SHUTDOWN_TIMEOUT_SECONDS * 1000);
  force.unref();
  try {
    await app.close();
    await jobs?.stop();
    await limiter.close();
    edits.close();
    if (redis) await closeRedis(redis);
    await workers?.stop();
    await runtime.close();
    app.log.info('stopped');
  } catch (error) {
    app.log.error({ err: error }, 'error during shutdown');
    process.exitCode = 1;
  }
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

try {
  await app.listen({ host: config.HOST, port: config.PORT });
  app.log.info(
    {
      database: runtime.handle.kind,
      public_url: config.PUBLIC_URL,
      workers: Boolean(workers),
      jobs: Boolean(jobs),
      limits: redis
        ? redisReady
          ? 'redis'
          : 'redis unreachable: per process until it answers'
        : 'per process',
    },
    'content service ready',
  );
} catch (error) {
  app.log.error({ err: error }, 'could not start');
  await limiter.close();
  if (redis) await closeRedis(redis);
  await jobs?.stop();
  await workers?.stop();
  await runtime.close();
  process.exitCode = 1;
}
