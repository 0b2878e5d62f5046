import type { Config } from '../../infra/config.ts';
import type { DbHandle } from '../../infra/db/open.ts';
import { createInProcessJobs } from '../../infra/jobs/in-process.ts';
import type { JobKind, JobSink, Jobs, JobsLogger } from '../../infra/jobs/queue.ts';
import type { Metrics } from '../../infra/metrics.ts';
import { startAsyncProjections } from '../../infra/projection-runner.ts';
import type { JobModule } from './jobs/module.ts';

/*
 * The background side of a process: the job queues (BullMQ when REDIS_URL is set, else in process),
 * and, where workers run (the server with RUN_JOBS, `npm run worker`), the workers, the subscriptions
 * that turn the log into jobs, the repeatable jobs and the start-up sweep.
 */

/**
 * The queues for this process: shared through Redis when REDIS_URL is set, else this process's own.
 * BullMQ and its Redis client are loaded only for the former.
 */
export async function openJobs(
  config: Pick<Config, 'REDIS_URL' | 'JOBS_PREFIX' | 'JOBS_LOCK_SECONDS'>,
  kinds: readonly JobKind<never>[],
  logger: JobsLogger,
): Promise<Jobs> {
  return config.REDIS_URL
    ? (await import('../../infra/jobs/bullmq.ts')).createBullJobs({
        redisUrl: config.REDIS_URL,
        prefix: config.JOBS_PREFIX,
        kinds,
        logger,
        lockMs: config.JOBS_LOCK_SECONDS * 1000,
      })
    : createInProcessJobs({ kinds, logger });
}

/**
 * The queues with the job kinds of `build`'s modules, which are given a sink into these very queues
 * (a job that adds jobs; bounded, see below). The modules are returned for `startBackground`.
 */
export async function createJobs(
  config: Pick<Config, 'REDIS_URL' | 'JOBS_PREFIX' | 'JOBS_LOCK_SECONDS'>,
  build: (sink: JobSink) => JobModule[],
  logger: JobsLogger,
  metrics?: Pick<Metrics, 'jobFailures'>,
): Promise<{ jobs: Jobs; modules: JobModule[] }> {
  let jobs: Jobs | undefined;
  const forward: JobSink = {
    add(name, data, opts) {
      if (!jobs) throw new Error('a job was added before the queues were open');
      return jobs.add(name, data, opts);
    },
  };
  // A subscription or a job adding a job never hangs on an absent Redis: past 5 s the add is given up
  // and logged, and the sweeps add it again from the database.
  const modules = build(boundedSink(forward, logger, 5_000));
  const kinds = modules.flatMap((m) => m.kinds);
  jobs = await openJobs(config, metrics ? countingFailures(kinds, metrics.jobFailures) : kinds, logger);
  return { jobs, modules };
}

/**
 * The kinds with every failed run counted, by queue, job and whether it was the job's last attempt:
 * one place for both queue implementations.
 */
export function countingFailures(
  kinds: readonly JobKind<never>[],
  failures: Metrics['jobFailures'],
): JobKind<never>[] {
  return kinds.map((kind) => ({
    ...kind,
    async run(data, ctx) {
      try {
        return await kind.run(data, ctx);
      } catch (error) {
        failures.inc({ queue: kind.queue, job: kind.name, final: String(ctx.lastAttempt) });
        throw error;
      }
    },
  }));
}

/**
 * A sink for requests: an add that Redis does not take within `timeoutMs` is given up and logged,
 * never left hanging on a request (the sweep finds the work in the database later).
 */
export function boundedSink(jobs: JobSink, logger: JobsLogger, timeoutMs = 2_000): JobSink {
  return {
    async add(name, data, opts) {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          jobs.add(name, data, opts),
          new Promise((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`the job queue did not take ${name} within ${timeoutMs} ms`)),
              timeoutMs,
            );
          }),
        ]);
      } catch (error) {
        logger.warn({ err: error, job: name }, 'job not queued; the sweep will find the work');
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export type Background = {
  /** Stops the subscriptions, then the workers (jobs running finish or are given back), then the queues. */
  stop(): Promise<void>;
  /** Resolves once the subscriptions have turned every visible event into jobs (tests, the CLI). */
  idle(): Promise<void>;
};

/**
 * Starts the workers of every queue, declares the modules' repeatable jobs, runs their sweeps once (and
 * both again each time the queues reconnect) and starts their subscriptions to the log. The returned `stop` takes everything down in order.
 */
export async function startBackground(opts: {
  jobs: Jobs;
  modules: readonly JobModule[];
  handle: Pick<DbHandle, 'db' | 'onAppended'>;
  logger: JobsLogger;
}): Promise<Background> {
  const { jobs, modules, logger } = opts;
  jobs.startWorkers();
  const subscriptions = startAsyncProjections({
    handle: opts.handle,
    projectors: modules.flatMap((m) => m.subscriptions ?? []),
    logger,
  });
  // Declaring the schedules and sweeping talk to the queues: with Redis away they wait for it, and the
  // process must start (and serve) meanwhile. So they go on in the background; a failure is logged,
  // and the repeatable sweeps do the sweeping again later.
  const declareAndSweep = async (): Promise<void> => {
    for (const module of modules) {
      for (const r of module.repeats ?? []) {
        try {
          await jobs.repeat(r.id, r.name, r.repeat, r.data);
        } catch (error) {
          logger.error(
            { err: error, job: r.name },
            'could not declare a repeatable job; it is declared at the next start or reconnection',
          );
        }
      }
    }
    for (const module of modules) {
      try {
        await module.sweep?.();
      } catch (error) {
        logger.error({ err: error }, 'sweep failed; the repeatable sweep runs it again');
      }
    }
  };
  void declareAndSweep();
  // A Redis that comes back may have come back empty (no persistence, a failover to a fresh replica,
  // a flush): without the repeatable jobs, nothing would sweep, publish or clean up again until the
  // next start. So each reconnection declares them again (idempotent) and sweeps once, which also
  // queues what was given up on while Redis was away.
  const unsubscribe = jobs.onReconnect?.(() => {
    logger.info({}, 'job queues reconnected: declaring the repeatable jobs again and sweeping');
    void declareAndSweep();
  });
  return {
    async stop() {
      unsubscribe?.();
      await subscriptions.stop();
      await jobs.close();
    },
    idle: () => subscriptions.idle(),
  };
}
