import { sql } from 'kysely';
import type { Metrics } from '../metrics.ts';
import { type DbLogger, openReadPool, type ReadPool } from './open.ts';
import type { Db } from './schema.ts';
import { isDatabaseUnavailable } from './unavailable.ts';
import { parseLsn, type WritePositions } from './write-positions.ts';

/*
 * Reads on PostgreSQL streaming replicas (DATABASE_REPLICA_URLS), with read-your-writes per account
 * (docs/operations.md, "Read replicas"). The use cases' queries run on the `Db` that `read` gives them
 * for the calling account; writes, and the reads of a use case that writes, stay on the primary.
 *
 * - After an account's write commits, `wrote` records the primary's WAL insert position as the
 *   account's last write (write-positions.ts: in Redis for every process, in memory besides).
 * - A read of an account with a recorded position goes to a replica that has replayed that far; the
 *   replicas are asked for up to CATCH_UP_MS, then the read goes to the primary (`not_caught_up`). A
 *   read without one goes to a replica, in turn.
 * - Every CHECK_EVERY_MS a monitor asks each replica where it stands: one that does not answer is
 *   `down`, one whose lag is past the bound is `lagging`; both are skipped until a check finds them
 *   well, and with none left the reads go to the primary. A read that fails on a replica for want of
 *   a connection is run once more on the primary.
 */

/** How long a read waits for a replica to replay its account's last write before it goes to the primary. */
export const CATCH_UP_MS = 100;
/** How often each replica's health and lag are checked. */
export const CHECK_EVERY_MS = 1_000;
/** A check that gets no answer within this long finds its replica down. */
const CHECK_TIMEOUT_MS = 1_000;
/** Between two askings of the replicas' replay position while a read waits. */
const CATCH_UP_PAUSE_MS = 10;

/** Why a read went to the primary although there are replicas. */
export type FallbackReason = 'lagging' | 'down' | 'not_caught_up';

/** Where the use cases' reads run for an account, and what an account's write tells them. */
export type Reads = {
  /** Runs a read of the account's data on a replica that has its last write, else on the primary. */
  read<T>(accountId: string, work: (db: Db) => Promise<T>): Promise<T>;
  /** After a write of the account committed: its later reads must see it. */
  wrote(accountId: string): Promise<void>;
};

/** Every read on the primary (no replicas): nothing to record. */
export function primaryReads(db: Db): Reads {
  return {
    read: (_accountId, work) => work(db),
    wrote: async () => {},
  };
}

/** What the monitor last learnt of a replica. */
export type ReplicaStatus = {
  /** `host:port` of its URL. */
  name: string;
  up: boolean;
  /** Seconds behind the primary (0: it has replayed all it received); null while down or unknown. */
  lagSeconds: number | null;
  /** The last WAL position it was seen to have replayed. */
  replayLsn: bigint | null;
};

export type ReplicaReads = Reads & {
  status(): ReplicaStatus[];
  /** Checks every replica now (the monitor does every CHECK_EVERY_MS). */
  check(): Promise<void>;
  close(): Promise<void>;
};

type Replica = ReplicaStatus & { pool: ReadPool; checking: boolean };

/** What a replica says of itself: whether it is in recovery, its receive and replay positions, its replay's age. */
export type ReplicaReading = {
  recovery: boolean;
  receive: string | null;
  replay: string | null;
  /** Seconds since the commit of the last transaction it replayed (on the primary's clock); null: none yet. */
  behind: number | null;
};

/**
 * A replica's lag in seconds from its reading: 0 when it has replayed all the WAL it received, else the
 * age of the last transaction it replayed (Infinity when it has replayed none since it started). Null:
 * it is not a replica (promoted, or a primary named by mistake).
 */
export function lagOf(reading: ReplicaReading): number | null {
  if (!reading.recovery || reading.replay === null) return null;
  if (reading.receive === null || parseLsn(reading.receive) <= parseLsn(reading.replay)) return 0;
  return reading.behind === null ? Number.POSITIVE_INFINITY : Math.max(0, reading.behind);
}

/** `host:port` of a replica's URL, its name in metrics and logs (never its credentials). */
export function replicaName(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || '5432'}`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(Object.assign(new Error(`${what}: no answer within ${ms} ms`), { code: 'ETIMEDOUT' })),
        ms,
      );
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Reads on the replicas at `urls`, checked once before this resolves (a replica down at start is
 * skipped; the service starts all the same), then every `checkEveryMs`.
 */
export async function createReplicaReads(opts: {
  primary: Db;
  urls: readonly string[];
  maxLagSeconds: number;
  positions: WritePositions;
  logger: DbLogger;
  poolSize?: number;
  metrics?: Pick<Metrics, 'dbReads' | 'replicaFallbacks'> | undefined;
  checkEveryMs?: number;
  catchUpMs?: number;
}): Promise<ReplicaReads> {
  const { primary, positions, logger, metrics } = opts;
  const catchUpMs = opts.catchUpMs ?? CATCH_UP_MS;
  const replicas: Replica[] = await Promise.all(
    opts.urls.map(async (url, index) => {
      const name = replicaName(url);
      const unique = opts.urls.slice(0, index).some((u) => replicaName(u) === name)
        ? `${name}#${index + 1}`
        : name;
      return {
        name: unique,
        up: false,
        lagSeconds: null,
        replayLsn: null,
        checking: false,
        pool: await openReadPool(url, opts.poolSize ?? 10, logger),
      };
    }),
  );
  let turn = 0;

  const seen = (replica: Replica, replay: string | null): void => {
    if (replay === null) return;
    const lsn = parseLsn(replay);
    if (replica.replayLsn === null || lsn > replica.replayLsn) replica.replayLsn = lsn;
  };

  const markDown = (replica: Replica, error: unknown): void => {
    if (replica.up)
      logger.warn({ replica: replica.name, err: error }, 'a read replica is down: reads go elsewhere');
    replica.up = false;
    replica.lagSeconds = null;
  };

  const checkOne = async (replica: Replica): Promise<void> => {
    if (replica.checking) return;
    replica.checking = true;
    try {
      const { rows } = await withTimeout(
        replica.pool.pool.query<ReplicaReading>(
          `select pg_is_in_recovery() as recovery, pg_last_wal_receive_lsn()::text as receive,
             pg_last_wal_replay_lsn()::text as replay,
             extract(epoch from now() - pg_last_xact_replay_timestamp())::float8 as behind`,
        ),
        CHECK_TIMEOUT_MS,
        `read replica ${replica.name}`,
      );
      const reading = rows[0];
      const lag = reading ? lagOf(reading) : null;
      if (!reading || lag === null) {
        markDown(replica, new Error('not in recovery: not a streaming replica (promoted?)'));
        return;
      }
      seen(replica, reading.replay);
      if (!replica.up) logger.info({ replica: replica.name, lag }, 'a read replica answers: reads go to it');
      replica.up = true;
      replica.lagSeconds = lag;
    } catch (error) {
      markDown(replica, error);
    } finally {
      replica.checking = false;
    }
  };

  const check = async (): Promise<void> => {
    await Promise.all(replicas.map(checkOne));
  };
  await check();
  const timer = setInterval(() => void check(), opts.checkEveryMs ?? CHECK_EVERY_MS);
  timer.unref();

  /** Asks a replica how far it has replayed now; a failure leaves what was known. */
  const replayNow = async (replica: Replica): Promise<void> => {
    try {
      const { rows } = await replica.pool.pool.query<{ replay: string | null }>(
        'select pg_last_wal_replay_lsn()::text as replay',
      );
      seen(replica, rows[0]?.replay ?? null);
    } catch {
      // The monitor finds out whether it is down.
    }
  };

  const fallback = (reason: FallbackReason): undefined => {
    metrics?.replicaFallbacks.inc({ reason });
    return undefined;
  };

  /** The replica for a read of the account, or undefined (counted, with why) for the primary. */
  const choose = async (accountId: string): Promise<Replica | undefined> => {
    const healthy = replicas.filter(
      (r) => r.up && r.lagSeconds !== null && r.lagSeconds <= opts.maxLagSeconds,
    );
    if (healthy.length === 0) return fallback(replicas.some((r) => r.up) ? 'lagging' : 'down');
    const start = turn++ % healthy.length;
    const inTurn = [...healthy.slice(start), ...healthy.slice(0, start)];
    const needed = await positions.get(accountId);
    if (needed === undefined) return inTurn[0];
    const caughtUp = (): Replica | undefined =>
      inTurn.find((r) => r.replayLsn !== null && r.replayLsn >= needed);
    const deadline = performance.now() + catchUpMs;
    for (;;) {
      const found = caughtUp();
      if (found) return found;
      if (performance.now() >= deadline) return fallback('not_caught_up');
      await Promise.all(inTurn.map(replayNow));
      if (!caughtUp() && performance.now() < deadline) await sleep(CATCH_UP_PAUSE_MS);
    }
  };

  return {
    async read(accountId, work) {
      const replica = await choose(accountId);
      if (replica === undefined) {
        metrics?.dbReads.inc({ target: 'primary' });
        return work(primary);
      }
      try {
        const value = await work(replica.pool.db);
        metrics?.dbReads.inc({ target: replica.name });
        return value;
      } catch (error) {
        if (!isDatabaseUnavailable(error)) throw error;
        // Reads only: run once more on the primary.
        markDown(replica, error);
        metrics?.replicaFallbacks.inc({ reason: 'down' });
        metrics?.dbReads.inc({ target: 'primary' });
        return work(primary);
      }
    },

    async wrote(accountId) {
      try {
        const { rows } = await sql<{ lsn: string }>`select pg_current_wal_insert_lsn()::text as lsn`.execute(
          primary,
        );
        const lsn = rows[0]?.lsn;
        if (lsn !== undefined) await positions.record(accountId, parseLsn(lsn));
      } catch (error) {
        // The write stands; its account's next reads may find a replica behind it.
        logger.warn({ err: error }, 'could not record a write position: a read replica may be behind it');
      }
    },

    status: () =>
      replicas.map(({ name, up, lagSeconds, replayLsn }) => ({ name, up, lagSeconds, replayLsn })),
    check,
    async close() {
      clearInterval(timer);
      await Promise.all(replicas.map((r) => r.pool.close()));
    },
  };
}
