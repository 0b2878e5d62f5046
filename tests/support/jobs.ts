import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Runtime } from '../../apps/runtime.ts';
import type { JobDeps, JobModule } from '../../apps/worker/jobs/module.ts';
import { createBullJobs } from '../../infra/jobs/bullmq.ts';
import { createInProcessJobs } from '../../infra/jobs/in-process.ts';
import type { JobSink, Jobs } from '../../infra/jobs/queue.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { closeRedis, openRedis } from '../../infra/redis.ts';
import { TEST_REDIS_URL } from './services.ts';
import { PATIENCE } from './wait.ts';

/*
 * Background areas (apps/worker/jobs/*) on a real queue for the job tests: the in-process queue, or
 * BullMQ on the test Redis under a prefix of this run's own (removed at the end; Redis is never flushed).
 */

export const REDIS_URL = TEST_REDIS_URL;

export type QueueKind = 'in-process' | 'bullmq';
export const queueKinds: QueueKind[] = ['in-process', 'bullmq'];

export type LogLine = { level: 'info' | 'warn' | 'error' | 'debug'; obj: object; msg: string };

/** A logger that keeps its lines, for checks such as "no job failed". */
export function recordingLogger(): { lines: LogLine[] } & JobDeps['logger'] & {
    debug(obj: object, msg: string): void;
  } {
  const lines: LogLine[] = [];
  const at =
    (level: LogLine['level']) =>
    (obj: object, msg: string): void => {
      lines.push({ level, obj, msg });
    };
  return { lines, info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') };
}

export type TestBackground = {
  jobs: Jobs;
  deps: JobDeps;
  modules: JobModule[];
  logs: LogLine[];
  /** Jobs that failed (any attempt) so far, from the log. */
  failures(): LogLine[];
  /** Resolves once no job waits, runs or is delayed (or throws after `timeoutMs`). */
  settled(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
};

/**
 * The given areas' kinds on a queue of `kind`, workers started, with JobDeps whose `jobs` is that
 * queue (what a job or a subscription adds runs there). Subscriptions and sweeps are left to the test.
 */
export async function startTestBackground(
  kind: QueueKind,
  runtime: Runtime,
  areas: ReadonlyArray<(deps: JobDeps) => JobModule>,
  opts: { now?: () => Date; publicUrl?: string } = {},
): Promise<TestBackground> {
  const logger = recordingLogger();
  const mediaDir = await mkdtemp(path.join(tmpdir(), 'cs-jobs-'));
  let queue: Jobs | undefined;
  const sink: JobSink = {
    add: (name, data, addOpts) => {
      if (!queue) throw new Error('the queue is not started yet');
      return queue.add(name, data, addOpts);
    },
  };
  const deps: JobDeps = {
    db: runtime.db,
    commands: runtime.commands,
    media: createDirectoryMediaStore(mediaDir),
    jobs: sink,
    publicUrl: opts.publicUrl ?? 'https://content.example.test',
    now: opts.now ?? (() => new Date()),
    logger,
  };
  const modules = areas.map((area) => area(deps));
  const kinds = modules.flatMap((m) => m.kinds);
  const prefix = `test-${randomBytes(6).toString('hex')}`;
  queue =
    kind === 'bullmq'
      ? createBullJobs({ redisUrl: REDIS_URL, prefix, kinds, logger })
      : createInProcessJobs({ kinds, logger });
  queue.startWorkers();
  const jobs = queue;
  return {
    jobs,
    deps,
    modules,
    logs: logger.lines,
    failures: () => logger.lines.filter((l) => l.msg.startsWith('job failed')),
    async settled(timeoutMs = PATIENCE.timeout) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const busy = (await jobs.status()).some((q) => q.waiting + q.active + q.delayed > 0);
        if (!busy) return;
        if (Date.now() > deadline) throw new Error('jobs still pending');
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    async close() {
      await jobs.close(1_000);
      await rm(mediaDir, { recursive: true, force: true });
      if (kind === 'bullmq') await removePrefix(prefix);
    },
  };
}

/** Deletes this run's keys (and only those) from the test Redis. */
async function removePrefix(prefix: string): Promise<void> {
  const redis = openRedis(REDIS_URL, { name: 'cs-test-cleanup', redisOptions: { enableOfflineQueue: true } });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    await closeRedis(redis);
  }
}

/** Polls `check` until it returns a value other than undefined, or throws after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = PATIENCE.timeout,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
