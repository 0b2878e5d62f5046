import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { buildApp } from '../apps/server/app.ts';
import { createRequestLimiter } from '../apps/server/http/limits.ts';
import { SEARCH_RANKED_MAX } from '../domain/article/search.ts';
import { loadConfig } from '../infra/config.ts';
import { mergeSearchPending } from '../infra/jobs/housekeeping.ts';
import { createLogDestination } from '../infra/log-destination.ts';
import { withoutPassword } from '../infra/url-password.ts';
import { type DatasetSpec, DEFAULT_SPEC, prepareDataset } from './dataset.ts';
import { busyElsewhere, type LoadSettings, type Measurement, measure } from './load.ts';
import { machineOf, median } from './report.ts';

/*
 * `node bench/search.ts` (part of `npm run bench`): a two-word full-text search over one account of
 * the benchmark dataset (bench/dataset.ts, 100,000 articles on one site), `GET /api/v1/articles?q=`,
 * measured with autocannon as bench/run.ts measures the read routes (docs/performance.md, "Search").
 * Three searches: a selective one (a title's number and a word of every title: one article matches),
 * a broad one (two words of the shared sentences: nearly every article matches) and a middling one
 * (words of one title in eight and one body in four). Target: 500 req/s with p99 under 50 ms on 2
 * cores.
 *
 *   --connections N (10)  --duration S (10)  --warmup S (2)  --rounds N (3)
 *   --articles N --big-backlinks N --small-backlinks N   a smaller dataset (for trying it out)
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/cs_bench).
 */

const TARGET_RPS = 500;
const TARGET_P99_MS = 50;

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '10' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
    articles: { type: 'string' },
    'big-backlinks': { type: 'string' },
    'small-backlinks': { type: 'string' },
  },
  strict: true,
});
const whole = (name: string, value: string | undefined, fallback: number): number => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number`);
  return n;
};
const settings: LoadSettings = {
  connections: whole('connections', args.connections, 10),
  durationSeconds: whole('duration', args.duration, 10),
  warmupSeconds: whole('warmup', args.warmup, 2),
};
const rounds = Math.max(1, whole('rounds', args.rounds, 3));
const spec: DatasetSpec = {
  ...DEFAULT_SPEC,
  articles: whole('articles', args.articles, DEFAULT_SPEC.articles),
  bigBacklinks: whole('big-backlinks', args['big-backlinks'], DEFAULT_SPEC.bigBacklinks),
  smallBacklinks: whole('small-backlinks', args['small-backlinks'], DEFAULT_SPEC.smallBacklinks),
};

const started = Date.now();
const log = (line: string): void => {
  process.stderr.write(
    `[bench:search ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`,
  );
};

const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/cs_bench';
const config = loadConfig({
  ...process.env,
  DATABASE_URL: databaseUrl,
  RATE_LIMIT_PER_MINUTE: process.env.RATE_LIMIT_PER_MINUTE || '1000000000',
  PORT: '0',
});
log(`database ${withoutPassword(databaseUrl)}`);
const { runtime, dataset } = await prepareDataset(databaseUrl, spec, log, {
  sanitizeThreads: config.SANITIZE_THREADS,
});
// The search indexes' pending lists merged, as the service's job (`housekeeping.search-index`) keeps
// them within seconds of an edit: the write benchmark leaves thousands of entries there.
const merged = await mergeSearchPending({ db: runtime.db });
log(`search indexes' pending pages merged: ${merged.titles} of titles, ${merged.bodies} of bodies`);
const quiet = pino({ level: 'silent' });
const limiter = createRequestLimiter({
  perMinute: config.RATE_LIMIT_PER_MINUTE,
  keyPrefix: config.RATE_LIMIT_KEY_PREFIX,
  logger: quiet,
});
const app = await buildApp({
  runtime,
  config,
  limit: limiter.hook,
  logger: { level: config.LOG_LEVEL, stream: createLogDestination('/dev/null').stream },
});
const key = await runtime.commands.createApiKey(dataset.accountId, { name: 'Search bench', scope: 'read' });
const headers = { authorization: `Bearer ${key.key}` };

type Scenario = { name: string; q: string; matches: number; runs: Measurement[] };

/** A search's `meta.total`, said as what it is: it stops at SEARCH_RANKED_MAX, the most a search ranks. */
const matchesText = (total: number): string =>
  total >= SEARCH_RANKED_MAX ? `at least ${total}` : String(total);
const scenarios: Scenario[] = [
  // "(part 4218)" is in one title; "part" is in nearly all of them.
  { name: 'selective two-word search', q: `part ${Math.min(4218, spec.articles - 1)}`, matches: 0, runs: [] },
  // Words of sentences every body draws from.
  { name: 'broad two-word search', q: 'written quote', matches: 0, runs: [] },
  // Words one title in eight holds ("Seasonal checklist for"), and one body in four ("the busiest
  // season", the heading "A checklist"): too many to rank them all, too few to meet a thousand soon
  // reading newest first.
  { name: 'middling two-word search', q: 'season checklist', matches: 0, runs: [] },
];

try {
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  for (const s of scenarios) {
    const res = await fetch(`${base}/api/v1/articles?q=${encodeURIComponent(s.q)}&per_page=1`, { headers });
    const body = (await res.json()) as { meta?: { total: number } };
    if (res.status !== 200 || body.meta === undefined) throw new Error(`${s.q}: ${res.status}`);
    s.matches = body.meta.total;
    log(`${s.name} (q=${JSON.stringify(s.q)}): ${matchesText(s.matches)} of ${spec.articles} articles match`);
  }
  const elsewhere = await busyElsewhere(2_000);
  if (elsewhere > 0.3) log(`the machine is busy with other work (${elsewhere} cores): figures will be low`);
  for (let r = 1; r <= rounds; r++) {
    for (const s of scenarios) {
      await runtime.commands.flushCalls();
      const m = await measure(`${base}/api/v1/articles?q=${encodeURIComponent(s.q)}`, settings, {
        headers,
        databaseUrl,
      });
      if (m.errors > 0 || m.timeouts > 0 || m.non2xx > 0)
        log(`!! ${s.name}: ${JSON.stringify(m.status_codes)}`);
      s.runs.push(m);
      log(
        `${s.name} (round ${r}/${rounds}): ${m.rps.toFixed(0)} req/s, p50 ${m.p50_ms} ms, p99 ${m.p99_ms} ms`,
      );
    }
  }
  const results = {
    finished_at: new Date().toISOString(),
    machine: { ...machineOf(), busy_elsewhere_cores_at_start: elsewhere },
    settings: { ...settings, rounds },
    dataset: { articles: spec.articles },
    target: { rps: TARGET_RPS, p99_ms: TARGET_P99_MS },
    scenarios: scenarios.map((s) => {
      const rps = median(s.runs.map((m) => m.rps));
      const p99 = median(s.runs.map((m) => m.p99_ms));
      return {
        name: s.name,
        q: s.q,
        matches: s.matches,
        // meta.total stops at the most a search ranks: as many or more articles match.
        matches_at_least: s.matches >= SEARCH_RANKED_MAX,
        rps: Math.round(rps),
        p50_ms: median(s.runs.map((m) => m.p50_ms)),
        p99_ms: p99,
        target_met: rps >= TARGET_RPS && p99 < TARGET_P99_MS,
        runs: s.runs,
      };
    }),
  };
  const dir = resolve(import.meta.dirname, 'results');
  await mkdir(dir, { recursive: true });
  await writeFile(resolve(dir, 'search-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  for (const s of results.scenarios) {
    log(
      `${s.name}: ${s.rps} req/s, p50 ${s.p50_ms} ms, p99 ${s.p99_ms} ms (${matchesText(s.matches)} matches; target ` +
        `${TARGET_RPS} req/s, p99 < ${TARGET_P99_MS} ms: ${s.target_met ? 'met' : 'not met'})`,
    );
  }
  log('results: bench/results/search-latest.json');
} finally {
  await app.close();
  await runtime.close();
}
