import { execFileSync } from 'node:child_process';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import pino from 'pino';
import { buildApp } from '../apps/server/app.ts';
import { createRequestLimiter } from '../apps/server/http/limits.ts';
import { loadConfig } from '../infra/config.ts';
import { createLogDestination } from '../infra/log-destination.ts';
import { startAsyncProjections } from '../infra/projection-runner.ts';
import { closeRedis, openRedis, waitForRedis } from '../infra/redis.ts';
import { withoutPassword } from '../infra/url-password.ts';
import { projectors } from '../projections/index.ts';
import { type DatasetSpec, DEFAULT_SPEC, prepareDataset } from './dataset.ts';
import { buildFloor } from './floor.ts';
import { busyElsewhere, type LoadSettings, type Measurement, measure } from './load.ts';
import { type CpuProfile, profileWhile, summarise } from './profile.ts';
import { type BenchResults, markdown, type ScenarioResult, type StatsComparison } from './report.ts';

/*
 * `npm run bench`: the read API against its floor (see docs/performance.md).
 *
 *   --connections N   concurrent connections (10)        --duration S   measured seconds per run (10)
 *   --warmup S        warm-up seconds per run (2)         --only NAME    scenarios whose name starts with NAME
 *   --rounds N        rounds over all scenarios (3); medians are reported, every run is kept in the JSON
 *   --stats-rate R    also measure the statistics routes at a fixed R req/s (200; 0: not)
 *   --wait-quiet S    before measuring, wait up to S seconds (60) for other processes to leave the CPUs alone
 *   --profile         also profile the real routes and their floors (one more run each) and summarise where the time goes
 *   --articles N --big-backlinks N --small-backlinks N    a smaller dataset (for trying the bench out)
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/cs_bench, created if
 * missing), RATE_LIMIT_PER_MINUTE (default here 1000000000: the limiter stays on, its quota is
 * raised), LOG_LEVEL (info, as the server's default; the log goes to /dev/null).
 */

const ROOT = resolve(import.meta.dirname, '..');
const RESULTS = resolve(ROOT, 'bench/results');
const LIST_TARGET = 0.6;
const STATS_TOLERANCE = 0.2;
/** Cores used by other processes above which the machine does not count as quiet. */
const QUIET_CORES = 0.3;

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '10' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    only: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    'stats-rate': { type: 'string', default: '200' },
    'wait-quiet': { type: 'string', default: '60' },
    profile: { type: 'boolean', default: false },
    articles: { type: 'string' },
    'big-backlinks': { type: 'string' },
    'small-backlinks': { type: 'string' },
  },
  strict: true,
});

const positive = (name: string, value: string | undefined, fallback: number): number => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number`);
  return n;
};

const started = Date.now();
const log = (line: string): void => {
  process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
};

const settings: LoadSettings = {
  connections: positive('connections', args.connections, 10),
  durationSeconds: positive('duration', args.duration, 10),
  warmupSeconds: positive('warmup', args.warmup, 2),
};
const rounds = Math.max(1, positive('rounds', args.rounds, 3));
const statsRate = positive('stats-rate', args['stats-rate'], 200);
const waitQuiet = positive('wait-quiet', args['wait-quiet'], 60);
const spec: DatasetSpec = {
  ...DEFAULT_SPEC,
  articles: positive('articles', args.articles, DEFAULT_SPEC.articles),
  bigBacklinks: positive('big-backlinks', args['big-backlinks'], DEFAULT_SPEC.bigBacklinks),
  smallBacklinks: positive('small-backlinks', args['small-backlinks'], DEFAULT_SPEC.smallBacklinks),
};

const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/cs_bench';
// The server's own configuration, with the request quota raised (by configuration only).
const config = loadConfig({
  ...process.env,
  DATABASE_URL: databaseUrl,
  RATE_LIMIT_PER_MINUTE: process.env.RATE_LIMIT_PER_MINUTE || '1000000000',
  PORT: '0',
});

log(`database ${withoutPassword(databaseUrl)}`);
const { runtime, dataset, generated } = await prepareDataset(databaseUrl, spec, log, {
  sanitizeThreads: config.SANITIZE_THREADS,
});

// Composed as apps/server/serve.ts composes the server; only the log goes to /dev/null.
const limitsLog = pino(
  { level: config.LOG_LEVEL, base: { component: 'limits' } },
  pino.destination('/dev/null'),
);
const redis = config.REDIS_URL
  ? openRedis(config.REDIS_URL, { name: 'content-service:limits', logger: limitsLog })
  : undefined;
if (redis) await waitForRedis(redis, 2_000);
const limiter = createRequestLimiter({
  perMinute: config.RATE_LIMIT_PER_MINUTE,
  keyPrefix: config.RATE_LIMIT_KEY_PREFIX,
  logger: limitsLog,
  ...(redis ? { redis } : {}),
});
const app = await buildApp({
  runtime,
  config,
  limit: limiter.hook,
  logger: { level: config.LOG_LEVEL, stream: createLogDestination('/dev/null').stream },
});
const workers = config.RUN_WORKERS
  ? startAsyncProjections({ handle: runtime.handle, projectors, logger: app.log })
  : null;
const floor = await buildFloor(runtime.db, { accountId: dataset.accountId, now: () => new Date() });

const key = await runtime.commands.createApiKey(dataset.accountId, { name: 'Benchmark', scope: 'write' });
const auth = { authorization: `Bearer ${key.key}` };

const results: BenchResults = {
  format: 1,
  started_at: new Date(started).toISOString(),
  finished_at: '',
  machine: await machine(),
  settings: {
    connections: settings.connections,
    duration_s: settings.durationSeconds,
    warmup_s: settings.warmupSeconds,
    rounds,
    stats_fixed_rate: statsRate,
    load_generator: 'autocannon 8, one worker thread in the bench process',
    rate_limit_per_minute: config.RATE_LIMIT_PER_MINUTE,
    log_level: `${config.LOG_LEVEL} (to /dev/null)`,
    workers_in_process: workers !== null,
    database_pool: 10,
    busy_elsewhere_cores_at_start: 0,
  },
  dataset: { ...dataset, generated_this_run: generated },
  scenarios: [],
  stats_p99: [],
  profiles: {},
  clean: true,
  targets_met: true,
};

let exitCode = 0;
try {
  const realBase = await listen(app);
  const floorBase = await listen(floor);
  log(`real app on ${realBase}, floor on ${floorBase}`);

  const site = (id: string): string => encodeURIComponent(id);
  const articlePath = `/api/v1/articles/${encodeURIComponent(dataset.longArticleId)}`;
  const scenarios: {
    name: string;
    description: string;
    real: string;
    floor: string;
    target: number | null;
    reference?: {
      label: string;
      side: 'floor' | 'real';
      path: string;
      rate?: number;
      headers?: Record<string, string>;
      /** The status every answer must have (default: any 2xx). */
      status?: number;
    }[];
  }[] = [
    {
      name: 'list articles',
      description: `GET a page of 100 articles of a site with ${dataset.spec.articles} articles`,
      real: `/api/v1/sites/${site(dataset.articleSiteId)}/articles?per_page=100`,
      floor: `/floor/sites/${site(dataset.articleSiteId)}/articles?per_page=100`,
      target: LIST_TARGET,
      reference: [
        {
          label: 'floor + count (listArticles: page query and count)',
          side: 'floor',
          path: `/floor/sites/${site(dataset.articleSiteId)}/articles-with-count?per_page=100`,
        },
      ],
    },
    {
      name: 'get article',
      description: `GET one article of ${dataset.longArticleBytes} bytes with ${dataset.spec.protectedBlocks} protected blocks`,
      real: articlePath,
      floor: `/floor/articles/${encodeURIComponent(dataset.longArticleId)}`,
      target: LIST_TARGET,
      reference: [
        {
          label: 'real route, If-None-Match: its current ETag (304)',
          side: 'real',
          path: articlePath,
          headers: { 'if-none-match': await etagOf(`${realBase}${articlePath}`) },
          status: 304,
        },
      ],
    },
  ];
  for (const [label, id, count] of [
    ['1k', dataset.smallBacklinkSiteId, dataset.spec.smallBacklinks],
    ['1M', dataset.bigBacklinkSiteId, dataset.spec.bigBacklinks],
  ] as const) {
    for (const period of ['last_30_days', dataset.month]) {
      scenarios.push({
        name: `stats ${label} ${period}`,
        description: `GET statistics for ${period} of a site with ${count} backlinks`,
        real: `/api/v1/sites/${site(id)}/stats?period=${period}`,
        floor: `/floor/sites/${site(id)}/stats?period=${period}`,
        target: null,
        ...(statsRate > 0
          ? {
              reference: [
                {
                  label: `real route at ${statsRate} req/s`,
                  side: 'real' as const,
                  path: `/api/v1/sites/${site(id)}/stats?period=${period}`,
                  rate: statsRate,
                },
              ],
            }
          : {}),
      });
    }
  }
  scenarios.push(
    {
      name: 'list backlinks',
      description: `GET a page of 100 backlinks of a site with ${dataset.spec.bigBacklinks} backlinks`,
      real: `/api/v1/sites/${site(dataset.bigBacklinkSiteId)}/backlinks?per_page=100`,
      floor: `/floor/sites/${site(dataset.bigBacklinkSiteId)}/backlinks?per_page=100`,
      target: LIST_TARGET,
      reference: [
        {
          label: 'floor + count (listBacklinks: page query and total)',
          side: 'floor',
          path: `/floor/sites/${site(dataset.bigBacklinkSiteId)}/backlinks-with-count?per_page=100`,
        },
      ],
    },
    {
      // The account's log holds a record of every request the benchmark made, and grows as it is read.
      name: 'list activity',
      description: "GET a page of 100 of the account's activity records, newest first",
      real: '/api/v1/activity?per_page=100',
      floor: '/floor/activity?per_page=100',
      target: LIST_TARGET,
      reference: [
        {
          label: 'floor + count (listActivity: page query and total)',
          side: 'floor',
          path: '/floor/activity-with-count?per_page=100',
        },
      ],
    },
  );
  const chosen = scenarios.filter((s) => !args.only || s.name.startsWith(args.only));
  if (chosen.length === 0) throw new Error(`--only ${args.only}: no scenario has such a name`);

  for (const s of chosen) await checkSameRows(s.name, `${realBase}${s.real}`, `${floorBase}${s.floor}`);

  // Other work on the machine skews every figure: wait a little for it to pass, and say so.
  let elsewhere = await busyElsewhere(2_000);
  for (let waited = 0; elsewhere > QUIET_CORES && waited < waitQuiet; waited += 5) {
    log(`the machine is busy with other work (${elsewhere} cores); waiting for it to settle`);
    elsewhere = await busyElsewhere(5_000);
  }
  results.settings.busy_elsewhere_cores_at_start = elsewhere;
  if (elsewhere > QUIET_CORES)
    log(`measuring anyway, with ${elsewhere} cores busy elsewhere: figures will be low`);

  // Rounds over every scenario (floor, references, real route), so that a burst of other work on
  // the machine touches one round of each rather than every run of one; medians are reported.
  const runs = new Map<string, { floor: Measurement[]; real: Measurement[]; refs: Measurement[][] }>();
  for (let r = 1; r <= rounds; r++) {
    for (const s of chosen) {
      const entry = runs.get(s.name) ?? { floor: [], real: [], refs: (s.reference ?? []).map(() => []) };
      runs.set(s.name, entry);
      const tag = rounds > 1 ? ` (round ${r}/${rounds})` : '';
      log(`${s.name}: floor${tag}`);
      await settle();
      entry.floor.push(
        check(s.name, 'floor', await measure(`${floorBase}${s.floor}`, settings, { databaseUrl })),
      );
      for (const [i, ref] of (s.reference ?? []).entries()) {
        log(`${s.name}: ${ref.label}${tag}`);
        await settle();
        const refRun =
          ref.side === 'real'
            ? await measure(
                `${realBase}${ref.path}`,
                { ...settings, rate: ref.rate },
                { headers: { ...auth, ...ref.headers }, databaseUrl },
              )
            : await measure(`${floorBase}${ref.path}`, { ...settings, rate: ref.rate }, { databaseUrl });
        entry.refs[i]?.push(check(s.name, ref.label, refRun, ref.status));
      }
      log(`${s.name}: real route${tag}`);
      await settle();
      const real = check(
        s.name,
        'real',
        await measure(`${realBase}${s.real}`, settings, { headers: auth, databaseUrl }),
      );
      entry.real.push(real);
      const floorRun = entry.floor.at(-1) as Measurement;
      log(
        `${s.name}${tag}: real ${real.rps.toFixed(0)} req/s p50 ${real.p50_ms} ms p99 ${real.p99_ms} ms; ` +
          `floor ${floorRun.rps.toFixed(0)} req/s p50 ${floorRun.p50_ms} ms p99 ${floorRun.p99_ms} ms`,
      );
    }
  }

  for (const s of chosen) {
    const entry = runs.get(s.name);
    if (!entry) continue;
    const realRun = summary(entry.real);
    const floorRun = summary(entry.floor);
    const ratio = round(realRun.rps / floorRun.rps, 3);
    const reference: ScenarioResult['reference'] = (s.reference ?? []).map((ref, i) => {
      const result = summary(entry.refs[i] ?? []);
      const ratio = ref.rate ? null : round(realRun.rps / result.rps, 3);
      return { label: ref.label, path: ref.path, rate: ref.rate ?? null, result, ratio };
    });
    const target = s.target === null ? null : { min_ratio: s.target, met: ratio >= s.target };
    if (target && !target.met) results.targets_met = false;
    results.scenarios.push({
      name: s.name,
      description: s.description,
      real_path: s.real,
      floor_path: s.floor,
      real: realRun,
      floor: floorRun,
      ratio,
      target,
      ...(reference.length > 0 ? { reference } : {}),
      rounds: { real: entry.real, floor: entry.floor },
    });
  }

  for (const period of ['last_30_days', dataset.month]) {
    const small = results.scenarios.find((s) => s.name === `stats 1k ${period}`);
    const big = results.scenarios.find((s) => s.name === `stats 1M ${period}`);
    if (!small || !big) continue;
    const ratio = round(big.real.p99_ms / Math.max(small.real.p99_ms, 0.001), 3);
    const comparison: StatsComparison = {
      period,
      p99_small_ms: small.real.p99_ms,
      p99_big_ms: big.real.p99_ms,
      ratio,
      floor_p99_small_ms: small.floor.p99_ms,
      floor_p99_big_ms: big.floor.p99_ms,
      fixed_rate: fixedRate(small, big),
      met: Math.abs(ratio - 1) <= STATS_TOLERANCE,
    };
    if (!comparison.met) results.targets_met = false;
    results.stats_p99.push(comparison);
  }

  if (args.profile) {
    // Every chosen scenario but the statistics of the smaller site (their statement is the same).
    for (const s of chosen.filter(
      (c) => !c.name.startsWith('stats 1k') && !c.name.startsWith('stats 1M 2'),
    )) {
      // The real route, then its floor: what the real route spends above the floor, function by function.
      const sides = [
        { what: 'real route', key: s.name, url: `${realBase}${s.real}`, headers: auth },
        { what: 'floor', key: `${s.name} (floor)`, url: `${floorBase}${s.floor}`, headers: {} },
      ];
      for (const side of sides) {
        log(`${s.name}: profiling the ${side.what}`);
        await settle();
        let requests = 0;
        const profile: CpuProfile = await profileWhile(async () => {
          const settingsNow = { ...settings, warmupSeconds: 0 };
          requests = (await measure(side.url, settingsNow, { headers: side.headers })).requests;
        });
        log(`  ${requests} requests under the profiler`);
        const stamp = new Date().toISOString().replace(/[:.]/g, '-');
        await mkdir(RESULTS, { recursive: true });
        await writeFile(
          resolve(RESULTS, `profile-${side.key.replace(/\W+/g, '-').replace(/-$/, '')}-${stamp}.cpuprofile`),
          JSON.stringify(profile),
        );
        results.profiles[side.key] = summarise(profile, ROOT);
      }
    }
  }
} catch (error) {
  exitCode = 1;
  log(`FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  results.finished_at = new Date().toISOString();
  if (results.scenarios.length > 0) await writeResults(results);
  await app.close();
  await floor.close();
  await limiter.close();
  if (redis) await closeRedis(redis);
  await workers?.stop();
  await runtime.close();
}
if (!results.clean) {
  log('FAILED: some requests failed or answered other than 2xx (see the results); the figures are not valid');
  exitCode = 1;
}
log(
  exitCode === 0
    ? `done: targets ${results.targets_met ? 'met' : 'NOT all met'}; bench/results/latest.md`
    : 'finished with errors',
);
process.exitCode = exitCode;

/* ---------------------------------------------------------------------------------------------- */

/** The statistics p99 at a fixed rate, below saturation: latency of the request, not of the queue. */
function fixedRate(small: ScenarioResult, big: ScenarioResult): StatsComparison['fixed_rate'] {
  const a = small.reference?.find((r) => r.rate);
  const b = big.reference?.find((r) => r.rate);
  if (!a?.rate || !b) return null;
  const ratio = round(b.result.p99_ms / Math.max(a.result.p99_ms, 0.001), 3);
  return {
    rate: a.rate,
    p99_small_ms: a.result.p99_ms,
    p99_big_ms: b.result.p99_ms,
    ratio,
    within: Math.abs(ratio - 1) <= STATS_TOLERANCE,
  };
}

/**
 * The median run of several: req/s, p50, p90 and p99 are each the median over the runs; counts of
 * requests, errors and non-2xx answers are summed; CPU and sessions come from the median-req/s run.
 */
function summary(all: readonly Measurement[]): Measurement {
  if (all.length === 0) throw new Error('no runs to summarise');
  const median = (pick: (m: Measurement) => number): number => {
    const sorted = all.map(pick).sort((a, b) => a - b);
    const mid = Math.floor(sorted.length / 2);
    return sorted.length % 2
      ? (sorted[mid] as number)
      : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  };
  const byRps = [...all].sort((a, b) => a.rps - b.rps)[Math.floor(all.length / 2)] as Measurement;
  const sum = (pick: (m: Measurement) => number): number => all.reduce((n, m) => n + pick(m), 0);
  const codes: Record<string, number> = {};
  for (const m of all)
    for (const [code, n] of Object.entries(m.status_codes)) codes[code] = (codes[code] ?? 0) + n;
  return {
    ...byRps,
    requests: sum((m) => m.requests),
    rps: median((m) => m.rps),
    p50_ms: median((m) => m.p50_ms),
    p90_ms: median((m) => m.p90_ms),
    p99_ms: median((m) => m.p99_ms),
    max_ms: Math.max(...all.map((m) => m.max_ms)),
    errors: sum((m) => m.errors),
    timeouts: sum((m) => m.timeouts),
    non2xx: sum((m) => m.non2xx),
    status_codes: codes,
  };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

async function listen(server: FastifyInstance): Promise<string> {
  return server.listen({ host: '127.0.0.1', port: 0 });
}

/**
 * Errors, timeouts or answers other than 2xx (or than `status`, when a run expects one) make the
 * figures meaningless: recorded, and the run fails at the end.
 */
function check(scenario: string, side: string, m: Measurement, status?: number): Measurement {
  const unexpected =
    status === undefined
      ? m.non2xx
      : Object.entries(m.status_codes).reduce(
          (n, [code, count]) => n + (code === String(status) ? 0 : count),
          0,
        );
  if (m.errors > 0 || m.timeouts > 0 || unexpected > 0 || m.requests === 0) {
    results.clean = false;
    log(
      `!! ${scenario} (${side}): ${m.errors} errors, ${m.timeouts} timeouts, ${m.non2xx} non-2xx ` +
        `(status codes ${JSON.stringify(m.status_codes)}) out of ${m.requests} requests`,
    );
  }
  return m;
}

/** The ETag the real route answers `url` with. */
async function etagOf(url: string): Promise<string> {
  const res = await fetch(url, { headers: auth });
  await res.arrayBuffer();
  const etag = res.headers.get('etag');
  if (res.status !== 200 || etag === null) throw new Error(`${url}: ${res.status} without an ETag`);
  return etag;
}

/** The floor must answer with the rows the real route answers with, or the comparison means nothing. */
async function checkSameRows(name: string, realUrl: string, floorUrl: string): Promise<void> {
  // The records of the requests before stored first, and the floor asked first: the real route's own
  // record is stored after its answer, so both see the same activity.
  await settle();
  const fl = await fetch(floorUrl);
  const real = await fetch(realUrl, { headers: auth });
  if (real.status !== 200 || fl.status !== 200) {
    throw new Error(`${name}: real ${real.status} ${await real.text()}; floor ${fl.status}`);
  }
  const r = (await real.json()) as Record<string, unknown>;
  const f = (await fl.json()) as unknown;
  let same: boolean;
  if (Array.isArray(r.data) && Array.isArray(f)) {
    const ids = (rows: unknown[]): string => rows.map((row) => (row as { id: string }).id).join(',');
    same = r.data.length > 0 && ids(r.data) === ids(f);
  } else if (typeof r.body === 'string') {
    const row = f as { id: string; body: string; revision: number };
    same = r.id === row.id && r.body === row.body && r.revision === row.revision;
  } else {
    const s = f as { articles_published: number; backlinks_industry: number; backlinks_local: number };
    const b = r.backlinks as { industry: number; local: number };
    const a = r.articles as { published: number };
    same =
      b.industry === s.backlinks_industry &&
      b.local === s.backlinks_local &&
      a.published === s.articles_published;
  }
  if (!same) throw new Error(`${name}: the floor and the real route answer with different rows`);
}

/**
 * Between runs: the activity records of the previous run are stored (their rows with them: the
 * activity projection is inline) and the async projectors are idle before the next run starts, so
 * that no run pays for the one before.
 */
async function settle(): Promise<void> {
  await sleep(300);
  await runtime.commands.flushCalls();
  await workers?.idle();
  await sleep(200);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function machine(): Promise<BenchResults['machine']> {
  const version = await sql<{ v: string }>`select version() as v`.execute(runtime.db);
  let nproc = os.availableParallelism();
  try {
    nproc = Number(execFileSync('nproc', { encoding: 'utf8' }).trim()) || nproc;
  } catch {
    // nproc is not everywhere; availableParallelism says the same
  }
  return {
    cpus: nproc,
    cpu_model: os.cpus()[0]?.model.trim() ?? 'unknown',
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
    node: process.versions.node,
    postgres: (version.rows[0]?.v ?? '').split(' on ')[0] ?? '',
    os: `${os.type()} ${os.release()}`,
  };
}

async function writeResults(r: BenchResults): Promise<void> {
  await mkdir(RESULTS, { recursive: true });
  const stamp = r.finished_at.replace(/[:.]/g, '-');
  const json = `${JSON.stringify(r, null, 2)}\n`;
  await writeFile(resolve(RESULTS, `${stamp}.json`), json);
  // Written aside and renamed: an interrupted run never leaves a half-written latest.
  await writeFile(resolve(RESULTS, 'latest.json.tmp'), json);
  await rename(resolve(RESULTS, 'latest.json.tmp'), resolve(RESULTS, 'latest.json'));
  await writeFile(resolve(RESULTS, 'latest.md.tmp'), markdown(r));
  await rename(resolve(RESULTS, 'latest.md.tmp'), resolve(RESULTS, 'latest.md'));
  log(`results: bench/results/${stamp}.json, bench/results/latest.json, bench/results/latest.md`);
}
