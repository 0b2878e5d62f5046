import { randomUUID } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { Agent, request } from 'undici';
import { createTestDatabase } from '../tests/support/db.ts';
import { cli } from '../tests/support/process.ts';
import { startServer } from '../tests/support/server.ts';
import { TEST_REDIS_URL } from '../tests/support/services.ts';
import { type Check, check, type Scenario } from './scenario.ts';

/*
 * Scenario 6: one account at its limits (requests, then edits: closed loops as fast as the server
 * answers) while another account works at a steady pace. Promised: the quiet account's p99 stays
 * within 2x of its p99 alone. Alternating runs (alone, noisy, alone, noisy) on one server, so both are
 * measured on the machine as it is at the time.
 */

const REDIS_URL = TEST_REDIS_URL;
/** Accounts that work at a steady pace, each well within its limits. */
const QUIET_ACCOUNTS = 25;
/** Closed loops of the noisy account. */
const FLOOD_LOOPS = 32;
/** Alternating phases, so that both conditions are measured on the machine as it is at the time. */
const PHASES = ['alone', 'noisy', 'alone', 'noisy', 'alone', 'noisy'] as const;

type Seeded = { api_key: string; sites: Array<{ id: string }> };

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};
const round = (n: number): number => Math.round(n * 10) / 10;

export const noisyTenant: Scenario = {
  name: 'noisy-tenant',
  title: 'one account at its request and edit limits while others work',
  timeoutMs: 5 * 60_000,
  async run({ short, log }) {
    const phaseMs = short ? 5_000 : 15_000;
    const test = await createTestDatabase('postgres');
    const prefix = `rel-noisy-${randomUUID().slice(0, 8)}`;
    const env = {
      DATABASE_URL: test.databaseUrl as string,
      DATA_DIR: '/nonexistent',
      REDIS_URL,
      RATE_LIMIT_KEY_PREFIX: `${prefix}:rl`,
      // The CONTRACT's 60 requests a minute; edits: 20 a day, which the noisy account reaches in its
      // first moments and no quiet account does (each makes about 8 edits).
      RATE_LIMIT_PER_MINUTE: '60',
      EDIT_LIMIT_PER_DAY: '20',
      JOBS_PREFIX: prefix,
    };
    const agent = new Agent({ connections: 4 });
    const server = await startServer(env);
    const checks: Check[] = [];
    const figures: Record<string, string | number> = {};
    try {
      const seed = async (): Promise<Seeded> => {
        const r = await cli(
          ['seed-demo', '--json', '--sites', '1', '--articles', '10', '--backlinks', '20'],
          env,
        );
        if (r.code !== 0) throw new Error(r.stderr);
        return JSON.parse(r.stdout) as Seeded;
      };
      // The quiet accounts, seeded a few at a time.
      const quiet: Seeded[] = [];
      for (let i = 0; i < QUIET_ACCOUNTS; i += 5) {
        quiet.push(...(await Promise.all(Array.from({ length: Math.min(5, QUIET_ACCOUNTS - i) }, seed))));
      }
      const noisy = await seed();
      const call = async (key: string, method: 'GET' | 'PUT', path: string, body?: unknown) => {
        const started = performance.now();
        const res = await request(`${server.url}/api/v1${path}`, {
          method,
          dispatcher: agent,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        await res.body.text();
        return { status: res.statusCode, ms: performance.now() - started };
      };
      const articlesOf = async (s: Seeded): Promise<string[]> => {
        const res = await request(
          `${server.url}/api/v1/sites/${s.sites[0]?.id}/articles?from=2000-01-01&to=2100-01-01`,
          { dispatcher: agent, headers: { authorization: `Bearer ${s.api_key}` } },
        );
        return ((await res.body.json()) as { data: Array<{ id: string }> }).data.map((a) => a.id);
      };
      const quietArticles = await Promise.all(quiet.map(articlesOf));
      const noisyArticles = await articlesOf(noisy);

      // The quiet accounts: one call at a time, each by the next account in turn, a pause of 50 ms
      // between them (each account about 45 calls a minute, within its 60): reads, an edit in ten.
      const quietStatuses: Record<string, number> = {};
      const quietPhase = async (ms: number): Promise<{ latencies: number[]; errors: number }> => {
        const latencies: number[] = [];
        let errors = 0;
        const end = performance.now() + ms;
        while (performance.now() < end) {
          const which = quietCalls % QUIET_ACCOUNTS;
          const account = quiet[which] as Seeded;
          const turn = Math.floor(quietCalls / QUIET_ACCOUNTS);
          const articles = quietArticles[which] as string[];
          const r =
            turn % 10 === 9
              ? await call(account.api_key, 'PUT', `/articles/${articles[turn % articles.length]}`, {
                  title: `Quiet ${turn}`,
                })
              : await call(
                  account.api_key,
                  'GET',
                  `/sites/${account.sites[0]?.id}/backlinks?category=industry`,
                );
          latencies.push(r.ms);
          if (r.status !== 200) {
            errors++;
            quietStatuses[r.status] = (quietStatuses[r.status] ?? 0) + 1;
          }
          quietCalls++;
          await new Promise((res) => setTimeout(res, 50));
        }
        return { latencies, errors };
      };
      let quietCalls = 0;
      // The noisy account: FLOOD_LOOPS closed loops in a worker thread of their own (reliability/noisy-flood.ts).
      const noisyStatuses: Record<string, number> = {};
      const flood = (ms: number): Promise<void> =>
        new Promise((resolve, reject) => {
          const worker = new Worker(new URL('./noisy-flood.ts', import.meta.url), {
            workerData: {
              url: server.url,
              apiKey: noisy.api_key,
              siteId: noisy.sites[0]?.id,
              articles: noisyArticles,
              ms,
              loops: FLOOD_LOOPS,
            },
          });
          worker.once('message', (statuses: Record<string, number>) => {
            for (const [status, count] of Object.entries(statuses)) {
              noisyStatuses[status] = (noisyStatuses[status] ?? 0) + count;
            }
          });
          worker.once('error', reject);
          worker.once('exit', () => resolve());
        });

      // Warm-up (not measured): the server's code paths compiled, its pools filled.
      await quietPhase(3_000);
      const alone: number[] = [];
      const crowded: number[] = [];
      let quietErrors = 0;
      for (const phase of PHASES) {
        log(`${phase}: ${phaseMs / 1000} s`);
        const [q] = await Promise.all([
          quietPhase(phaseMs),
          phase === 'noisy' ? flood(phaseMs) : Promise.resolve(),
        ]);
        (phase === 'alone' ? alone : crowded).push(...q.latencies);
        quietErrors += q.errors;
      }
      figures.quiet_calls_alone = alone.length;
      figures.quiet_calls_noisy = crowded.length;
      const p99Alone = percentile(alone, 99);
      const p99Noisy = percentile(crowded, 99);
      figures.quiet_p50_alone_ms = round(percentile(alone, 50));
      figures.quiet_p99_alone_ms = round(p99Alone);
      figures.quiet_p50_noisy_ms = round(percentile(crowded, 50));
      figures.quiet_p99_noisy_ms = round(p99Noisy);
      figures.noisy_statuses = Object.entries(noisyStatuses)
        .map(([s, n]) => `${s}: ${n}`)
        .join(', ');
      checks.push(
        check(
          'the quiet accounts get no error',
          quietErrors === 0,
          `${quietErrors} errors: ${JSON.stringify(quietStatuses)}`,
        ),
      );
      checks.push(
        check(
          'the noisy account is held to its limits (429)',
          (noisyStatuses['429'] ?? 0) > 0 &&
            Object.keys(noisyStatuses).every((s) => s === '200' || s === '429'),
        ),
      );
      checks.push(
        check(
          'the quiet accounts’ p99 stays within 2x of their p99 alone',
          p99Noisy <= 2 * p99Alone,
          `${round(p99Noisy)} ms against ${round(p99Alone)} ms`,
        ),
      );
    } finally {
      await server.stop();
      await agent.close();
      await test.drop();
      const redis = new Redis(REDIS_URL);
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      await redis.quit();
    }
    return {
      done: `${QUIET_ACCOUNTS + 1} accounts on one server (PostgreSQL, Redis) at the CONTRACT's 60 requests a minute, 20 edits a day: ${QUIET_ACCOUNTS} quiet ones in turn, a call at a time with 50 ms between (reads, an edit in ten; each within its limits); the noisy one ${FLOOD_LOOPS} closed loops of edits and reads as fast as answered (a worker thread of the scenario), at both limits in its first moments; ${PHASES.length} alternating phases (alone, noisy) of ${phaseMs / 1000} s after a 3 s warm-up`,
      checks,
      figures,
    };
  },
};
