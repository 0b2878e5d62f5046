import { Queue } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startBackground } from '../../apps/worker/background.ts';
import { createBullJobs } from '../../infra/jobs/bullmq.ts';
import type { JobKind } from '../../infra/jobs/queue.ts';
import { type OwnRedis, startOwnRedis } from '../../reliability/outage-servers.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/*
 * A Redis that restarts empty (no persistence) loses the repeatable jobs' schedules: the worker declares
 * them again, and sweeps, each time its queues reconnect. Runs on a redis-server of its own (killed and
 * started again), never the shared one.
 */
let redis: OwnRedis;
let test: TestDatabase;
beforeAll(async () => {
  redis = await startOwnRedis();
  test = await createTestDatabase('pglite');
});
afterAll(async () => {
  await redis.remove();
  await test.drop();
});

const silent = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} };

async function until(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 100));
  }
}

it('declares the repeatable jobs again and sweeps when Redis comes back empty', async () => {
  const prefix = 'test-reconnect';
  const kind: JobKind<never> = { name: 'test.tick', queue: 'maintenance', run: async () => undefined };
  let sweeps = 0;
  const jobs = createBullJobs({ redisUrl: redis.url, prefix, kinds: [kind], logger: silent });
  const background = await startBackground({
    jobs,
    modules: [
      {
        kinds: [kind],
        repeats: [{ id: 'test.tick', name: 'test.tick', repeat: { everyMs: 3_600_000 } }],
        sweep: async () => {
          sweeps += 1;
        },
      },
    ],
    handle: test.handle,
    logger: silent,
  });
  const queue = new Queue('maintenance', { connection: { host: '127.0.0.1', port: redis.port }, prefix });
  const schedulers = async (): Promise<string[]> =>
    (await queue.getJobSchedulers()).map((s) => s.key ?? s.id ?? '');
  try {
    await until(async () => (await schedulers()).length === 1 && sweeps === 1);
    await redis.stop();
    await redis.start();
    await until(async () => (await schedulers()).length === 1 && sweeps === 2);
    expect(await schedulers()).toEqual(['test.tick']);
  } finally {
    await queue.close();
    await background.stop();
  }
}, 60_000);
