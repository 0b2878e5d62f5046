/*
 * The job port: background work as named jobs on a few queues. Two implementations give the same
 * behaviour: BullMQ on Redis (infra/jobs/bullmq.ts) when REDIS_URL is set, shared by every process,
 * and an in-process queue (infra/jobs/in-process.ts) for the embedded default. A job kind is a plain
 * function of its data; what it changes must be safe to do twice (a job may run again after a crash,
 * and in-process queues of two processes do not know each other), so the functions guard themselves
 * with the database (a conditional update, an expected stream version), never with the queue.
 */

/** The queues, each with its own workers: one kind of work cannot starve another. */
export const QUEUES = {
  /** Webhook deliveries: network-bound, many at once (one endpoint at a time each, in log order). */
  webhooks: { concurrency: 8 },
  /** Scheduled publishing. */
  publishing: { concurrency: 2 },
  /** Monthly reports and housekeeping: one at a time per process. */
  maintenance: { concurrency: 1 },
} as const;
export type QueueName = keyof typeof QUEUES;
export const QUEUE_NAMES = Object.keys(QUEUES) as QueueName[];

/** What a running job knows of itself. */
export type JobContext = {
  id: string;
  /** 1 for the first run, 2 for the first retry, ... */
  attempt: number;
  /** Whether this is the last attempt the job's kind allows (a failure now is final). */
  lastAttempt: boolean;
};

/** One kind of job: its name, its queue, what it does, and how often a failure is retried. */
export type JobKind<D = unknown> = {
  name: string;
  queue: QueueName;
  run(data: D, ctx: JobContext): Promise<unknown>;
  /** Runs in all, the first included; default 5. */
  attempts?: number;
  /** The first retry's delay; each next one doubles, less up to half of it at random (jitter). Default 1 s. */
  backoffMs?: number;
  /**
   * A repeated job whose next run does what a failed run left undone (the search indexes' merge, every
   * 10 s): it is run once and not retried, and a failure is a warning in the log, not a failed job
   * (`jobs failed`), of which an outage of the database would otherwise make one every run.
   */
  retriedByNextRun?: boolean;
};

export const DEFAULT_ATTEMPTS = 5;

/** The runs a job of `kind` gets in all, the first included. */
export function attemptsOf(kind: Pick<JobKind<never>, 'attempts' | 'retriedByNextRun'>): number {
  return kind.retriedByNextRun ? 1 : (kind.attempts ?? DEFAULT_ATTEMPTS);
}

/** What the log says of a failed run of a job `retriedByNextRun`. */
export const FAILED_UNTIL_NEXT_RUN = 'job failed; its next run tries again';
export const DEFAULT_BACKOFF_MS = 1_000;
/** Share of a retry delay taken off at random, so that jobs failed together do not retry together. */
export const BACKOFF_JITTER = 0.5;

/** The delay before retry `n` (n = 1 for the first retry): exponential, with jitter. */
export function backoffDelay(n: number, baseMs: number, random: () => number = Math.random): number {
  const full = baseMs * 2 ** Math.max(0, n - 1);
  return Math.floor(full * (1 - BACKOFF_JITTER) + random() * full * BACKOFF_JITTER);
}

export type AddOptions = {
  /** While a job with this id exists (waiting, delayed, running), adding it again does nothing. */
  jobId?: string;
  delayMs?: number;
};

/** A repeatable job: every so many milliseconds, or on a cron pattern (UTC). */
export type Repeat = { everyMs: number } | { cron: string };

export type QueueStatus = {
  queue: QueueName;
  waiting: number;
  active: number;
  delayed: number;
  /** Jobs whose last attempt failed: the dead letters, listed by `jobs failed`. */
  failed: number;
  /** Age in milliseconds of the oldest job waiting to run (null: none waits). */
  oldestWaitingMs: number | null;
};

export type FailedJob = {
  queue: QueueName;
  id: string;
  name: string;
  data: unknown;
  attempts: number;
  reason: string;
  failedAt: Date | null;
};

/** Where jobs are put: what the application and the subscriptions see of the queues. */
export interface JobSink {
  add(name: string, data: unknown, opts?: AddOptions): Promise<void>;
}

/** The queues of one process: adding, scheduling, inspecting; workers when started. */
export interface Jobs extends JobSink {
  /** 'bullmq' (shared through Redis) or 'in-process'. */
  readonly kind: 'bullmq' | 'in-process';
  /** Declares a repeatable job under `id` (idempotent: processes declaring it share one schedule). */
  repeat(id: string, name: string, repeat: Repeat, data?: unknown): Promise<void>;
  /** Starts this process's workers for every queue. */
  startWorkers(): void;
  /**
   * Calls `listener` each time the queues' store is reached again after losing it (BullMQ: Redis
   * reconnected; it may have come back empty, without the repeatable jobs). Absent where the queues
   * cannot be lost (in process). Returns an unsubscribe.
   */
  onReconnect?(listener: () => void): () => void;
  status(): Promise<QueueStatus[]>;
  failed(limit?: number): Promise<FailedJob[]>;
  /** Runs a failed job again (its attempts start over); false when no failed job has that id. */
  retry(id: string): Promise<boolean>;
  /**
   * Stops taking jobs; jobs running finish within `graceMs` (default 10 s) or are given back (BullMQ:
   * to another worker once their lock expires). Then closes the connections.
   */
  close(graceMs?: number): Promise<void>;
}

export type JobsLogger = {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
};

/** The kinds by name; two kinds with one name are a programming error. */
export function kindsByName(kinds: readonly JobKind<never>[]): Map<string, JobKind<never>> {
  const map = new Map<string, JobKind<never>>();
  for (const kind of kinds) {
    if (map.has(kind.name)) throw new Error(`two job kinds are named ${kind.name}`);
    map.set(kind.name, kind);
  }
  return map;
}

/** A job id as both implementations accept it (BullMQ refuses `:` and integers). */
export function jobIdOf(...parts: readonly (string | number)[]): string {
  const id = parts.map(String).join('.');
  if (id.includes(':') || /^\d+$/.test(id)) throw new Error(`not a job id: ${id}`);
  return id;
}
