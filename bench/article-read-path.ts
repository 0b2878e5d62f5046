import { sql } from 'kysely';
import { articleJson, articleOut } from '../apps/application/articles.ts';
import { openDatabase } from '../infra/db/open.ts';
import { findArticle, findArticleJson } from '../projections/articles.ts';
import { cpuSeconds, cpuSince } from './load.ts';
import { median } from './report.ts';

/*
 * The article read's data path alone, in one process: the statement and the answer's text ready to
 * write, made the way the API makes it (`findArticleJson`, `articleJson`: the body as PostgreSQL
 * stored its JSON text) and the way before it (`findArticle`, `JSON.stringify(articleOut(row))`: the
 * body escaped on every read), on the benchmark database's 21.6 KB article. Batches of CALLS calls
 * with IN_FLIGHT at once, the two ways in turns, ROUNDS times each; CPU per call of this process (the
 * server's thread's share) and of the database's backends, medians. In turns in one process, so that
 * the machine's drift (a VM's speed moves by a third over minutes) falls on both alike.
 *
 *   node bench/article-read-path.ts        (DATABASE_URL as bench/run.ts; the dataset must exist)
 */
const CALLS = 3000;
const IN_FLIGHT = 10;
const ROUNDS = 8;

const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/cs_bench';
const database = new URL(databaseUrl).pathname.slice(1);
const handle = await openDatabase({ databaseUrl, dataDir: '', holder: 'bench/article-read-path.ts' });
const { db } = handle;
const marker = await sql<{ dataset: { accountId: string; longArticleId: string } }>`
  select dataset from bench_dataset`.execute(db);
const dataset = marker.rows[0]?.dataset;
if (!dataset) throw new Error(`${database} holds no benchmark dataset: run bench/run.ts first`);
const { accountId, longArticleId } = dataset;

const ways = {
  'escaped on every read': async () => {
    const row = await findArticle(db, accountId, longArticleId);
    if (!row) throw new Error('no article');
    return JSON.stringify(articleOut(row));
  },
  'escaped when stored': async () => {
    const row = await findArticleJson(db, accountId, longArticleId);
    if (!row) throw new Error('no article');
    return articleJson(row);
  },
} as const;
const [plain, stored] = await Promise.all(Object.values(ways).map((way) => way()));
if (plain !== stored) throw new Error('the two ways give different texts');

async function batch(way: () => Promise<string>): Promise<{ node: number; postgres: number }> {
  let next = 0;
  const before = cpuSeconds(database);
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < CALLS) await way();
    }),
  );
  const used = cpuSince(before, cpuSeconds(database));
  return { node: (used.node / CALLS) * 1e6, postgres: (used.postgres / CALLS) * 1e6 };
}

const results = new Map<string, { node: number; postgres: number }[]>();
for (const way of Object.values(ways)) await batch(way); // warm-up
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, way] of Object.entries(ways)) {
    const measured = await batch(way);
    results.set(name, [...(results.get(name) ?? []), measured]);
  }
}
process.stdout.write(
  `| answer's body | this process per call | PostgreSQL per call | both |\n|---|---:|---:|---:|\n`,
);
for (const [name, runs] of results) {
  const node = median(runs.map((r) => r.node));
  const postgres = median(runs.map((r) => r.postgres));
  process.stdout.write(
    `| ${name} | ${node.toFixed(0)} µs | ${postgres.toFixed(0)} µs | ${(node + postgres).toFixed(0)} µs |\n`,
  );
}
process.stdout.write(
  `(${ROUNDS} batches of ${CALLS} calls each way, ${IN_FLIGHT} in flight, medians; ${new Date().toISOString()})\n`,
);
await handle.close();
