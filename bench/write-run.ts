import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import pino from 'pino';
import { buildApp } from '../apps/server/app.ts';
import { createRequestLimiter } from '../apps/server/http/limits.ts';
import { loadConfig } from '../infra/config.ts';
import { createEditLimiter } from '../infra/limits.ts';
import { withoutPassword } from '../infra/url-password.ts';
import { findArticle } from '../projections/articles.ts';
import { DEFAULT_SPEC, prepareDataset } from './dataset.ts';
import { buildEditFloor } from './floor.ts';
import { busyElsewhere } from './load.ts';
import { summarise as summariseProfile } from './profile.ts';
import { measureEdits, measureSanitiseAndCheck, type WriteLoad } from './write.ts';

/*
 * `npm run bench`, second part: the write benchmarks (write.ts), on the benchmark database of the first part.
 * A fresh copy of the 20 KB article with 10 protected blocks is edited at a fixed 100 edits/s through
 * the real server (auth, limits, idempotency path, sanitiser, protected-block check, append, inline
 * projections, activity); the edit limit is raised by configuration, as the request limit is.
 *
 * Then the saturation: 10 connections for 10 s sending title-only edits as fast as the server answers
 * (closed loop), over ten fresh articles and over one (aim: 2,800 edits/s over ten articles); and
 * the same two against the edit's floor (bench/floor.ts: the edit command and its answer without the
 * API around it), on articles of their own.
 *
 * To explore (the target is measured with the defaults): WRITE_RATE edits a second (100),
 * WRITE_WARMUP seconds of warm-up (2) and SATURATION_CONNECTIONS (10). `--profile` adds one more
 * saturation run over ten articles under the V8 profiler (the server's thread; not counted in the
 * figures), summarised in the report, its .cpuprofile left in bench/results/.
 */
const args = parseArgs({ options: { profile: { type: 'boolean', default: false } } }).values;

const log = (line: string): void => {
  process.stderr.write(`[bench writes] ${line}\n`);
};
const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/cs_bench';
const config = loadConfig({
  ...process.env,
  DATABASE_URL: databaseUrl,
  RATE_LIMIT_PER_MINUTE: process.env.RATE_LIMIT_PER_MINUTE || '1000000000',
  EDIT_LIMIT_PER_DAY: process.env.EDIT_LIMIT_PER_DAY || '1000000000',
  PORT: '0',
});
log(`database ${withoutPassword(databaseUrl)}`);
const { runtime, dataset } = await prepareDataset(databaseUrl, DEFAULT_SPEC, log, {
  sanitizeThreads: config.SANITIZE_THREADS,
});
const long = await findArticle(runtime.db, dataset.accountId, dataset.longArticleId);
if (!long) throw new Error('the benchmark database has no long article');

// Earlier write runs leave dead rows behind (every edit rewrites a TOASTed body and snapshot):
// measured on the tables as autovacuum leaves them, not on whatever the last run left.
// The append-only tables (events, activity) have no dead rows to clear: only analysed. After the read
// benchmark they hold some 450,000 new rows, and a vacuum would dirty every page of them (visibility
// map, hint bits) for the disk to write out while the edits are measured.
log('vacuum analyze of the tables an edit rewrites, analyze of the append-only ones');
const setup = performance.now();
await sql`vacuum analyze streams, articles, article_bodies, article_title_search, article_snapshots, revisions`.execute(
  runtime.db,
);
await sql`analyze events, activity`.execute(runtime.db);
log(`  ${Math.round(performance.now() - setup)} ms`);
log(`sanitiser + protected-block check on ${long.body.length} bytes`);
const domain = measureSanitiseAndCheck(long.body, 'edit');
const domainFull = measureSanitiseAndCheck(long.body, 'full');

// Ten fresh copies of the long article, edited in turn: 100 edits/s over an account's articles
// (edits of one article run one after the other: see docs/performance.md).
const COPIES = 10;
const copy = async (label: string): Promise<string> => {
  const { articleId } = await runtime.commands.createArticle(
    dataset.accountId,
    {
      siteId: long.site_id,
      title: `Write benchmark ${label}`,
      body: long.body,
      url: `${long.url}-write-benchmark-${Date.now()}-${label.replaceAll(' ', '-')}`,
      status: 'draft',
      publishedAt: null,
      targetKeyword: null,
      featuredImage: null,
    },
    { origin: 'rewrite', actor: { type: 'system', id: 'bench', name: 'Benchmark' } },
  );
  return articleId;
};
const articleIds: string[] = [];
for (let i = 0; i < COPIES; i++) articleIds.push(await copy(String(i)));
// The saturation's articles: ten more fresh copies, and one.
const saturationIds: string[] = [];
for (let i = 0; i < COPIES; i++) saturationIds.push(await copy(`saturation ${i}`));
const soleId = await copy('saturation one');
// Composed as apps/server/serve.ts composes the server (in-process limits), with the quotas raised by configuration.
const quiet = pino({ level: 'silent' });
const limiter = createRequestLimiter({ perMinute: config.RATE_LIMIT_PER_MINUTE, logger: quiet });
const editLimit = createEditLimiter({ perDay: config.EDIT_LIMIT_PER_DAY, logger: quiet });
const app = await buildApp({
  runtime,
  config,
  limit: limiter.hook,
  editLimit: editLimit.limit,
  logger: { level: 'silent' },
});
const portOf = async (server: typeof app): Promise<number> => {
  await server.listen({ host: '127.0.0.1', port: 0 });
  const address = server.server.address();
  return typeof address === 'object' && address ? address.port : 0;
};
const port = await portOf(app);
const key = await runtime.commands.createApiKey(dataset.accountId, {
  name: 'Write benchmark',
  scope: 'write',
});
const urlOf = (id: string): string => `http://127.0.0.1:${port}/api/v1/articles/${id}`;
const warmupSeconds = Number(process.env.WRITE_WARMUP ?? 2);
const database = new URL(databaseUrl).pathname.slice(1);
// How busy the machine is apart from this process (other tests, other databases): the
// figures below are only as good as the machine was quiet.
const busyAtStart = await busyElsewhere(2000);
const loadAtStart = Math.round((os.loadavg()[0] ?? 0) * 100) / 100;
log(`the rest of the machine: ${busyAtStart} cores busy (load average ${loadAtStart})`);
log('PUT at 100 edits/s for 10 s (after 2 s of warm-up)');
const edits = await measureEdits({
  urls: articleIds.map(urlOf),
  key: key.key,
  body: long.body,
  rate: Number(process.env.WRITE_RATE ?? 100),
  seconds: 10,
  warmupSeconds,
  database,
  databaseUrl,
});
const connections = Number(process.env.SATURATION_CONNECTIONS ?? 10);
const saturate = (ids: string[], profile = false, url = urlOf): ReturnType<typeof measureEdits> =>
  measureEdits({
    urls: ids.map(url),
    key: key.key,
    body: long.body,
    connections,
    titleOnly: true,
    profile,
    seconds: 10,
    warmupSeconds,
    database,
    databaseUrl,
  });
log(`saturation: ${connections} connections for 10 s, title edits over ${COPIES} articles`);
const { profile: _none, ...overTen } = await saturate(saturationIds);
log(`  ${overTen.edits_per_second} edits/s, p99 ${overTen.p99_ms} ms`);
log(`saturation: ${connections} connections for 10 s, title edits of one article`);
const { profile: _none1, ...overOne } = await saturate([soleId]);
log(`  ${overOne.edits_per_second} edits/s, p99 ${overOne.p99_ms} ms`);
// The edit's floor (the command without the API around it: bench/floor.ts) on articles of its own,
// copied and listened for only now: the real route's runs above start from the same database state
// as those of code without a floor, which a before-and-after comparison runs beside this.
const floorIds: string[] = [];
for (let i = 0; i < COPIES; i++) floorIds.push(await copy(`floor ${i}`));
const floorSoleId = await copy('floor one');
const floor = await buildEditFloor(runtime, { accountId: dataset.accountId });
const floorPort = await portOf(floor);
const floorUrlOf = (id: string): string => `http://127.0.0.1:${floorPort}/floor/articles/${id}`;
log(`the edit's floor, saturated: ${connections} connections for 10 s over ${COPIES} articles, then one`);
const { profile: _none2, ...floorOverTen } = await saturate(floorIds, false, floorUrlOf);
const { profile: _none3, ...floorOverOne } = await saturate([floorSoleId], false, floorUrlOf);
log(`  ${floorOverTen.edits_per_second} and ${floorOverOne.edits_per_second} edits/s`);
const ROOT = resolve(import.meta.dirname, '..');
const dir = resolve(import.meta.dirname, 'results');
await mkdir(dir, { recursive: true });
let profiled: { run: WriteLoad; summary: ReturnType<typeof summariseProfile>; file: string } | undefined;
if (args.profile) {
  log(`saturation over ${COPIES} articles once more, under the profiler (not counted)`);
  const { profile, ...run } = await saturate(saturationIds, true);
  if (profile) {
    const file = resolve(
      dir,
      `profile-write-saturation-${new Date().toISOString().replace(/[:.]/g, '-')}.cpuprofile`,
    );
    await writeFile(file, JSON.stringify(profile));
    profiled = { run, summary: summariseProfile(profile, ROOT), file };
  }
}
await app.close();
await floor.close();
await runtime.close();

/** The saturation's aim over ten articles, edits a second on this 2-core machine. */
const AIM = 2800;
const saturationRow = (label: string, r: WriteLoad, aim: string, met: string): string =>
  `| ${label} | ${r.runs} | **${r.edits_per_second}** | ${r.p50_ms} | ${r.p99_ms} | ${r.max_ms} | ${aim} | ${met} |`;
const cpuRow = (label: string, r: WriteLoad): string => {
  const c = r.cpu_ms_per_edit;
  const cores = (ms: number): string => ((ms * r.edits_per_second) / 1000).toFixed(2);
  return `| ${label} | ${Math.round(r.server_thread_busy * 100)}% | ${c.server_thread} (${cores(c.server_thread)}) | ${c.process} (${cores(c.process)}) | ${c.postgres} (${cores(c.postgres)}) | ${c.other} (${cores(c.other)}) | ${c.machine} (${cores(c.machine)}) | ${c.steal} | ${r.wal_per_edit.records} / ${r.wal_per_edit.bytes} / ${r.wal_per_edit.full_page_images} |`;
};
const sessions = (r: WriteLoad): string =>
  Object.entries(r.db_sessions)
    .slice(0, 5)
    .map(([what, n]) => `${what}: ${n}`)
    .join('; ');
/** A run's table by second (the header and a row per second). */
const seconds = (r: WriteLoad): string =>
  [
    '| second | edits | p50 ms | max ms | server thread: longest lateness ms | database sessions not idle | checkpointer |',
    '|---:|---:|---:|---:|---:|---|---|',
    ...r.per_second.map(
      (s) =>
        `| ${s.second + 1} | ${s.runs} | ${s.p50_ms} | ${s.max_ms} | ${s.thread_late_ms ?? ''} | ${s.db_busy} | ${s.checkpointer} |`,
    ),
  ].join('\n');
const withoutEdits = ({ edits: _edits, ...rest }: WriteLoad): Omit<WriteLoad, 'edits'> => rest;
const results = {
  at: new Date().toISOString(),
  machine: {
    cores: os.cpus().length,
    model: os.cpus()[0]?.model ?? '',
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
  },
  body_bytes: long.body.length,
  protected_blocks: (long.body.match(/data-service-protected=/g) ?? []).length,
  sanitise_and_check: { ...domain, target_ms: 2, met: domain.p50_ms <= 2 },
  sanitise_and_check_in_full: { ...domainFull, target_ms: 2, met: domainFull.p50_ms <= 2 },
  load_at_start: {
    busy_elsewhere_cores: busyAtStart,
    load_average_1m: loadAtStart,
  },
  put_at_100_per_second: { ...edits, target_p99_ms: 30, met: edits.p99_ms <= 30 },
  // Without every edit's start and duration (some 10,000 a run: the committed file would be a megabyte).
  saturation: {
    over_10_articles: {
      ...withoutEdits(overTen),
      aim_edits_per_second: AIM,
      met: overTen.edits_per_second >= AIM,
    },
    over_1_article: withoutEdits(overOne),
    floor_over_10_articles: withoutEdits(floorOverTen),
    floor_over_1_article: withoutEdits(floorOverOne),
    ...(profiled
      ? {
          profile_over_10_articles: {
            edits_per_second: profiled.run.edits_per_second,
            p99_ms: profiled.run.p99_ms,
            ...profiled.summary,
          },
        }
      : {}),
  },
};
const table = `# Write benchmark (${results.at.slice(0, 16).replace('T', ' ')} UTC)

${results.machine.cores} cores (${results.machine.model}), ${results.machine.memory_gib} GiB. Body ${results.body_bytes} bytes with ${results.protected_blocks} protected blocks.

| measurement | runs | mean ms | p50 ms | p99 ms | max ms | target | met |
|---|---:|---:|---:|---:|---:|---|---|
| sanitise + protected-block check (an edit of the stored body) | ${domain.runs} | ${domain.mean_ms} | ${domain.p50_ms} | ${domain.p99_ms} | ${domain.max_ms} | ≤ 2 ms | ${results.sanitise_and_check.met ? 'yes' : 'no'} |
| the same, parsed in full (a body not seen before) | ${domainFull.runs} | ${domainFull.mean_ms} | ${domainFull.p50_ms} | ${domainFull.p99_ms} | ${domainFull.max_ms} | ≤ 2 ms | ${results.sanitise_and_check_in_full.met ? 'yes' : 'no'} |
| PUT at ${edits.rate}/s for ${edits.seconds} s, over ${COPIES} articles | ${edits.runs} | ${edits.mean_ms} | ${edits.p50_ms} | ${edits.p99_ms} | ${edits.max_ms} | p99 ≤ 30 ms | ${results.put_at_100_per_second.met ? 'yes' : 'no'} |

Statuses: ${JSON.stringify(edits.statuses)}; revisions created: ${edits.revisions_created}.

CPU per edit during the PUT run: server thread ${edits.cpu_ms_per_edit.server_thread} ms, this process (server, sanitise workers and load generator) ${edits.cpu_ms_per_edit.process} ms, PostgreSQL backends ${edits.cpu_ms_per_edit.postgres} ms, whole machine ${edits.cpu_ms_per_edit.machine} ms (of which taken by the hypervisor, steal: ${edits.cpu_ms_per_edit.steal} ms).

WAL per edit (the whole cluster): ${edits.wal_per_edit.records} records, ${edits.wal_per_edit.full_page_images} full-page images, ${edits.wal_per_edit.bytes} bytes.

Edits by the second they started in (a tail shows as a second whose slowest edit is far above its median), the longest the server's thread kept a 10 ms timer waiting beyond its time that second (a stall of the thread), and what the database did in that second (sampled every 20 ms: the sessions that were not idle, on average, by state and wait event; and the checkpointer's state in most samples):

${seconds(edits)}
`;
const saturationTable = `
## Saturation: ${connections} connections for ${overTen.seconds} s, as fast as the server answers, title-only edits

Each edit a new title, so each answered 200 is a new revision. The rest of the machine was using ${results.load_at_start.busy_elsewhere_cores} cores just before the runs (load average ${results.load_at_start.load_average_1m}).

| run | edits | edits/s | p50 ms | p99 ms | max ms | aim | met |
|---|---:|---:|---:|---:|---:|---|---|
${saturationRow(`over ${COPIES} articles`, overTen, `≥ ${AIM.toLocaleString('en')} edits/s`, results.saturation.over_10_articles.met ? 'yes' : 'no')}
${saturationRow('over one article', overOne, '', '')}
${saturationRow(`the edit's floor, over ${COPIES} articles`, floorOverTen, '', '')}
${saturationRow("the edit's floor, over one article", floorOverOne, '', '')}

The edit's floor (bench/floor.ts): the edit command and its answer behind a bare fastify route, without the key, limits, validation, activity record or access log. Real ÷ floor: ${(overTen.edits_per_second / floorOverTen.edits_per_second).toFixed(2)} over ${COPIES} articles, ${(overOne.edits_per_second / floorOverOne.edits_per_second).toFixed(2)} over one.

Statuses over ${COPIES} articles: ${JSON.stringify(overTen.statuses)}, revisions created: ${overTen.revisions_created}; over one article: ${JSON.stringify(overOne.statuses)}, revisions created: ${overOne.revisions_created}.

CPU per edit in ms (in brackets: cores, i.e. CPU per edit × edits/s), and WAL per edit (the whole cluster):

| run | server thread busy | server thread | this process (server, sanitise workers, load generator) | PostgreSQL backends | the rest (WAL writer, checkpointer, kernel, other processes) | whole machine | steal | WAL records / bytes / full-page images |
|---|---:|---:|---:|---:|---:|---:|---:|---|
${cpuRow(`over ${COPIES} articles`, overTen)}
${cpuRow('over one article', overOne)}
${cpuRow(`the edit's floor, over ${COPIES} articles`, floorOverTen)}
${cpuRow('PUT at 100/s (title and 20 KB body)', edits)}

The database's sessions that were not idle, on average over the run (sampled every 20 ms, by state / wait event): over ${COPIES} articles ${sessions(overTen) || 'none'}; over one article ${sessions(overOne) || 'none'}.

By second, over ${COPIES} articles:

${seconds(overTen)}

By second, over one article:

${seconds(overOne)}
${
  profiled
    ? `
Profile of the server's thread during one more run over ${COPIES} articles (${profiled.run.edits_per_second} edits/s under the profiler; busy ${Math.round(profiled.summary.busy * 100)}%; self time as a share of busy time, native work charged to the package that asked for it):

| where | share |
|---|---:|
${profiled.summary.by_module
  .slice(0, 12)
  .map((m) => `| ${m.where} | ${Math.round(m.share * 1000) / 10}% |`)
  .join('\n')}

| function | where | share |
|---|---|---:|
${profiled.summary.by_function
  .slice(0, 12)
  .map((f) => `| ${f.fn} | ${f.where} | ${Math.round(f.share * 1000) / 10}% |`)
  .join('\n')}
`
    : ''
}`;
await writeFile(resolve(dir, 'write-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
await writeFile(resolve(dir, 'write-latest.md'), table + saturationTable);
process.stdout.write(table + saturationTable);
if (
  [edits, overTen, overOne, floorOverTen, floorOverOne].some((r) =>
    Object.keys(r.statuses).some((s) => s !== '200'),
  )
) {
  process.stderr.write('some edits were not answered 200\n');
  process.exitCode = 1;
}
