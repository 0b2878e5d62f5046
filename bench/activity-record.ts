import { setTimeout } from 'node:timers/promises';
import { sql } from 'kysely';
import { createRuntime } from '../apps/runtime.ts';
import { migrateToLatest } from '../infra/db/migrate.ts';
import { openDatabase } from '../infra/db/open.ts';
import { cpuSeconds, cpuSince } from './load.ts';
import { median } from './report.ts';

/*
 * The activity record alone, in one process: what storing one call's record costs this process (the
 * server's thread's share: the record made, batched, appended and projected) and the database's
 * backends, per call. Runs of CALLS records, each a call of the API's article read as the server
 * records it, added as a server under load adds them (10 every 2 ms, about 5,000 a second, the rate of
 * the read benchmark's article route), then the rest flushed; ROUNDS runs, medians. On a database of
 * its own (`cs_activity_bench`, made and migrated when missing; DATABASE_URL names another).
 *
 *   node bench/activity-record.ts
 */
const CALLS = 5000;
const ROUNDS = 8;

const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/cs_activity_bench';
const database = new URL(databaseUrl).pathname.slice(1);
{
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const server = await openDatabase({
    databaseUrl: admin.href,
    dataDir: '',
    holder: 'bench/activity-record.ts',
  });
  const found = await sql`select 1 from pg_database where datname = ${database}`.execute(server.db);
  if (found.rows.length === 0) await sql`create database ${sql.id(database)}`.execute(server.db);
  await server.close();
}
const handle = await openDatabase({ databaseUrl, dataDir: '', holder: 'bench/activity-record.ts' });
await migrateToLatest(handle.db);
const runtime = createRuntime(handle);
const { commands } = runtime;

const actor = { type: 'api_key', id: 'key_bench', name: 'Benchmark key' } as const;
async function batch(): Promise<{ node: number; postgres: number }> {
  const before = cpuSeconds(database);
  const stored: Promise<unknown>[] = [];
  for (let i = 0; i < CALLS; i++) {
    if (i % 10 === 0) await setTimeout(2);
    stored.push(
      commands.recordCall({
        accountId: `acc_bench${i % 4}`,
        source: 'api',
        actor,
        operation: 'get_article',
        siteId: 'site_bench',
        articleId: 'art_bench',
        status: 200,
        requestId: `req_${String(i).padStart(20, '0')}`,
        durationMs: 1,
      }),
    );
  }
  await commands.flushCalls();
  await Promise.all(stored);
  const used = cpuSince(before, cpuSeconds(database));
  return { node: (used.node / CALLS) * 1e6, postgres: (used.postgres / CALLS) * 1e6 };
}

await batch(); // warm-up
const runs: { node: number; postgres: number }[] = [];
for (let round = 0; round < ROUNDS; round++) runs.push(await batch());
const node = median(runs.map((r) => r.node));
const postgres = median(runs.map((r) => r.postgres));
process.stdout.write(
  `activity record: this process ${node.toFixed(1)} µs, PostgreSQL ${postgres.toFixed(1)} µs per call (${ROUNDS} runs of ${CALLS}, medians; ${new Date().toISOString()})\n`,
);
await runtime.close();
