import { type Job, Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { closeRedis, openRedis } from '../redis.ts';
import { jobsTelemetry } from '../telemetry/tracing.ts';
import {
  type AddOptions,
  attemptsOf,
  BACKOFF_JITTER,
  DEFAULT_BACKOFF_MS,
  FAILED_UNTIL_NEXT_RUN,
  type FailedJob,
  type JobKind,
  type Jobs,
  type JobsLogger,
  kindsByName,
  QUEUE_NAMES,
  QUEUES,
  type QueueName,
  type QueueStatus,
} from './queue.ts';

/*
 * The job queues on BullMQ (Redis): every process that adds jobs and every worker share them, so a job
 * runs once across processes (a job id is taken once), a worker that dies mid-job has its job handed to
 * another once its lock expires (stalled-job recovery), and failed jobs wait in BullMQ's failed set, the
 * dead letters, until `jobs retry` runs them again. Retries: BullMQ's exponential backoff with jitter,
 * the same rule as the in-process queue.
 */

/** How long finished jobs are kept: a completed job id is not taken again within the hour. */
const KEEP_COMPLETED = { age: 3_600, count: 10_000 };
/** Failed jobs (the dead letters) are kept for 30 days, at most 10 000 per queue. */
const KEEP_FAILED = { age: 30 * 24 * 3_600, count: 10_000 };

export type BullJobsOptions = {
  redisUrl: string;
  /** The keys' prefix in Redis (JOBS_PREFIX): deployments, or test runs, sharing one Redis each take their own. */
  prefix: string;
  kinds: readonly JobKind<never>[];
  logger: JobsLogger;
  /**
   * How long a worker's lock on a job lasts unless renewed, and how often stalled jobs are looked for
   * (milliseconds; BullMQ's defaults, 30 s, unless given): a job of a worker that died is run again
   * after about this long. Tests shorten it.
   */
  lockMs?: number;
};

/** Whether `work` settled within `ms` (its outcome, success or failure, is not asked). */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
        timer.unref();
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export function createBullJobs(opts: BullJobsOptions): Jobs {
  const kinds = kindsByName(opts.kinds);
  const { logger, prefix } = opts;
  const connection: Redis = openRedis(opts.redisUrl, {
    name: 'content-service:jobs',
    logger,
    // Queue commands wait for a reconnect rather than fail: an add during a Redis blip is not lost.
    redisOptions: { maxRetriesPerRequest: null, enableOfflineQueue: true },
  });
  // Connection errors repeat every few seconds while Redis is away, and the shared connection has
  // said so once already (infra/redis.ts): debug. Anything else: a warning.
  const logError = (error: Error, queue: string, msg: string): void => {
    const connectionError = /ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|Connection is closed/.test(
      error.message,
    );
    logger[connectionError ? 'debug' : 'warn']({ err: error, queue }, msg);
  };
  // While tracing is on, BullMQ's own spans (bullmq-otel): a job's `add`, and its `process` as a child
  // of the span that added it, in whichever process runs it.
  const telemetry = jobsTelemetry();
  const queues = new Map<QueueName, Queue>(
    QUEUE_NAMES.map((name) => [
      name,
      new Queue(name, { connection, prefix, skipWaitingForReady: true, ...(telemetry ? { telemetry } : {}) }),
    ]),
  );
  for (const queue of queues.values()) {
    queue.on('error', (error) => logError(error, queue.name, 'job queue error'));
  }
  const workers: Worker[] = [];

  const kindOf = (name: string): JobKind<never> => {
    const kind = kinds.get(name);
    if (!kind) throw new Error(`no job kind named ${name}`);
    return kind;
  };
  const queueOf = (name: QueueName): Queue => queues.get(name) as Queue;
  const jobOptions = (kind: JobKind<never>) => ({
    attempts: attemptsOf(kind),
    backoff: { type: 'exponential', delay: kind.backoffMs ?? DEFAULT_BACKOFF_MS, jitter: BACKOFF_JITTER },
    removeOnComplete: KEEP_COMPLETED,
    removeOnFail: kind.retriedByNextRun ? true : KEEP_FAILED,
  });

  const findFailed = async (id: string): Promise<Job | undefined> => {
    for (const queue of queues.values()) {
      const job = await queue.getJob(id);
      if (job && (await job.isFailed())) return job;
    }
    return undefined;
  };

  // Every 'ready' after the first is a reconnection: Redis was away, and may have lost its keys.
  const reconnectListeners = new Set<() => void>();
  let connectedOnce = connection.status === 'ready';
  connection.on('ready', () => {
    if (connectedOnce) for (const listener of [...reconnectListeners]) listener();
    connectedOnce = true;
  });

  let closing = false;
  const makeWorkers = (): void => {
    if (closing || workers.length > 0) return;
    for (const name of QUEUE_NAMES) {
      const worker = new Worker(
        name,
        async (job: Job) => {
          const kind = kindOf(job.name);
          const attempts = job.opts.attempts ?? 1;
          return kind.run(job.data as never, {
            id: job.id ?? '',
            attempt: job.attemptsMade + 1,
            lastAttempt: job.attemptsMade + 1 >= attempts,
          });
        },
        {
          connection,
          prefix,
          concurrency: QUEUES[name].concurrency,
          ...(opts.lockMs ? { lockDuration: opts.lockMs, stalledInterval: opts.lockMs } : {}),
          ...(telemetry ? { telemetry } : {}),
        },
      );
      worker.on('error', (error) => logError(error, name, 'job worker error'));
      worker.on('failed', (job, error) => {
        if (!job) return;
        if (kinds.get(job.name)?.retriedByNextRun) {
          logger.warn({ job: job.name, id: job.id, err: error }, FAILED_UNTIL_NEXT_RUN);
          return;
        }
        const final = job.attemptsMade >= (job.opts.attempts ?? 1);
        logger[final ? 'error' : 'warn'](
          { job: job.name, id: job.id, attempt: job.attemptsMade, err: error },
          final ? 'job failed for good' : 'job failed; retrying',
        );
      });
      workers.push(worker);
    }
  };

  return {
    kind: 'bullmq',
    async add(name, data, addOpts: AddOptions = {}) {
      const kind = kindOf(name);
      await queueOf(kind.queue).add(name, data, {
        ...jobOptions(kind),
        ...(addOpts.jobId ? { jobId: addOpts.jobId } : {}),
        ...(addOpts.delayMs ? { delay: Math.max(0, Math.round(addOpts.delayMs)) } : {}),
      });
    },
    async repeat(id, name, repeat, data = {}) {
      const kind = kindOf(name);
      await queueOf(kind.queue).upsertJobScheduler(
        id,
        'everyMs' in repeat ? { every: repeat.everyMs } : { pattern: repeat.cron, tz: 'UTC' },
        { name, data, opts: jobOptions(kind) },
      );
    },
    startWorkers() {
      // Workers are made once Redis answers: a worker made before keeps a connection of its own
      // retrying, which nothing can close until it has connected once.
      if (connection.status === 'ready') makeWorkers();
      else connection.once('ready', makeWorkers);
    },
    onReconnect(listener) {
      const entry = (): void => listener();
      reconnectListeners.add(entry);
      return () => {
        reconnectListeners.delete(entry);
      };
    },
    async status() {
      const now = Date.now();
      return Promise.all(
        QUEUE_NAMES.map(async (name): Promise<QueueStatus> => {
          const queue = queueOf(name);
          const counts = await queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed');
          const [oldest] = await queue.getJobs(['waiting', 'prioritized'], 0, 0, true);
          return {
            queue: name,
            waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0),
            active: counts.active ?? 0,
            delayed: counts.delayed ?? 0,
            failed: counts.failed ?? 0,
            oldestWaitingMs: oldest ? Math.max(0, now - (oldest.timestamp + (oldest.delay ?? 0))) : null,
          };
        }),
      );
    },
    async failed(limit = 50) {
      const out: FailedJob[] = [];
      for (const name of QUEUE_NAMES) {
        for (const job of await queueOf(name).getFailed(0, limit - 1)) {
          out.push({
            queue: name,
            id: job.id ?? '',
            name: job.name,
            data: job.data,
            attempts: job.attemptsMade,
            reason: job.failedReason,
            failedAt: job.finishedOn ? new Date(job.finishedOn) : null,
          });
        }
      }
      out.sort((a, b) => (b.failedAt?.getTime() ?? 0) - (a.failedAt?.getTime() ?? 0));
      return out.slice(0, limit);
    },
    async retry(id) {
      const job = await findFailed(id);
      if (!job) return false;
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      return true;
    },
    async close(graceMs = 10_000) {
      closing = true;
      connection.off('ready', makeWorkers);
      reconnectListeners.clear();
      // Stop taking jobs and let the running ones finish; past the grace, let go of them (their locks
      // expire and another worker runs them). Every step is bounded: with Redis away, BullMQ's closes
      // wait for a connection that may never come, and a process must still stop.
      const reachable = connection.status === 'ready';
      if (!(await within(Promise.all(workers.map((w) => w.close())), reachable ? graceMs : 1_000))) {
        logger.warn({ grace_ms: graceMs }, 'jobs still running at shutdown are given back to the queue');
        await within(Promise.all(workers.map((w) => w.close(true))), 1_000);
      }
      await within(Promise.all([...queues.values()].map((q) => q.close())), 1_000);
      await closeRedis(connection);
    },
  };
}
