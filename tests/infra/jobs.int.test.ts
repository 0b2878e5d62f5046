import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createBullJobs } from '../../infra/jobs/bullmq.ts';
import { createInProcessJobs } from '../../infra/jobs/in-process.ts';
import { backoffDelay, type JobContext, type JobKind, type Jobs, jobIdOf } from '../../infra/jobs/queue.ts';
import { NODE, ROOT } from '../support/process.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

/*
 * The job port's two implementations against the same expectations: BullMQ on the real Redis (a prefix
 * of its own per run) and the in-process queue. Retries, the dead letters and their retry, job ids
 * taken once, delays, repeatable jobs, status, graceful shutdown; on BullMQ also a worker killed with
 * SIGKILL mid-job, whose job another worker runs once the lock expires.
 */

const REDIS_URL = TEST_REDIS_URL;
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

type Recorder = { runs: Array<{ data: unknown; ctx: JobContext }>; kinds: JobKind<never>[] };

function recorder(): Recorder {
  const runs: Recorder['runs'] = [];
  const failUntil = new Map<string, number>();
  const kinds: JobKind<never>[] = [
    {
      name: 'test.ok',
      queue: 'maintenance',
      run: async (data: never, ctx) => {
        runs.push({ data, ctx });
      },
    },
    {
      // Fails until its attempt number reaches data.succeedAt (never, without it).
      name: 'test.flaky',
      queue: 'publishing',
      attempts: 3,
      backoffMs: 20,
      run: async (data: never, ctx) => {
        runs.push({ data, ctx });
        const { key, succeedAt } = data as { key: string; succeedAt?: number };
        failUntil.set(key, ctx.attempt);
        if (succeedAt === undefined || ctx.attempt < succeedAt)
          throw new Error(`attempt ${ctx.attempt} failed`);
      },
    },
    {
      // Fails every run; its next run is its retry (a repeated job's, as the search indexes' merge).
      name: 'test.next-run',
      queue: 'maintenance',
      attempts: 3,
      retriedByNextRun: true,
      run: async (data: never, ctx) => {
        runs.push({ data, ctx });
        throw new Error(`run ${runs.length} failed`);
      },
    },
    {
      name: 'test.slow',
      queue: 'webhooks',
      run: async (data: never, ctx) => {
        await new Promise((r) => setTimeout(r, (data as { ms: number }).ms));
        runs.push({ data, ctx });
      },
    },
  ];
  return { runs, kinds };
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const prefixes: string[] = [];
afterAll(async () => {
  // This file's keys only: every prefix it made.
  const redis = new Redis(REDIS_URL);
  for (const prefix of prefixes) {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  await redis.quit();
});

type Logger = typeof quiet;
const implementations: Array<[string, (kinds: JobKind<never>[], logger?: Logger) => Jobs]> = [
  ['in-process', (kinds, logger = quiet) => createInProcessJobs({ kinds, logger })],
  [
    'bullmq',
    (kinds, logger = quiet) => {
      const prefix = `test-jobs-${randomUUID().slice(0, 8)}`;
      prefixes.push(prefix);
      return createBullJobs({ redisUrl: REDIS_URL, prefix, kinds, logger, lockMs: 2_000 });
    },
  ],
];

/** A logger that keeps its warnings: the message and the error's message. */
function warningsKept(): { logger: Logger; warnings: Array<{ msg: string; err: string; job: unknown }> } {
  const warnings: Array<{ msg: string; err: string; job: unknown }> = [];
  return {
    warnings,
    logger: {
      ...quiet,
      warn: (obj: { job?: unknown; err?: Error }, msg: string) => {
        warnings.push({ msg, err: obj.err?.message ?? '', job: obj.job });
      },
    } as Logger,
  };
}

describe('backoffDelay', () => {
  it('doubles from the base and takes up to half off at random', () => {
    expect(backoffDelay(1, 1000, () => 0)).toBe(500);
    expect(backoffDelay(1, 1000, () => 0.999999)).toBe(999);
    expect(backoffDelay(3, 1000, () => 0)).toBe(2000);
    expect(backoffDelay(3, 1000, () => 1)).toBe(4000);
  });

  it('refuses ids BullMQ would refuse', () => {
    expect(jobIdOf('webhook', 'dlv_1', 2)).toBe('webhook.dlv_1.2');
    expect(() => jobIdOf('a:b')).toThrow();
    expect(() => jobIdOf(12)).toThrow();
  });
});

describe.each(implementations)('jobs on %s', (_name, open) => {
  let jobs: Jobs | undefined;
  afterEach(async () => {
    await jobs?.close(1_000);
    jobs = undefined;
  });

  it('runs a job with its data', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    jobs.startWorkers();
    await jobs.add('test.ok', { n: 1 });
    await until(() => r.runs.length === 1);
    expect(r.runs[0]?.data).toEqual({ n: 1 });
    expect(r.runs[0]?.ctx).toMatchObject({ attempt: 1, lastAttempt: false });
  });

  it('retries a failing job with backoff and succeeds on the third attempt', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    jobs.startWorkers();
    await jobs.add('test.flaky', { key: 'a', succeedAt: 3 }, { jobId: 'flaky-a' });
    await until(() => r.runs.length === 3);
    expect(r.runs.map((x) => x.ctx.attempt)).toEqual([1, 2, 3]);
    expect(r.runs.map((x) => x.ctx.lastAttempt)).toEqual([false, false, true]);
    await new Promise((res) => setTimeout(res, 100));
    expect(r.runs).toHaveLength(3);
    expect(await jobs.failed()).toEqual([]);
  });

  it('keeps a job that failed every attempt as a dead letter, and runs it again on retry', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    jobs.startWorkers();
    await jobs.add('test.flaky', { key: 'b' }, { jobId: 'flaky-b' });
    await until(async () => (await jobs?.failed())?.length === 1);
    const [dead] = (await jobs.failed()) ?? [];
    expect(dead).toMatchObject({
      id: 'flaky-b',
      name: 'test.flaky',
      queue: 'publishing',
      attempts: 3,
      reason: 'attempt 3 failed',
    });
    expect(dead?.failedAt).toBeInstanceOf(Date);
    expect((await jobs.status()).find((s) => s.queue === 'publishing')?.failed).toBe(1);

    expect(await jobs.retry('no-such-job')).toBe(false);
    expect(await jobs.retry('flaky-b')).toBe(true);
    await until(() => r.runs.length === 6);
    expect(r.runs.slice(3).map((x) => x.ctx.attempt)).toEqual([1, 2, 3]);
    await until(async () => (await jobs?.failed())?.length === 1);
  });

  it('runs a job retried by its next run once, warns of its failure and keeps no dead letter of it', async () => {
    const r = recorder();
    const { logger, warnings } = warningsKept();
    jobs = open(r.kinds, logger);
    jobs.startWorkers();
    await jobs.add('test.next-run', { n: 1 }, { jobId: 'next-run' });
    await until(() => warnings.length === 1);
    expect(warnings).toEqual([
      { msg: 'job failed; its next run tries again', err: 'run 1 failed', job: 'test.next-run' },
    ]);
    expect(r.runs.map((x) => x.ctx)).toEqual([{ id: 'next-run', attempt: 1, lastAttempt: true }]);
    expect(await jobs.failed()).toEqual([]);
    expect((await jobs.status()).find((s) => s.queue === 'maintenance')?.failed).toBe(0);
    // Nothing of it is left: the same id is taken again, by its next run.
    await jobs.add('test.next-run', { n: 2 }, { jobId: 'next-run' });
    await until(() => warnings.length === 2);
    expect(r.runs.map((x) => x.data)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await jobs.failed()).toEqual([]);
  });

  it('takes a job id once while the job waits', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    await jobs.add('test.ok', { n: 1 }, { jobId: 'once' });
    await jobs.add('test.ok', { n: 2 }, { jobId: 'once' });
    const waiting = (await jobs.status()).find((s) => s.queue === 'maintenance');
    expect(waiting).toMatchObject({ waiting: 1, active: 0 });
    expect(waiting?.oldestWaitingMs).toBeGreaterThanOrEqual(0);
    jobs.startWorkers();
    await until(() => r.runs.length === 1);
    await new Promise((res) => setTimeout(res, 100));
    expect(r.runs.map((x) => x.data)).toEqual([{ n: 1 }]);
  });

  it('runs a delayed job once its delay has passed', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    jobs.startWorkers();
    const added = Date.now();
    await jobs.add('test.ok', { n: 1 }, { delayMs: 300 });
    expect((await jobs.status()).find((s) => s.queue === 'maintenance')?.delayed).toBe(1);
    await until(() => r.runs.length === 1);
    expect(Date.now() - added).toBeGreaterThanOrEqual(280);
  });

  it('keeps a job delayed longer than a timer holds (24.8 days) waiting: one due sooner runs first', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    jobs.startWorkers();
    await jobs.add('test.ok', { n: 'in 30 days' }, { delayMs: 30 * 86_400_000 });
    await jobs.add('test.ok', { n: 'in 100 ms' }, { delayMs: 100 });
    await until(() => r.runs.length === 1);
    expect(r.runs.map((x) => x.data)).toEqual([{ n: 'in 100 ms' }]);
    expect((await jobs.status()).find((s) => s.queue === 'maintenance')?.delayed).toBe(1);
  });

  it('runs a repeatable job every so often; declaring it twice keeps one schedule', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    jobs.startWorkers();
    await jobs.repeat('tick', 'test.ok', { everyMs: 150 }, { tick: true });
    await jobs.repeat('tick', 'test.ok', { everyMs: 150 }, { tick: true });
    await new Promise((res) => setTimeout(res, 1_000));
    // One schedule: about 6 runs in a second, never the 12 of two.
    expect(r.runs.length).toBeGreaterThanOrEqual(3);
    expect(r.runs.length).toBeLessThanOrEqual(8);
    expect(r.runs.every((x) => (x.data as { tick?: boolean }).tick === true)).toBe(true);
  });

  it('refuses a cron pattern that is not one', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    await expect(jobs.repeat('bad', 'test.ok', { cron: 'every tuesday' })).rejects.toThrow();
  });

  it('lets a running job finish when it closes', async () => {
    const r = recorder();
    jobs = open(r.kinds);
    jobs.startWorkers();
    await jobs.add('test.slow', { ms: 400 });
    await until(async () => (await jobs?.status())?.find((s) => s.queue === 'webhooks')?.active === 1);
    const closing = jobs;
    jobs = undefined;
    await closing.close(5_000);
    expect(r.runs).toHaveLength(1);
  });
});

describe('in-process jobs: a delay longer than a timer holds', () => {
  it('runs the job when its time comes, 60 days on, reached in steps', async () => {
    vi.useFakeTimers();
    const r = recorder();
    const jobs = createInProcessJobs({ kinds: r.kinds, logger: quiet });
    try {
      jobs.startWorkers();
      await jobs.add('test.ok', { n: 1 }, { delayMs: 60 * 86_400_000 });
      await vi.advanceTimersByTimeAsync(59 * 86_400_000);
      expect(r.runs).toEqual([]);
      await vi.advanceTimersByTimeAsync(86_400_000);
      expect(r.runs.map((x) => x.data)).toEqual([{ n: 1 }]);
    } finally {
      await jobs.close(0);
      vi.useRealTimers();
    }
  });
});

describe('BullMQ: a worker killed mid-job', () => {
  it('has its job run by another worker once the lock expires, and only once to the end', async () => {
    const prefix = `test-jobs-${randomUUID().slice(0, 8)}`;
    prefixes.push(prefix);
    const marker = `${prefix}:started`;
    const child = spawn(NODE, [resolve(ROOT, 'tests/fixtures/jobs-worker.ts')], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL, JOBS_PREFIX: prefix, MARKER: marker },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const redis = new Redis(REDIS_URL);
    const finished: unknown[] = [];
    let jobs: Jobs | undefined;
    try {
      // The child added the job and took it: it sets the marker when the job starts.
      await until(async () => (await redis.get(marker)) !== null, 20_000);
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      jobs = createBullJobs({
        redisUrl: REDIS_URL,
        prefix,
        logger: quiet,
        lockMs: 1_000,
        kinds: [
          {
            name: 'test.crash',
            queue: 'maintenance',
            run: async (data: never, ctx) => {
              finished.push({ data, attempt: ctx.attempt });
            },
          },
        ],
      });
      jobs.startWorkers();
      await until(() => finished.length === 1, 20_000);
      expect(finished).toEqual([{ data: { n: 7 }, attempt: 1 }]);
    } finally {
      child.kill('SIGKILL');
      await jobs?.close(1_000);
      await redis.quit();
    }
  }, 40_000);
});
