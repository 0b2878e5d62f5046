import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { NODE, ROOT } from '../tests/support/process.ts';
import { metricsBaseOf, type ServerProcess, startServer } from '../tests/support/server.ts';
import { startReceiver } from './crash-support.ts';
import {
  type Answer,
  articleIds,
  createDatabase,
  migrateAndSeed,
  NO_ANSWER,
  publicReadiness,
  readiness,
  sleep,
  startLoad,
  timeUntil,
} from './outage-load.ts';
import { startOwnRedis } from './outage-servers.ts';
import { type Check, check, type Scenario } from './scenario.ts';

/*
 * Scenario 4: Redis down and back. A redis-server of the scenario's own (no persistence: it comes back
 * empty, as a restarted cache does), an API process (RUN_JOBS=false) and a worker (`npm run worker`)
 * on it, clients reading and editing, a webhook endpoint on loopback receiving article.updated. Redis
 * is killed under load and started again. docs/operations.md promises: limits fail open (counted per
 * process), job adds give up after 2 s and the sweep finds the work, no 5xx, and everything recovers
 * by itself, BullMQ workers included.
 */

/** A client gives up on a call after this long. */
const CLIENT_TIMEOUT_MS = 20_000;
/** A call during the outage may wait for the job add (2 s) and the limiter (250 ms), not more. */
const SLOWEST_ALLOWED_MS = 5_000;

const LIMITS_FAILING_OPEN = 'Redis unavailable: limits are counted in each process';
const LIMITS_BACK = 'Redis answers again';
const REDIS_RESTORED = 'Redis connection restored';

/** A webhook receiver on loopback that keeps the title of every article.updated it receives. */
async function startTitleReceiver(): Promise<{ url: string; titles: string[]; close(): Promise<void> }> {
  const titles: string[] = [];
  const receiver = await startReceiver((body) => {
    try {
      const message = JSON.parse(body) as { data?: { title?: string } };
      if (message.data?.title) titles.push(message.data.title);
    } catch {
      // Not a message of ours: ignored.
    }
  });
  return { url: receiver.url, titles, close: receiver.close };
}

type Worker = { child: ChildProcess; output: () => string; stop(): Promise<number | null> };

/** `npm run worker` (node apps/worker/main.js) with `env`, once it says it runs. */
async function startWorker(env: Record<string, string>): Promise<Worker> {
  const child = spawn(NODE, ['apps/worker/main.js'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (d: Buffer) => {
    output += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    output += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const started = await timeUntil(async () => output.includes('worker running'), 30_000);
  if (started === null) {
    child.kill('SIGKILL');
    throw new Error(`the worker did not start:\n${output}`);
  }
  return {
    child,
    output: () => output,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      return exited;
    },
  };
}

function adminUrl(): string {
  const url = new URL(process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test');
  url.pathname = '/postgres';
  return url.toString();
}

async function dropDatabase(name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

export const redisOutage: Scenario = {
  name: 'redis-outage',
  title: 'Redis down and back under load (limits, job adds, BullMQ workers, webhooks)',
  timeoutMs: 8 * 60_000,
  async run({ short, log }) {
    const redis = await startOwnRedis();
    const tag = randomBytes(4).toString('hex');
    const database = `cs_rel_redis_${tag}`;
    await createDatabase(adminUrl(), database);
    const databaseUrl = new URL(adminUrl());
    databaseUrl.pathname = `/${database}`;
    const receiver = await startTitleReceiver();
    let server: ServerProcess | undefined;
    let worker: Worker | undefined;
    try {
      const env = {
        DATABASE_URL: databaseUrl.toString(),
        DATA_DIR: '/nonexistent',
        REDIS_URL: redis.url,
        JOBS_PREFIX: `rel-redis-${tag}`,
        RATE_LIMIT_KEY_PREFIX: `rel-redis-${tag}:rl`,
        RATE_LIMIT_PER_MINUTE: '1000000',
        EDIT_LIMIT_PER_DAY: '1000000',
        OUTBOUND_ALLOW_NETWORKS: '127.0.0.1/32',
        WEBHOOK_RETRY_SCHEDULE: '1,1,1',
        JOBS_LOCK_SECONDS: '2',
      };
      const seeded = await migrateAndSeed(env, short ? 5 : 20);
      server = await startServer({ ...env, RUN_JOBS: 'false', METRICS_PORT: '0' });
      worker = await startWorker(env);
      const base = server.url;
      const key = seeded.api_key;
      const ids = await articleIds(base, key, seeded.sites[0]?.id as string);
      const created = await fetch(`${base}/api/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: receiver.url, events: ['article.updated'] }),
      });
      if (created.status !== 201) throw new Error(`creating the endpoint answered ${created.status}`);
      log(`server ${base}, worker ${worker.child.pid}, Redis :${redis.port}, ${ids.length} articles`);

      const loadOf = (edits: boolean) =>
        startLoad({
          baseUrl: base,
          key,
          articleIds: ids,
          clients: short ? 4 : 8,
          timeoutMs: CLIENT_TIMEOUT_MS,
          pauseMs: short ? 50 : 20,
          label: 'redis-outage',
          edits,
        });
      const sweepPattern = `rel-redis-${tag}:*:repeat:webhook.sweep*`;
      const schedulersBefore = await countKeys(redis.url, sweepPattern);
      const load = loadOf(true);
      const phase = short ? 2_000 : 8_000;
      await sleep(phase);
      const downAt = Date.now();
      await redis.stop();
      log('redis-server killed');
      // Longer than a job add waits (5 s in the worker, 2 s in a request): some adds are given up.
      await sleep(short ? 7_000 : 15_000);
      const readyDown = await readiness(metricsBaseOf(server));
      const publicDown = await publicReadiness(base);
      await load.stop();
      // From here on reads only: what was edited while Redis was away must reach the endpoint without
      // a later edit to the same endpoint kicking its queue (a quiet moment after an outage).
      const reads = loadOf(false);
      const upAt = Date.now();
      await redis.start();
      log('redis-server started again (empty)');
      const reconnected = (text: () => string) => async () => text().split(REDIS_RESTORED).length - 1 >= 1;
      const [apiBackMs, workerBackMs] = await Promise.all([
        timeUntil(
          reconnected(() => server?.logs().join('\n') ?? ''),
          30_000,
        ),
        timeUntil(
          reconnected(() => worker?.output() ?? ''),
          30_000,
        ),
      ]);
      log(`reconnected: API ${apiBackMs} ms, worker ${workerBackMs} ms`);
      await sleep(phase);
      await reads.stop();
      const schedulers = await countKeys(redis.url, sweepPattern);
      const answers = [...load.answers, ...reads.answers];
      const during = answers.filter((a) => a.at >= downAt && a.at < upAt);

      // Every edit answered 200 reaches the endpoint, those made while Redis was away included.
      const acked = answers
        .filter((a) => a.method === 'PUT' && a.status === 200)
        .map((a) => a.title as string);
      const bound = short ? 45_000 : 150_000;
      const deliveredMs = await timeUntil(async () => {
        const got = new Set(receiver.titles);
        return acked.every((t) => got.has(t));
      }, bound);
      const got = new Set(receiver.titles);
      const undelivered = acked.filter((t) => !got.has(t));
      const rlKeys = await countKeys(redis.url, `rel-redis-${tag}:rl*`);
      const serverLog = server.logs().join('\n');
      await writeFile(resolve(import.meta.dirname, 'results/redis-outage.server.log'), serverLog);
      await writeFile(resolve(import.meta.dirname, 'results/redis-outage.worker.log'), worker.output());

      const checks: Check[] = [];
      const fivexx = answers.filter((a) => a.status >= 500);
      checks.push(
        check(
          'no call answered a 5xx',
          fivexx.length === 0,
          fivexx.length
            ? `${fivexx.length}, e.g. ${fivexx[0]?.status} ${fivexx[0]?.body.slice(0, 200)}`
            : undefined,
        ),
      );
      const other = answers.filter((a) => a.status !== 200 && a.status < 500);
      checks.push(
        check(
          'every call answered 200 (limits fail open: nobody refused)',
          other.length === 0,
          other.length
            ? `${other.length}, e.g. ${other[0]?.status} ${other[0]?.body.slice(0, 200)}`
            : undefined,
        ),
      );
      const slow = answers.filter((a) => a.status === NO_ANSWER || a.ms > SLOWEST_ALLOWED_MS);
      checks.push(
        check(
          `no call took over ${SLOWEST_ALLOWED_MS / 1000} s (job adds give up after 2 s, the limiter after 250 ms)`,
          slow.length === 0,
          slow.length ? `${slow.length}, e.g. ${Math.round(slow[0]?.ms ?? 0)} ms` : undefined,
        ),
        check('calls were made while Redis was away', during.length > 0, `${during.length}`),
        check(
          '/readyz stays ready while Redis is away, the public one and the detailed one (queues reported, not judged)',
          publicDown === 200 && readyDown.status === 200,
          `public ${publicDown}, detailed ${readyDown.status}`,
        ),
        check(
          'the limiter said it fails open, then that Redis answers again',
          serverLog.includes(LIMITS_FAILING_OPEN) &&
            serverLog.indexOf(LIMITS_BACK) > serverLog.indexOf(LIMITS_FAILING_OPEN),
        ),
        check('the limits count in Redis again after it returned', rlKeys > 0, `${rlKeys} keys`),
        check(
          'the API and the worker reconnected to Redis by themselves',
          apiBackMs !== null && workerBackMs !== null,
          `API ${apiBackMs} ms, worker ${workerBackMs} ms`,
        ),
        check(
          'the webhook sweep (a repeatable job) is scheduled again in the Redis that came back empty',
          schedulersBefore > 0 && schedulers > 0,
          `before the outage ${schedulersBefore} keys, after ${schedulers}`,
        ),
        check(
          'the worker kept running (no restart)',
          worker.child.exitCode === null,
          worker.child.exitCode === null ? undefined : `exited ${worker.child.exitCode}`,
        ),
        check(
          `every edit answered 200 was delivered to the webhook endpoint within ${bound / 1000} s`,
          undelivered.length === 0,
          `${acked.length - undelivered.length}/${acked.length}${undelivered.length ? `, e.g. missing ${undelivered[0]}` : ''}`,
        ),
      );
      const figures: Record<string, string | number> = {
        calls: answers.length,
        'calls while Redis was away': during.length,
        'edits answered 200': acked.length,
        'slowest call (ms)': Math.round(Math.max(...answers.map((a) => a.ms))),
        'slowest call while Redis was away (ms)': Math.round(Math.max(0, ...during.map((a) => a.ms))),
        'median call while Redis was away (ms)': median(during),
        'Redis away (s)': Math.round((upAt - downAt) / 100) / 10,
        'API reconnected after (ms)': apiBackMs ?? 'never',
        'worker reconnected after (ms)': workerBackMs ?? 'never',
        'all deliveries in after the load (ms)': deliveredMs ?? 'never',
        'webhook messages received': receiver.titles.length,
      };
      return {
        done: `${short ? 4 : 8} clients reading and editing ${ids.length} articles with a webhook endpoint; an API process and a worker on a Redis of the scenario's own, killed (SIGKILL) for ~${short ? 7 : 15} s and started again empty, then reads only`,
        checks,
        figures,
      };
    } catch (error) {
      if (server) log(`server log tail:\n${server.logs().slice(-20).join('\n')}`);
      if (worker) log(`worker log tail:\n${worker.output().split('\n').slice(-20).join('\n')}`);
      throw error;
    } finally {
      await worker?.stop();
      await server?.stop();
      await redis.remove();
      await receiver.close();
      await dropDatabase(database);
    }
  },
};

function median(answers: Answer[]): number {
  const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
  return Math.round(ms[Math.floor(ms.length / 2)] ?? 0);
}

async function countKeys(url: string, pattern: string): Promise<number> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await client.connect();
    return (await client.keys(pattern)).length;
  } finally {
    client.disconnect();
  }
}
