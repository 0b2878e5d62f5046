import { parseArgs } from 'node:util';
import { loadConfig } from '../infra/config.ts';
import { catchUp } from '../infra/projection-runner.ts';
import { withoutPassword } from '../infra/url-password.ts';
import { asyncProjectors } from '../projections/index.ts';
import { quietApp, runRounds, type Scenario, writeLatest } from './app.ts';
import { DEFAULT_SPEC, prepareDataset } from './dataset.ts';
import { busyElsewhere, type LoadSettings } from './load.ts';
import { machineOf } from './report.ts';

/*
 * `node bench/stats-as-of.ts` (`npm run bench:stats-as-of`, and in `npm run bench`): the statistics of
 * the site with 1,000,000 backlinks (the read benchmark's dataset, two years of them) as they stood at
 * instants, `GET /api/v1/sites/{id}/stats?period=&as_of=` (docs/performance.md, "Time travel"): every
 * month of the two years and last_30_days, each at an instant before the backlinks were recorded and
 * one after, in turn. Two runs a round: at a fixed 100 requests a second on one connection (the latency
 * the target is about) and as fast as answered on 10; and the current statistics at 100 requests a
 * second for comparison. Target: p99 under 100 ms.
 *
 *   --connections N (10)  --duration S (10)  --warmup S (2)  --rounds N (3)
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/cs_bench, the read benchmark's,
 * generated when missing).
 */

const TARGET_P99_MS = 100;
const FIXED_RATE = 100;

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '10' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
  },
  strict: true,
});
const whole = (name: string, value: string | undefined, fallback: number): number => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a whole number of at least 1`);
  return n;
};
const settings: LoadSettings = {
  connections: whole('connections', args.connections, 10),
  durationSeconds: whole('duration', args.duration, 10),
  warmupSeconds: whole('warmup', args.warmup, 2),
};
const rounds = whole('rounds', args.rounds, 3);

const started = Date.now();
const log = (line: string): void => {
  process.stderr.write(
    `[bench:stats-as-of ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`,
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
const { runtime, dataset } = await prepareDataset(databaseUrl, DEFAULT_SPEC, log, {
  sanitizeThreads: config.SANITIZE_THREADS,
});
// The read models that keep the past follow the log: those of a dataset older than them fill here.
for (const projector of asyncProjectors) {
  const applied = await catchUp(runtime.db, projector);
  if (applied > 0) log(`${projector.name}: caught up`);
}
const { app, close } = await quietApp(runtime, config);
const siteId = dataset.bigBacklinkSiteId;
const key = await runtime.commands.createApiKey(dataset.accountId, {
  name: 'Stats as_of bench',
  scope: 'read',
});
const headers = { authorization: `Bearer ${key.key}` };

/** The months of the two years before the dataset was generated, and last_30_days. */
const generated = new Date(dataset.generatedOn);
const periods = ['last_30_days'];
for (let m = 0; m < 24; m++) {
  const d = new Date(Date.UTC(generated.getUTCFullYear(), generated.getUTCMonth() - m, 1));
  periods.push(d.toISOString().slice(0, 7));
}
/** A second before the dataset was recorded (nothing counts) and now (everything does). */
const before = `${new Date(generated.getTime() - 86_400_000).toISOString().slice(0, 19)}Z`;
const after = `${new Date().toISOString().slice(0, 19)}Z`;
const paths = periods.flatMap((p) =>
  [before, after].map((at) => `/api/v1/sites/${siteId}/stats?period=${p}&as_of=${at}`),
);

const scenarios: Scenario[] = [
  { name: `as_of at ${FIXED_RATE} req/s`, rate: FIXED_RATE, paths, target: true, runs: [] },
  { name: 'as_of as fast as answered', paths, target: false, runs: [] },
  {
    name: `now (no as_of) at ${FIXED_RATE} req/s`,
    rate: FIXED_RATE,
    paths: periods.map((p) => `/api/v1/sites/${siteId}/stats?period=${p}`),
    target: false,
    runs: [],
  },
];

try {
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  // As of now, each period's statistics are the current ones; as of before, nothing.
  let backlinks = 0;
  for (const p of periods.slice(1)) {
    const get = async (path: string) =>
      (await (await fetch(`${base}${path}`, { headers })).json()) as {
        backlinks: { total: number };
        as_of?: string;
      };
    const now = await get(`/api/v1/sites/${siteId}/stats?period=${p}`);
    const then = await get(`/api/v1/sites/${siteId}/stats?period=${p}&as_of=${after}`);
    const earlier = await get(`/api/v1/sites/${siteId}/stats?period=${p}&as_of=${before}`);
    if (then.backlinks.total !== now.backlinks.total || earlier.backlinks.total !== 0) {
      throw new Error(
        `${p}: now ${now.backlinks.total}, as of now ${then.backlinks.total}, before ${earlier.backlinks.total}`,
      );
    }
    backlinks += now.backlinks.total;
  }
  log(
    `site with ${backlinks} backlinks over ${periods.length - 1} months, each month checked as of now and before`,
  );
  const elsewhere = await busyElsewhere(2_000);
  if (elsewhere > 0.3) log(`the machine is busy with other work (${elsewhere} cores): figures will be low`);
  const summary = await runRounds(base, scenarios, {
    settings,
    rounds,
    headers,
    databaseUrl,
    targetP99Ms: TARGET_P99_MS,
    beforeRun: () => runtime.commands.flushCalls(),
    log,
  });
  const file = await writeLatest('stats-as-of', {
    machine: { ...machineOf(), busy_elsewhere_cores_at_start: elsewhere },
    settings: { ...settings, rounds, fixed_rate: FIXED_RATE },
    site: { backlinks, periods: periods.length },
    target: { p99_ms: TARGET_P99_MS },
    scenarios: summary,
  });
  log(`results: ${file}`);
} finally {
  await close();
  await runtime.close();
}
