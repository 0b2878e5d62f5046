import { CronExpressionParser } from 'cron-parser';
import {
  type AddOptions,
  attemptsOf,
  backoffDelay,
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
  type Repeat,
} from './queue.ts';

/*
 * The job queues of the embedded default: the same kinds, queues, concurrency and retry rules as on
 * BullMQ, in this process's memory. What is lost with the process: waiting and delayed jobs (the
 * subscriptions and the start-up sweep plan again what the database says is due) and the list of
 * failed jobs (the log says what failed).
 */

type Entry = {
  id: string;
  name: string;
  kind: JobKind<never>;
  data: unknown;
  /** Attempts made so far. */
  attempts: number;
  addedAt: number;
  timer?: NodeJS.Timeout;
};

/** How many failed jobs are kept for `jobs failed` and the detailed /readyz (apps/readiness.ts). */
const FAILED_KEPT = 1_000;

/** The longest delay a Node timer holds (about 24.8 days); a longer one fires at once, with a warning. */
const TIMER_MAX_MS = 2 ** 31 - 1;

export function createInProcessJobs(opts: {
  kinds: readonly JobKind<never>[];
  logger: JobsLogger;
  now?: () => number;
  random?: () => number;
}): Jobs {
  const kinds = kindsByName(opts.kinds);
  const { logger } = opts;
  const now = opts.now ?? Date.now;
  const random = opts.random ?? Math.random;
  /** Every job not yet finished, by id: waiting, delayed or running. */
  const live = new Map<string, Entry>();
  const waiting = new Map<QueueName, Entry[]>(QUEUE_NAMES.map((q) => [q, []]));
  const active = new Map<QueueName, number>(QUEUE_NAMES.map((q) => [q, 0]));
  const running = new Set<Promise<void>>();
  const failed: Array<FailedJob & { entry: Entry }> = [];
  const repeats = new Map<string, NodeJS.Timeout>();
  let started = false;
  let closing = false;
  let sequence = 0;

  const kindOf = (name: string): JobKind<never> => {
    const kind = kinds.get(name);
    if (!kind) throw new Error(`no job kind named ${name}`);
    return kind;
  };

  const pump = (queue: QueueName): void => {
    if (!started || closing) return;
    const list = waiting.get(queue) ?? [];
    while (list.length > 0 && (active.get(queue) ?? 0) < QUEUES[queue].concurrency) {
      const entry = list.shift() as Entry;
      active.set(queue, (active.get(queue) ?? 0) + 1);
      const done = runOne(entry).finally(() => {
        running.delete(done);
        active.set(queue, (active.get(queue) ?? 1) - 1);
        pump(queue);
      });
      running.add(done);
    }
  };

  const enqueue = (entry: Entry, delayMs: number): void => {
    if (delayMs > 0) {
      // A timer holds at most TIMER_MAX_MS (a longer one fires at once): a later time is reached in steps.
      const step = Math.min(delayMs, TIMER_MAX_MS);
      entry.timer = setTimeout(() => {
        delete entry.timer;
        enqueue(entry, delayMs - step);
      }, step);
      entry.timer.unref();
      return;
    }
    waiting.get(entry.kind.queue)?.push(entry);
    pump(entry.kind.queue);
  };

  const runOne = async (entry: Entry): Promise<void> => {
    const attempts = attemptsOf(entry.kind);
    entry.attempts++;
    try {
      await entry.kind.run(entry.data as never, {
        id: entry.id,
        attempt: entry.attempts,
        lastAttempt: entry.attempts >= attempts,
      });
      live.delete(entry.id);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      if (entry.attempts < attempts && !closing) {
        const delay = backoffDelay(entry.attempts, entry.kind.backoffMs ?? DEFAULT_BACKOFF_MS, random);
        logger.warn(
          { job: entry.name, id: entry.id, attempt: entry.attempts, err: error, retry_in_ms: delay },
          'job failed; retrying',
        );
        enqueue(entry, delay);
        return;
      }
      live.delete(entry.id);
      if (entry.kind.retriedByNextRun) {
        logger.warn({ job: entry.name, id: entry.id, err: error }, FAILED_UNTIL_NEXT_RUN);
        return;
      }
      logger.error(
        { job: entry.name, id: entry.id, attempts: entry.attempts, err: error },
        'job failed for good',
      );
      failed.unshift({
        queue: entry.kind.queue,
        id: entry.id,
        name: entry.name,
        data: entry.data,
        attempts: entry.attempts,
        reason,
        failedAt: new Date(now()),
        entry,
      });
      failed.length = Math.min(failed.length, FAILED_KEPT);
    }
  };

  const add = async (name: string, data: unknown, addOpts: AddOptions = {}): Promise<void> => {
    const kind = kindOf(name);
    if (closing) return;
    const id = addOpts.jobId ?? `${name}.${++sequence}`;
    if (live.has(id)) return;
    const entry: Entry = { id, name, kind, data, attempts: 0, addedAt: now() + (addOpts.delayMs ?? 0) };
    live.set(id, entry);
    enqueue(entry, addOpts.delayMs ?? 0);
  };

  const nextDelay = (repeat: Repeat): number => {
    if ('everyMs' in repeat) return repeat.everyMs;
    const next = CronExpressionParser.parse(repeat.cron, { tz: 'UTC', currentDate: new Date(now()) }).next();
    return Math.max(0, next.getTime() - now());
  };

  return {
    kind: 'in-process',
    add,
    async repeat(id, name, repeat, data = {}) {
      kindOf(name);
      nextDelay(repeat); // a bad pattern throws here, not later in a timer
      clearTimeout(repeats.get(id));
      const wait = (target: number): void => {
        // A later time than a timer holds is reached in steps (TIMER_MAX_MS).
        const timer = setTimeout(
          () => {
            if (now() < target) return wait(target);
            void add(name, data, { jobId: `${id}.${target}` }).finally(plan);
          },
          Math.min(Math.max(0, target - now()), TIMER_MAX_MS),
        );
        timer.unref();
        repeats.set(id, timer);
      };
      const plan = (): void => {
        if (!closing) wait(now() + nextDelay(repeat));
      };
      plan();
    },
    startWorkers() {
      started = true;
      for (const queue of QUEUE_NAMES) pump(queue);
    },
    async status() {
      const at = now();
      return QUEUE_NAMES.map((queue): QueueStatus => {
        const list = waiting.get(queue) ?? [];
        const delayed = [...live.values()].filter((e) => e.kind.queue === queue && e.timer !== undefined);
        const oldest = list.reduce<number | null>(
          (min, e) => (min === null || e.addedAt < min ? e.addedAt : min),
          null,
        );
        return {
          queue,
          waiting: list.length,
          active: active.get(queue) ?? 0,
          delayed: delayed.length,
          failed: failed.filter((f) => f.queue === queue).length,
          oldestWaitingMs: oldest === null ? null : Math.max(0, at - oldest),
        };
      });
    },
    async failed(limit = 50) {
      return failed.slice(0, limit).map(({ entry: _, ...job }) => job);
    },
    async retry(id) {
      const index = failed.findIndex((f) => f.id === id);
      const found = failed[index];
      if (!found || live.has(id)) return false;
      failed.splice(index, 1);
      await add(found.name, found.data, { jobId: id });
      return true;
    },
    async close(graceMs = 10_000) {
      closing = true;
      for (const timer of repeats.values()) clearTimeout(timer);
      for (const entry of live.values()) clearTimeout(entry.timer);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...running]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, graceMs);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
    },
  };
}
