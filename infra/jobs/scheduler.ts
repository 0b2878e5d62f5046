import type { Db } from '../db/schema.ts';
import type { MediaStore } from '../media/store.ts';
import { collectMedia, purgeIdempotency } from './housekeeping.ts';

/** A periodic job: a plain function returning a summary (logged). */
export type Job = { name: string; everyMs: number; run: () => Promise<unknown> };

type JobLogger = {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
};

type JobScheduler = {
  /** No new run starts; resolves once the run under way (if any) has finished. */
  stop(): Promise<void>;
};

const MINUTE_MS = 60_000;

/** The housekeeping jobs the server (RUN_JOBS) and the worker run, and how often. */
export function housekeepingJobs(deps: { db: Db; media: MediaStore; now?: () => Date }): Job[] {
  const now = deps.now ?? (() => new Date());
  return [
    {
      name: 'idempotency.purge',
      everyMs: 60 * MINUTE_MS,
      run: () => purgeIdempotency({ db: deps.db, now }),
    },
    {
      name: 'media.gc',
      everyMs: 6 * 60 * MINUTE_MS,
      run: () => collectMedia({ db: deps.db, media: deps.media, now }),
    },
  ];
}

/**
 * Runs each job every `everyMs`, the first time `firstRunAfterMs` after the start (default a minute:
 * not in the middle of starting up). One run at a time, in this process: a job due while another runs
 * waits for it, and a job's next run is counted from the end of its last one. A failed run is logged
 * and tried again at its next time; nothing is thrown. The timer is unref'd: it never keeps the
 * process alive. Several processes may run the same jobs: the jobs are written to be safe so.
 */
export function startJobs(
  jobs: readonly Job[],
  opts: { logger: JobLogger; firstRunAfterMs?: number },
): JobScheduler {
  const { logger } = opts;
  const startAt = Date.now() + (opts.firstRunAfterMs ?? MINUTE_MS);
  const due = new Map<Job, number>(jobs.map((job) => [job, startAt]));
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();

  const runDue = async (): Promise<void> => {
    for (const job of jobs) {
      if (stopped) return;
      if ((due.get(job) ?? 0) > Date.now()) continue;
      const started = performance.now();
      try {
        const summary = await job.run();
        logger.info(
          { job: job.name, summary, duration_ms: Math.round(performance.now() - started) },
          'job done',
        );
      } catch (error) {
        logger.error({ job: job.name, err: error }, 'job failed; it runs again at its next time');
      }
      due.set(job, Date.now() + job.everyMs);
    }
  };

  const schedule = (): void => {
    if (stopped || jobs.length === 0) return;
    const soonest = Math.min(...due.values());
    timer = setTimeout(
      () => {
        running = runDue().finally(schedule);
      },
      Math.max(0, soonest - Date.now()),
    );
    timer.unref();
  };
  schedule();

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
