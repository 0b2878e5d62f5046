import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import pg from 'pg';
import { metricsBaseOf, type ServerProcess, startServer } from '../tests/support/server.ts';
import {
  type Answer,
  articleIds,
  createDatabase,
  DRIVER_WORDS,
  migrateAndSeed,
  NO_ANSWER,
  publicReadiness,
  readiness,
  sleep,
  startLoad,
  timeUntil,
} from './outage-load.ts';
import { startOwnPostgres } from './outage-servers.ts';
import { type Check, check, type Scenario } from './scenario.ts';

/*
 * Scenario 3: PostgreSQL restarts under load. A PostgreSQL cluster of the scenario's own (never the
 * machine's shared one), the real server on it, clients reading and editing; the cluster is stopped
 * with `pg_ctl stop -m fast` (sessions disconnected), started again, then stopped with `-m immediate`
 * (a crash: recovery at start) and started again, the service running throughout.
 */

/** A client gives up on a call after this long: no call may take it. */
const CLIENT_TIMEOUT_MS = 20_000;
/** Once PostgreSQL is back, the service must work again within this long. */
const RECOVERY_BOUND_MS = 30_000;

type Outage = {
  mode: 'fast' | 'immediate';
  /** The detailed /readyz (metrics listener) while PostgreSQL was down. */
  readyDown: { status: number; databaseOk: boolean; error: string };
  /** The public /readyz while PostgreSQL was down: the replica stays in a load balancer's pool. */
  publicDown: number;
  /** From `pg_ctl start` returning to the first edit answered 200, and to the detailed /readyz 200. */
  writeBackMs: number | null;
  readyBackMs: number | null;
  /** From `pg_ctl start` returning to the log line saying the LISTEN connection is back (0: back before it returned). */
  listenBackMs: number | null;
};

const LISTEN_BACK = 'the LISTEN connection to PostgreSQL is back';

export const postgresRestart: Scenario = {
  name: 'postgres-restart',
  title: 'PostgreSQL restart under load (pg_ctl stop -m fast, then -m immediate)',
  timeoutMs: 6 * 60_000,
  async run({ short, log }) {
    const own = await startOwnPostgres();
    let server: ServerProcess | undefined;
    try {
      await createDatabase(own.url('postgres'), 'cs_rel');
      const env = {
        DATABASE_URL: own.url('cs_rel'),
        DATA_DIR: '/nonexistent',
        RATE_LIMIT_PER_MINUTE: '1000000',
        EDIT_LIMIT_PER_DAY: '1000000',
      };
      const seeded = await migrateAndSeed(env, short ? 5 : 20);
      server = await startServer({ ...env, METRICS_PORT: '0' });
      const base = server.url;
      const details = metricsBaseOf(server);
      const serverPid = server.child.pid;
      const live = server;
      const ids = await articleIds(base, seeded.api_key, seeded.sites[0]?.id as string);
      log(`server ${base} on PostgreSQL :${own.port}, ${ids.length} articles`);
      const load = startLoad({
        baseUrl: base,
        key: seeded.api_key,
        articleIds: ids,
        clients: short ? 4 : 12,
        timeoutMs: CLIENT_TIMEOUT_MS,
        pauseMs: short ? 20 : 5,
        label: 'pg-restart',
      });
      const phase = short ? 1_500 : 5_000;
      const outages: Outage[] = [];
      await sleep(phase);
      // From the crash's command until PostgreSQL is gone: calls answered then may have their
      // records committed (asynchronously) by a server that dies a moment later.
      let crashAt = Number.POSITIVE_INFINITY;
      let crashDoneAt = Number.POSITIVE_INFINITY;
      for (const mode of ['fast', 'immediate'] as const) {
        log(`pg_ctl stop -m ${mode}`);
        if (mode === 'immediate') crashAt = Date.now();
        await own.stop(mode);
        if (mode === 'immediate') crashDoneAt = Date.now();
        await sleep(short ? 1_000 : 3_000);
        const down = await readiness(details);
        const publicDown = await publicReadiness(base);
        log(
          `down: /readyz ${publicDown}, details ${down.status} ${JSON.stringify(down.body.checks.database)}`,
        );
        await sleep(short ? 500 : 2_000);
        // Counted before the start: the LISTEN connection may be back before start() returns (a
        // container's start waits for PostgreSQL to answer a query, pg_ctl's for it to accept).
        const listenBefore = listenCount(live);
        await own.start();
        log('pg_ctl start returned');
        const probeWrite = async (): Promise<boolean> => {
          const res = await fetch(`${base}/api/v1/articles/${ids[0]}`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${seeded.api_key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ title: `pg-restart probe ${mode}` }),
            signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
          });
          await res.arrayBuffer();
          return res.status === 200;
        };
        const [writeBackMs, readyBackMs, listenBackMs] = await Promise.all([
          timeUntil(probeWrite, RECOVERY_BOUND_MS),
          timeUntil(async () => (await readiness(details)).status === 200, RECOVERY_BOUND_MS),
          timeUntil(async () => listenCount(live) > listenBefore, RECOVERY_BOUND_MS),
        ]);
        outages.push({
          mode,
          readyDown: {
            status: down.status,
            databaseOk: down.body.checks.database.ok,
            error: down.body.checks.database.error ?? '',
          },
          publicDown,
          writeBackMs,
          readyBackMs,
          listenBackMs,
        });
        log(`back: writes after ${writeBackMs} ms, /readyz ${readyBackMs} ms, LISTEN ${listenBackMs} ms`);
        await sleep(phase);
      }
      await load.stop();
      const answers = load.answers;

      // Async projectors catch up from their checkpoints (LISTEN woke them, or their timer did).
      const caughtUpMs = await timeUntil(async () => {
        const r = await readiness(details);
        return r.status === 200 && r.body.checks.projections.every((p) => p.lag === 0);
      }, RECOVERY_BOUND_MS);
      const logs = server.logs();
      await writeFile(resolve(import.meta.dirname, 'results/postgres-restart.server.log'), logs.join('\n'));
      const stillRunning = server.child.exitCode === null && server.child.pid === serverPid;

      const checks: Check[] = [];
      const failed = answers.filter((a) => a.status >= 500);
      const not503 = failed.filter((a) => a.status !== 503);
      checks.push(
        check(
          'no call answered a 5xx other than 503',
          not503.length === 0,
          not503.length
            ? `${not503.length}, e.g. ${not503[0]?.status} ${not503[0]?.body.slice(0, 200)}`
            : undefined,
        ),
      );
      const badProblem = failed.filter(
        (a) =>
          !a.type.startsWith('application/problem+json') ||
          a.retryAfter === null ||
          !/^\d+$/.test(a.retryAfter) ||
          DRIVER_WORDS.test(a.body),
      );
      checks.push(
        check(
          'every 503 is problem+json with Retry-After and no driver message',
          badProblem.length === 0,
          badProblem.length ? `${badProblem.length}, e.g. ${JSON.stringify(badProblem[0])}` : undefined,
        ),
      );
      const hung = answers.filter((a) => a.status === NO_ANSWER);
      checks.push(
        check(
          `no call went unanswered (client timeout ${CLIENT_TIMEOUT_MS / 1000} s)`,
          hung.length === 0,
          hung.length ? `${hung.length}, e.g. ${hung[0]?.body}` : undefined,
        ),
      );
      for (const o of outages) {
        checks.push(
          check(
            `-m ${o.mode}: the detailed /readyz says the database does not answer (503, database.ok false)`,
            o.readyDown.status === 503 && !o.readyDown.databaseOk && !DRIVER_WORDS.test(o.readyDown.error),
            JSON.stringify(o.readyDown),
          ),
          check(
            `-m ${o.mode}: the public /readyz stays 200 (the replica answers its own 503s)`,
            o.publicDown === 200,
            String(o.publicDown),
          ),
          check(
            `-m ${o.mode}: edits and /readyz work again within ${RECOVERY_BOUND_MS / 1000} s of the restart`,
            o.writeBackMs !== null && o.readyBackMs !== null,
            `edit ${o.writeBackMs} ms, readyz ${o.readyBackMs} ms`,
          ),
        );
      }
      checks.push(
        check('the service was never restarted (same process throughout)', stillRunning),
        check(
          `the LISTEN connection came back within ${RECOVERY_BOUND_MS / 1000} s of each restart`,
          outages.every((o) => o.listenBackMs !== null),
          outages.map((o) => `${o.mode}: ${o.listenBackMs} ms`).join(', '),
        ),
        check(
          'async projectors caught up from their checkpoints (every lag 0)',
          caughtUpMs !== null,
          `${caughtUpMs} ms after the load`,
        ),
      );
      checks.push(...(await acknowledgedWrites(own.url('cs_rel'), answers)));
      // The activity records commit without waiting for the WAL flush (docs/architecture.md, "Read
      // models"): a crash of PostgreSQL (-m immediate) may lose those of the calls answered in the
      // last moments before it: those answered from ASYNC_COMMIT_WINDOW_MS before the crash's command
      // until PostgreSQL was gone (by when the call was answered, not started: a slow call started
      // long before) are left out; every other answered call must have its record.
      const answeredAt = (a: Answer): number => a.at + a.ms;
      const records = await answeredCallsRecorded(
        own.url('cs_rel'),
        answers.filter(
          (a) => answeredAt(a) < crashAt - ASYNC_COMMIT_WINDOW_MS || answeredAt(a) > crashDoneAt,
        ),
      );
      checks.push(
        check(
          `every answered call has its activity record, with its status, within ${RECOVERY_BOUND_MS / 1000} s of the load`,
          records.missing.length === 0,
          `${records.answered - records.missing.length}/${records.answered}${
            records.missing.length ? `, e.g. missing ${JSON.stringify(records.missing[0])}` : ''
          }`,
        ),
      );

      const writes = answers.filter((a) => a.method === 'PUT');
      const max = Math.max(...answers.map((a) => a.ms));
      const figures: Record<string, string | number> = {
        calls: answers.length,
        'edits answered 200': writes.filter((a) => a.status === 200).length,
        'answered 503': failed.filter((a) => a.status === 503).length,
        'activity records of answered calls': `${records.answered - records.missing.length}/${records.answered}`,
        'activity records all stored after (ms)': records.storedMs ?? 'never',
        'slowest call (ms)': Math.round(max),
        'slowest 503 (ms)': Math.round(Math.max(0, ...failed.map((a) => a.ms))),
      };
      for (const o of outages) {
        figures[`-m ${o.mode}: edits back after (ms)`] = o.writeBackMs ?? 'never';
        figures[`-m ${o.mode}: /readyz back after (ms)`] = o.readyBackMs ?? 'never';
        figures[`-m ${o.mode}: LISTEN back after (ms)`] = o.listenBackMs ?? 'never';
      }
      figures['projectors caught up after (ms)'] = caughtUpMs ?? 'never';
      return {
        done: `${short ? 4 : 12} clients reading and editing ${ids.length} articles; PostgreSQL (a cluster of the scenario's own) stopped with pg_ctl -m fast for ~${short ? 1.5 : 5} s and started, then with -m immediate (crash recovery), the service left running`,
        checks,
        figures,
      };
    } catch (error) {
      if (server) log(`server log tail:\n${server.logs().slice(-25).join('\n')}`);
      throw error;
    } finally {
      if (server) await server.stop();
      await own.remove();
    }
  },
};

/** How many times the server has logged its LISTEN connection back. */
function listenCount(server: ServerProcess): number {
  return server.logs().filter((l) => l.includes(LISTEN_BACK)).length;
}

/**
 * Every call the clients got an answer to (200 or 503, before, during and after the outages) has its
 * activity record, with the status it was answered with: the records of calls made while PostgreSQL
 * was away are kept by the server and written once it is back. Waits for that (the server tries again
 * every second at most), up to RECOVERY_BOUND_MS.
 */
/**
 * The calls answered this long before a crash of PostgreSQL whose activity records may be lost with it:
 * a record is appended about 100 ms after its call, and an asynchronous commit reaches the disk within
 * three times `wal_writer_delay` (200 ms by default); generous, for a busy machine.
 */
const ASYNC_COMMIT_WINDOW_MS = 2_000;

async function answeredCallsRecorded(
  databaseUrl: string,
  answers: Answer[],
): Promise<{
  answered: number;
  missing: Array<{ requestId: string | undefined; status: number }>;
  storedMs: number | null;
}> {
  const answered = answers.filter((a) => a.status !== NO_ANSWER);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    let missing = answered;
    const look = async (): Promise<boolean> => {
      const { rows } = await client.query<{ request_id: string; status: number }>(
        'SELECT request_id, status FROM activity WHERE request_id = ANY($1)',
        [missing.map((a) => a.requestId ?? '')],
      );
      const recorded = new Map(rows.map((r) => [r.request_id, r.status]));
      missing = missing.filter((a) => a.requestId === undefined || recorded.get(a.requestId) !== a.status);
      return missing.length === 0;
    };
    const storedMs = await timeUntil(look, RECOVERY_BOUND_MS);
    return {
      answered: answered.length,
      missing: missing.map((a) => ({ requestId: a.requestId, status: a.status })),
      storedMs,
    };
  } finally {
    await client.end();
  }
}

/** Every edit answered 200 is in the log, with the revision it was answered with; versions are consecutive. */
async function acknowledgedWrites(databaseUrl: string, answers: Answer[]): Promise<Check[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ stream_id: string; version: number; title: string | null }>(
      `SELECT stream_id, version, data->>'title' AS title FROM events WHERE stream_id LIKE 'article%' ORDER BY stream_id, version`,
    );
    const titles = new Set(rows.map((r) => r.title));
    const acked = answers.filter((a) => a.method === 'PUT' && a.status === 200);
    const missing = acked.filter((a) => !titles.has(a.title ?? ''));
    const gaps: string[] = [];
    const last = new Map<string, number>();
    for (const r of rows) {
      const prev = last.get(r.stream_id) ?? 0;
      if (r.version !== prev + 1) gaps.push(`${r.stream_id} ${prev}->${r.version}`);
      last.set(r.stream_id, r.version);
    }
    return [
      check(
        'every edit answered 200 is in the log after both restarts',
        missing.length === 0,
        `${acked.length - missing.length}/${acked.length}`,
      ),
      check(
        'versions per article are consecutive',
        gaps.length === 0,
        gaps.slice(0, 3).join(', ') || undefined,
      ),
    ];
  } finally {
    await client.end();
  }
}
