import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { openRuntime } from '../apps/runtime.ts';
import { loadConfig } from '../infra/config.ts';
import { withoutPassword } from '../infra/url-password.ts';
import { quietApp, runRounds, type Scenario, writeLatest } from './app.ts';
import { recreateDatabase } from './dataset.ts';
import { busyElsewhere, type LoadSettings } from './load.ts';
import { machineOf } from './report.ts';

/*
 * `node bench/time-travel.ts` (`npm run bench:time-travel`, and in `npm run bench`): an article with
 * 1,000 revisions read as it stood at instants spread over its history, `GET /api/v1/articles/{id}?as_of=`
 * (docs/performance.md, "Time travel"). Each revision is an edit of its title and body, an hour after
 * the one before, made through the commands as an assistant's edits are. Three runs a round: at a fixed
 * 100 requests a second on one connection, evenly spaced (the latency the target is about), as fast as
 * the server answers on 10, and the article as it is now at 100 requests a second (what any read gets
 * at that rate, for comparison).
 * Target: p99 under 20 ms.
 *
 *   --revisions N (1000)  --connections N (10)  --duration S (10)  --warmup S (2)  --rounds N (3)
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/cs_bench_time), a database of
 * its own, made afresh each run.
 */

const TARGET_P99_MS = 20;
const FIXED_RATE = 100;
/** How many different instants the load asks for, in turn. */
const INSTANTS = 500;
const HOUR = 3_600_000;
const FIRST = Date.parse('2026-01-01T00:00:00Z');

const { values: args } = parseArgs({
  options: {
    revisions: { type: 'string', default: '1000' },
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
const revisions = whole('revisions', args.revisions, 1000);
const settings: LoadSettings = {
  connections: whole('connections', args.connections, 10),
  durationSeconds: whole('duration', args.duration, 10),
  warmupSeconds: whole('warmup', args.warmup, 2),
};
const rounds = whole('rounds', args.rounds, 3);

const started = Date.now();
const log = (line: string): void => {
  process.stderr.write(
    `[bench:time-travel ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`,
  );
};

const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/cs_bench_time';
const config = loadConfig({
  ...process.env,
  DATABASE_URL: databaseUrl,
  RATE_LIMIT_PER_MINUTE: process.env.RATE_LIMIT_PER_MINUTE || '1000000000',
  PORT: '0',
});
log(`database ${withoutPassword(databaseUrl)}, made afresh`);
await recreateDatabase(databaseUrl);
// The commands' clock: revision n is made at FIRST + (n - 1) hours.
let clock = new Date(FIRST);
const runtime = await openRuntime(
  { DATABASE_URL: databaseUrl, DATA_DIR: './data' },
  { migrate: true, sanitizeThreads: config.SANITIZE_THREADS, now: () => clock },
);
// The sanitise pool's threads, as a server starts them once it listens.
runtime.startThreads();

/** A body of some 3.7 KB (the read benchmark's articles' size) that says which revision it is. */
const bodyOf = (n: number): string =>
  `<p>Revision ${n} of the winter checklist.</p>` +
  `<p>${'Bleed each radiator, check the pressure gauge and look at the flue before the first frost. '.repeat(38)}</p>`;

const { accountId } = await runtime.commands.openAccount({
  name: 'Time travel',
  email: 'time.travel@example.com',
});
const { siteId } = await runtime.commands.addSite(accountId, {
  name: 'Northside Plumbing',
  domain: 'northside.example',
  url: 'https://northside.example',
});
const { articleId } = await runtime.commands.createArticle(
  accountId,
  {
    siteId,
    title: 'Winter checks, revision 1',
    body: bodyOf(1),
    url: 'https://northside.example/blog/winter-checks',
    status: 'published',
    publishedAt: new Date(FIRST).toISOString(),
    targetKeyword: 'winter checks',
    featuredImage: null,
  },
  { origin: 'rewrite', actor: { type: 'system', id: 'bench', name: 'Benchmark data' } },
);
const caller = {
  origin: 'api' as const,
  actor: { type: 'api_key' as const, id: 'key_bench', name: 'Bench' },
};
for (let n = 2; n <= revisions; n++) {
  clock = new Date(FIRST + (n - 1) * HOUR);
  await runtime.commands.editArticle(
    accountId,
    articleId,
    { title: `Winter checks, revision ${n}`, body: bodyOf(n) },
    caller,
  );
  if (n % 250 === 0) log(`revisions: ${n}/${revisions}`);
}
clock = new Date();
await sql`analyze`.execute(runtime.db);

const { app, close } = await quietApp(runtime, config);
const key = await runtime.commands.createApiKey(accountId, { name: 'Time travel bench', scope: 'read' });
const headers = { authorization: `Bearer ${key.key}` };

/** Instants over the whole history, the same each run (a fixed-seed LCG), each to the second. */
const span = revisions * HOUR;
let seed = 42;
const instants = Array.from({ length: INSTANTS }, () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  const at = new Date(FIRST + Math.floor((seed / 2 ** 31) * span));
  return `${at.toISOString().slice(0, 19)}Z`;
});
const paths = instants.map((at) => `/api/v1/articles/${articleId}?as_of=${at}`);

const scenarios: Scenario[] = [
  { name: `as_of at ${FIXED_RATE} req/s`, rate: FIXED_RATE, paths, target: true, runs: [] },
  { name: 'as_of as fast as answered', paths, target: false, runs: [] },
  // The same article as it is now, for what the machine gives any read at that rate.
  {
    name: `now (no as_of) at ${FIXED_RATE} req/s`,
    rate: FIXED_RATE,
    paths: [`/api/v1/articles/${articleId}`],
    target: false,
    runs: [],
  },
];

try {
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  // Each instant answers the revision current then: checked on a few before the load.
  for (const at of instants.slice(0, 20)) {
    const res = await fetch(`${base}/api/v1/articles/${articleId}?as_of=${at}`, { headers });
    const body = (await res.json()) as { revision?: number; title?: string };
    const expected = Math.floor((Date.parse(at) - FIRST) / HOUR) + 1;
    if (
      res.status !== 200 ||
      body.revision !== expected ||
      body.title !== `Winter checks, revision ${expected}`
    ) {
      throw new Error(`as_of ${at}: ${res.status}, revision ${body.revision}, expected ${expected}`);
    }
  }
  log(`an article with ${revisions} revisions; ${INSTANTS} instants over its history, checked`);
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
  const file = await writeLatest('time-travel', {
    machine: { ...machineOf(), busy_elsewhere_cores_at_start: elsewhere },
    settings: { ...settings, rounds, fixed_rate: FIXED_RATE },
    article: { revisions, body_bytes: Buffer.byteLength(bodyOf(revisions)), instants: INSTANTS },
    target: { p99_ms: TARGET_P99_MS },
    scenarios: summary,
  });
  log(`results: ${file}`);
} finally {
  await close();
  await runtime.close();
}
