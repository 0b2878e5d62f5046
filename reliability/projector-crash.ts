import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../infra/db/schema.ts';
import { START, storedColumns, toStoredEvent, writeCheckpoint } from '../infra/event-store.ts';
import { projectInTransaction } from '../infra/projection.ts';
import { lagOf } from '../infra/projection-runner.ts';
import { asyncProjectors } from '../projections/index.ts';
import { siteStatsProjector } from '../projections/site-stats.ts';
import { createTestDatabase } from '../tests/support/db.ts';
import { cli } from '../tests/support/process.ts';
import {
  compareWithRebuild,
  dropRedisPrefix,
  killHard,
  REDIS_URL,
  sleep,
  startWorker,
  until,
} from './crash-support.ts';
import { type Check, check, type Scenario } from './scenario.ts';

/*
 * Scenario 2, projector crash: the async projectors (backlinks, site statistics) replay thousands of
 * events in `npm run worker`, and the worker is killed with SIGKILL while one of its batches is open
 * (its projection lock held), again and again, while another process appends. Then the read models
 * must equal a rebuild from the log: a batch cut off is rolled back with its checkpoint and applied
 * once by the next worker. The comparison is shown to catch a batch applied twice.
 */

/** The worker's connections name themselves, so a batch of its own is told from one of the seeder's. */
const WORKER_APP = 'rel-projector-worker';

/** Empties the async read models and sets their checkpoints back to the start: all is to replay. */
async function resetAsync(db: Db): Promise<void> {
  await db.transaction().execute(async (trx) => {
    for (const p of asyncProjectors) {
      for (const table of p.tables) await sql`delete from ${sql.table(table)}`.execute(trx);
      await writeCheckpoint(trx, p.name, START);
    }
  });
}

/** Whether the worker holds a projector's batch lock now (a batch is open in its transaction). */
async function batchOpen(db: Db): Promise<boolean> {
  const keys = asyncProjectors.map((p) => `projection:${p.name}`);
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted and a.application_name = ${WORKER_APP}
      and l.objid::bigint in (select hashtext(k)::bigint & 4294967295 from unnest(${keys}::text[]) k)`.execute(
    db,
  );
  return (rows[0]?.n ?? 0) > 0;
}

async function totalLag(db: Db): Promise<number> {
  let n = 0;
  for (const p of asyncProjectors) n += await lagOf(db, p);
  return n;
}

async function seed(env: Record<string, string>, sites: number, backlinks: number): Promise<void> {
  const r = await cli(
    ['seed-demo', '--json', '--sites', String(sites), '--articles', '5', '--backlinks', String(backlinks)],
    env,
  );
  if (r.code !== 0) throw new Error(`seed-demo failed: ${r.stderr}`);
}

export const projectorCrash: Scenario = {
  name: 'projector-crash',
  title: 'SIGKILL of the worker while a projector batch is open, repeatedly, while events are appended',
  timeoutMs: 300_000,
  async run({ short, log }) {
    const kills = short ? 4 : 15;
    const backlinks = short ? 1500 : 4000;
    const test = await createTestDatabase('postgres');
    const db = test.handle.db;
    const prefix = `rel-projector-crash-${randomBytes(4).toString('hex')}`;
    const env: Record<string, string> = {
      DATABASE_URL: test.databaseUrl as string,
      DATA_DIR: '/nonexistent',
      REDIS_URL,
      JOBS_PREFIX: prefix,
    };
    let worker: ReturnType<typeof startWorker> | undefined;
    try {
      await seed(env, 2, backlinks);
      await resetAsync(db);
      // Another process appends meanwhile (a second account, with its own catch-up at the end).
      const appending = seed(env, 1, backlinks);
      let midBatch = 0;
      let missed = 0;
      let resets = 0;
      let starts = 0;
      while (midBatch < kills) {
        if ((await totalLag(db)) === 0) {
          await resetAsync(db);
          resets++;
        }
        worker = startWorker({ ...env, PGAPPNAME: WORKER_APP });
        starts++;
        const current = worker;
        const open = await until(
          async () => current.child.exitCode !== null || (await batchOpen(db)),
          20_000,
        );
        // A moment of randomness within the batch, then the kill.
        await sleep(Math.floor(Math.random() * 15));
        const wasOpen = open && (await batchOpen(db));
        await killHard(current.child);
        if (wasOpen) midBatch++;
        else missed++;
        if (starts > kills * 5) throw new Error(`only ${midBatch} kills within a batch in ${starts} starts`);
      }
      log(`${midBatch} kills with a batch open (${missed} others), ${resets} resets`);
      await appending;

      // A last worker catches up and stops cleanly.
      worker = startWorker(env);
      const current = worker;
      const running = await until(() => current.output().includes('worker running'), 30_000);
      const caughtUp = await until(async () => (await totalLag(db)) === 0, 60_000);
      current.child.kill('SIGTERM');
      const code = await current.exited;
      worker = undefined;

      const checks: Check[] = [
        check(
          `the worker was killed ${kills} times with a projector batch open`,
          midBatch >= kills,
          `${midBatch}`,
        ),
        check('a restarted worker starts and catches up (no lag left)', running && caughtUp),
        check('the worker stops cleanly on SIGTERM', code === 0, `exit ${code}`),
      ];
      const compared = await compareWithRebuild(db);
      checks.push(
        check(
          'the read models equal a rebuild from the log (no event lost, none applied twice)',
          compared.diffs.length === 0,
          compared.diffs.length
            ? JSON.stringify(compared.diffs)
            : `${compared.rows} rows in ${compared.tables} tables`,
        ),
      );

      // The comparison catches a projector that applies events twice: apply some again, by hand.
      const again = await db
        .selectFrom('events')
        .select(storedColumns)
        .where('type', '=', 'BacklinkAcquired')
        .orderBy('position')
        .limit(20)
        .execute();
      await db.transaction().execute(async (trx) => {
        for (const row of again) await projectInTransaction(siteStatsProjector, [toStoredEvent(row)], trx);
      });
      const doubled = await compareWithRebuild(db);
      checks.push(
        check(
          'the comparison catches events applied twice (20 backlinks applied again by hand)',
          doubled.diffs.some((d) => d.table === 'stats_buckets'),
          JSON.stringify(doubled.diffs),
        ),
      );
      const { n: events } = (await sql<{ n: number }>`select count(*)::int as n from events`.execute(db))
        .rows[0] ?? {
        n: 0,
      };
      return {
        done: `${starts} worker starts over ${events} events (async projectors reset to the start ${resets + 1} times), SIGKILL each time, while another process appended ${backlinks} backlinks`,
        checks,
        figures: {
          events,
          'worker starts': starts,
          'kills with a batch open': midBatch,
          'kills between batches': missed,
          'read-model rows compared': compared.rows,
        },
      };
    } finally {
      if (worker) await killHard(worker.child);
      await test.drop();
      await dropRedisPrefix(prefix);
    }
  },
};
