import pino from 'pino';
import { loadConfigOrExit } from '../../infra/config.ts';
import { housekeepingJobs, startJobs } from '../../infra/jobs/scheduler.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { startAsyncProjections } from '../../infra/projection-runner.ts';
import { projectors } from '../../projections/index.ts';
import { openRuntime } from '../runtime.ts';

/**
 * The async projectors and the housekeeping jobs apart from the HTTP processes, for scale-out: run with
 * RUN_WORKERS=false and RUN_JOBS=false on the API processes. Several workers may run; each batch of a
 * projector holds an advisory lock, so they take turns and never apply an event twice, and the jobs'
 * deletes are safe to run side by side.
 */
const config = loadConfigOrExit();
const log = pino({ level: config.LOG_LEVEL, base: { app: 'worker' } });
if (!config.DATABASE_URL) {
  log.warn(
    'no DATABASE_URL: the embedded database serves one process; use `npm start`, which runs the workers too',
  );
}
const runtime = await openRuntime(config, { migrate: true, logger: log });
const workers = startAsyncProjections({ handle: runtime.handle, projectors, logger: log });
const jobs = startJobs(
  housekeepingJobs({ db: runtime.db, media: createDirectoryMediaStore(config.MEDIA_DIR) }),
  { logger: log.child({ component: 'jobs' }) },
);
log.info(
  { projectors: projectors.filter((p) => p.mode === 'async').map((p) => p.name), jobs: true },
  'worker running',
);

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'stopping after the current batch');
  await jobs.stop();
  await workers.stop();
  await runtime.close();
}
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
