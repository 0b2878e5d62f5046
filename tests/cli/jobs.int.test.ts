import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createBullJobs } from '../../infra/jobs/bullmq.ts';
import type { Jobs } from '../../infra/jobs/queue.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli } from '../support/process.ts';
import { TEST_REDIS_URL } from '../support/services.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * `npm run cli -- jobs status|failed|retry` against the real Redis (a prefix of this file's own) and
 * PostgreSQL: a job that failed every attempt is listed and run again; status shows the queues.
 */

const REDIS_URL = TEST_REDIS_URL;
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

describe('CLI jobs', () => {
  const prefix = `test-cli-jobs-${randomUUID().slice(0, 8)}`;
  let test: TestDatabase;
  let env: Record<string, string>;
  let jobs: Jobs;
  let runs = 0;

  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    env = { DATABASE_URL: test.databaseUrl as string, REDIS_URL, JOBS_PREFIX: prefix };
    jobs = createBullJobs({
      redisUrl: REDIS_URL,
      prefix,
      logger: quiet,
      kinds: [
        {
          name: 'test.doomed',
          queue: 'maintenance',
          attempts: 1,
          run: async () => {
            runs++;
            throw new Error('the endpoint is down');
          },
        },
      ],
    });
    jobs.startWorkers();
    await jobs.add('test.doomed', { n: 1 }, { jobId: 'doomed-1' });
    await vi.waitFor(async () => expect(await jobs.failed()).not.toEqual([]), PATIENCE);
  });

  afterAll(async () => {
    await jobs.close(1_000);
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
    await test.drop();
  });

  it('lists the failed job with its reason', async () => {
    const r = await cli(['jobs', 'failed', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    const failed = JSON.parse(r.stdout) as Array<Record<string, unknown>>;
    expect(failed).toEqual([
      expect.objectContaining({
        queue: 'maintenance',
        id: 'doomed-1',
        name: 'test.doomed',
        attempts: 1,
        reason: 'the endpoint is down',
      }),
    ]);
    const text = await cli(['jobs', 'failed'], env);
    expect(text.stdout).toContain('doomed-1');
    expect(text.stdout).toContain('after 1 attempt(s): the endpoint is down');
  });

  it('shows the queues and the backlog', async () => {
    const r = await cli(['jobs', 'status', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    const status = JSON.parse(r.stdout) as {
      queues: Array<{ queue: string; failed: number }>;
      subscriptions: Array<{ name: string; lag: number }>;
      webhooks: { pending: number };
      scheduled_articles: number;
    };
    expect(status.queues.map((q) => q.queue)).toEqual(['webhooks', 'publishing', 'maintenance']);
    expect(status.queues.find((q) => q.queue === 'maintenance')?.failed).toBe(1);
    expect(status.webhooks.pending).toBe(0);
    expect(status.subscriptions.map((x) => x.name)).toEqual(['webhooks@1', 'publishing@1']);
    expect(status.scheduled_articles).toBe(0);
    const text = await cli(['jobs', 'status'], env);
    expect(text.stdout).toMatch(/maintenance\s+0\s+0\s+0\s+1/);
  });

  it('runs a failed job again, and says so for an unknown id', async () => {
    const unknown = await cli(['jobs', 'retry', 'no-such-job'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no failed job no-such-job');
    const before = runs;
    const r = await cli(['jobs', 'retry', 'doomed-1'], env);
    expect(r.code, r.stderr).toBe(0);
    await vi.waitFor(() => expect(runs).toBe(before + 1), PATIENCE);
  });

  it('explains that without REDIS_URL the queues are in the server', async () => {
    const r = await cli(['jobs', 'failed'], { DATABASE_URL: env.DATABASE_URL });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no REDIS_URL');
    const usage = await cli(['jobs', 'frobnicate'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('jobs: expected status, failed or retry');
  });

  it('makes the monthly reports by hand, and refuses a month that is not one', async () => {
    const r = await cli(['reports', 'make'], env);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout) as { period: string; sites: number; made: number };
    expect(summary.period).toMatch(/^\d{4}-\d{2}$/);
    expect(r.stderr).toContain(`${summary.period}: `);
    const bad = await cli(['reports', 'make', '--period', '2026-13'], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/2026-13/);
  });
});
