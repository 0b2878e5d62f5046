import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Agent, request } from 'undici';
import { createTestDatabase } from '../tests/support/db.ts';
import { cli } from '../tests/support/process.ts';
import { startServer } from '../tests/support/server.ts';
import { type Check, check, type Scenario } from './scenario.ts';

/*
 * Scenario 6: one account at its limits (requests, then edits: closed loops as fast as the server
 * answers) while another account works at a steady pace. Promised: the quiet account's p99 stays
 * within 2x of its p99 alone. Alternating runs (alone, noisy, alone, noisy) on one server, so both are
 * measured on the machine as it is at the time.
 */

const REDIS_URL = 'redis://127.0.0.1:6379';

type Seeded = { api_key: string; sites: Array<{ id: string }> };

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};
const round = (n: number): number => Math.round(n * 10) / 10;

export const noisyTenant: Scenario = {
  name: 'noisy-tenant',
  title: 'one account at its request and edit limits while another works',
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
      // 600 requests a minute each: room for the quiet account to make enough calls for a p99 (about
      // 400 a minute), and still a limit the noisy one reaches in its first moments.
      RATE_LIMIT_PER_MINUTE: '600',
      JOBS_PREFIX: prefix,
    };
    const agent = new Agent({ connections: 64 });
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
      const quiet = await seed();
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
      const quietArticles = await articlesOf(quiet);
      const noisyArticles = await articlesOf(noisy);
      const siteId = quiet.sites[0]?.id as string;

      // The quiet account: a call every 150 ms, within its 600 a minute (a read, and an edit every
      // fifth: its 200 daily edits allow the whole run).
      const quietPhase = async (ms: number): Promise<{ latencies: number[]; errors: number }> => {
        const latencies: number[] = [];
        let errors = 0;
        const end = performance.now() + ms;
        let i = 0;
        while (performance.now() < end) {
          const r =
            i % 5 === 4
              ? await call(quiet.api_key, 'PUT', `/articles/${quietArticles[i % quietArticles.length]}`, {
                  title: `Quiet ${i}`,
                })
              : await call(quiet.api_key, 'GET', `/sites/${siteId}/backlinks?category=industry`);
          latencies.push(r.ms);
          if (r.status !== 200) {
            errors++;
            quietStatuses[r.status] = (quietStatuses[r.status] ?? 0) + 1;
          }
          i++;
          await new Promise((res) => setTimeout(res, 150));
        }
        return { latencies, errors };
      };
      // The noisy account: 32 loops as fast as the server answers, edits and reads; most are refused.
      const noisyStatuses: Record<string, number> = {};
      const quietStatuses: Record<string, number> = {};
      const flood = (ms: number): Promise<void> => {
        const end = performance.now() + ms;
        let n = 0;
        return Promise.all(
          Array.from({ length: 32 }, async () => {
            while (performance.now() < end) {
              const j = n++;
              const r =
                j % 2 === 0
                  ? await call(noisy.api_key, 'PUT', `/articles/${noisyArticles[j % noisyArticles.length]}`, {
                      title: `Noise ${j}`,
                    })
                  : await call(
                      noisy.api_key,
                      'GET',
                      `/sites/${noisy.sites[0]?.id}/articles?from=2000-01-01&to=2100-01-01`,
                    );
              noisyStatuses[r.status] = (noisyStatuses[r.status] ?? 0) + 1;
            }
          }),
        ).then(() => undefined);
      };

      const alone: number[] = [];
      const crowded: number[] = [];
      let quietErrors = 0;
      for (const phase of ['alone', 'noisy', 'alone', 'noisy'] as const) {
        log(`${phase}: ${phaseMs / 1000} s`);
        const [q] = await Promise.all([
          quietPhase(phaseMs),
          phase === 'noisy' ? flood(phaseMs) : Promise.resolve(),
        ]);
        (phase === 'alone' ? alone : crowded).push(...q.latencies);
        quietErrors += q.errors;
      }
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
          'the quiet account gets no error',
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
          'the quiet account’s p99 stays within 2x of its p99 alone',
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
      done: 'two accounts on one server, 600 requests a minute each: the quiet one a call every 150 ms (reads, an edit in five); the noisy one 32 loops of edits and reads as fast as answered, in alternating phases',
      checks,
      figures,
    };
  },
};
