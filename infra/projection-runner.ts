import { type Kysely, sql, type Transaction } from 'kysely';
import type { DomainEvent } from '../domain/events.ts';
import type { DbHandle } from './db/open.ts';
import type { Database, Db } from './db/schema.ts';
import {
  isAfter,
  type LogPosition,
  type NewEvent,
  readAllEvents,
  readBatch,
  readCheckpoint,
  START,
  storedColumns,
  toStoredEvent,
  writeCheckpoint,
} from './event-store.ts';
import {
  handles,
  IN_TRANSACTION,
  type InlineProjector,
  inStatement,
  type Pending,
  type Projected,
  type Projection,
  type Projector,
  projectInTransaction,
  type Statement,
  type Stored,
} from './projection.ts';
import { inSpan } from './telemetry/spans.ts';

type Progress = { done: number; total: number };
type ProjectionStatus = {
  name: string;
  mode: 'inline' | 'async';
  checkpoint: LogPosition | null;
  /** Events of the types it handles that it has not applied yet (always 0 for inline projectors). */
  lag: number;
};
type RunnerLogger = { error(obj: object, msg: string): void; info(obj: object, msg: string): void };

const BATCH = 500;

/**
 * The inline projectors as one `project` (infra/projection.ts), which the event store calls for the
 * events of an append, or of a commit group's appends: each projector given the events it handles.
 * Within the append's statement, their statements together, or IN_TRANSACTION when one of them must
 * project in a transaction. In the append's transaction, each projector's batch in turn (their rows
 * written before the next one reads), answering no statements of its own.
 */
export function inlineProjection<E extends NewEvent = DomainEvent>(
  projectors: readonly Projector<E>[],
): (events: readonly Pending<E>[], at: Projection) => Projected {
  const inline = projectors.filter((p): p is InlineProjector<E> => p.mode === 'inline');
  const mineOf = (projector: InlineProjector<E>, events: readonly Pending<E>[]): readonly Pending<E>[] => {
    const [only] = events;
    if (only !== undefined && events.length === 1) return handles(projector, only.type) ? events : [];
    return events.filter((event) => handles(projector, event.type));
  };
  return (events, at) => {
    const { trx } = at;
    if (trx !== undefined) {
      return (async () => {
        for (const projector of inline) {
          const mine = mineOf(projector, events);
          if (mine.length === 0) continue;
          await inSpan(`project ${projector.name}`, {}, () =>
            projectInTransaction(projector, mine as readonly Stored<E>[], trx),
          );
        }
        return [];
      })();
    }
    const statements: Statement[] = [];
    for (const projector of inline) {
      const mine = mineOf(projector, events);
      if (mine.length === 0) continue;
      const own = inStatement(projector.project(mine, at), projector.name);
      if (own === IN_TRANSACTION) return IN_TRANSACTION;
      statements.push(...own);
    }
    return statements;
  };
}

/** Serialises everyone who advances one async projector: runners in every process, and rebuilds. */
async function lockProjector(trx: Kysely<Database>, name: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`projection:${name}`}))`.execute(trx);
}

/**
 * `lockProjector` for a live batch, whose commit does not wait for the WAL to reach the disk: a batch
 * lost in a crash is applied again (its checkpoint is lost with it), and the commits of appends do
 * not queue behind the projectors' flushes.
 */
async function lockProjectorForBatch(trx: Kysely<Database>, name: string): Promise<void> {
  await sql`select set_config('synchronous_commit', 'off', true), pg_advisory_xact_lock(hashtext(${`projection:${name}`}))`.execute(
    trx,
  );
}

/**
 * One batch of an async projector in one transaction: lock, read the checkpoint, read the next events
 * (before writing anything, so the transaction has no id that would hold back its own read), apply
 * them, move the checkpoint: past the events of other types too, up to where the read saw the log
 * (readBatch), so that the next read starts there. Says how many events it applied, and whether the
 * read saw committed events held back behind a transaction still open (readBatch's `heldBack`).
 */
export async function applyNextBatch<E extends NewEvent>(
  db: Db,
  projector: Projector<E>,
  batchSize = BATCH,
  onAfterCommitError?: (error: unknown) => void,
): Promise<{ applied: number; heldBack: boolean }> {
  const { events, heldBack } = await db.transaction().execute(async (trx) => {
    await lockProjectorForBatch(trx, projector.name);
    const after = await readCheckpoint(trx, projector.name);
    const batch = await readBatch<E>(trx, after, batchSize, projector.handles);
    await projectInTransaction(projector, batch.events, trx);
    if (isAfter(batch.through, after)) await writeCheckpoint(trx, projector.name, batch.through);
    return batch;
  });
  if (events.length > 0 && projector.mode === 'async' && projector.afterCommit) {
    try {
      await projector.afterCommit(events);
    } catch (error) {
      onAfterCommitError?.(error);
    }
  }
  return { applied: events.length, heldBack };
}

/** How many events of the projector's types come after its checkpoint. */
export async function lagOf(db: Db, projector: Projector<NewEvent>): Promise<number> {
  return (await lagDetail(db, projector)).events;
}

/**
 * How far an async projector is behind the log: the events of its types after its checkpoint, and how
 * many seconds ago the oldest of them was recorded (0 when none waits), by the database's clock.
 */
export async function lagDetail(
  db: Db,
  projector: Projector<NewEvent>,
): Promise<{ events: number; seconds: number }> {
  const after = await readCheckpoint(db, projector.name);
  const row = await db
    .selectFrom('events')
    .select((eb) => [
      eb.fn.countAll<string>().as('n'),
      sql<string | null>`extract(epoch from clock_timestamp() - min(recorded_at))`.as('seconds'),
    ])
    .where('type', 'in', projector.handles)
    .where(
      sql<boolean>`(transaction_id, position) > (${String(after.transactionId)}::text::xid8, ${String(after.position)}::bigint)`,
    )
    .executeTakeFirstOrThrow();
  return { events: Number(row.n), seconds: row.seconds === null ? 0 : Math.max(0, Number(row.seconds)) };
}

/**
 * Applies batches until the projector has applied every event committed when it finishes. An event
 * committed by a transaction younger than one still appending to the log is held back by readAll
 * (see the event store); catchUp waits for it rather than returning early, up to `timeoutMs`.
 */
export async function catchUp<E extends NewEvent>(
  db: Db,
  projector: Projector<E>,
  onProgress?: (p: Progress) => void,
  opts: { batchSize?: number; timeoutMs?: number } = {},
): Promise<number> {
  const batchSize = opts.batchSize ?? BATCH;
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  const total = onProgress ? await lagOf(db, projector) : 0;
  let done = 0;
  onProgress?.({ done, total });
  for (;;) {
    const { applied: n } = await applyNextBatch(db, projector, batchSize);
    done += n;
    onProgress?.({ done, total: Math.max(total, done) });
    if (n === batchSize) continue;
    const heldBack = await lagOf(db, projector);
    if (heldBack === 0) return done;
    if (Date.now() > deadline) {
      throw new Error(
        `${projector.name}: ${heldBack} committed events are still held back by a transaction that stays open`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Drops a read model and replays every event it handles; the rows come out as the live projection made them.
 * Inline projectors are rebuilt in one transaction that holds their tables locked, so appends that
 * touch them wait and then apply on top of the rebuilt rows; nothing is lost or applied twice.
 * Async projectors are emptied and reset to the start in one transaction, then caught up batch by batch.
 */
export async function rebuild<E extends NewEvent>(
  db: Db,
  projector: Projector<E>,
  onProgress?: (p: Progress) => void,
): Promise<number> {
  if (projector.mode === 'async') {
    await db.transaction().execute(async (trx) => {
      await lockProjector(trx, projector.name);
      for (const table of projector.tables) await sql`delete from ${sql.table(table)}`.execute(trx);
      await writeCheckpoint(trx, projector.name, START);
    });
    return catchUp(db, projector, onProgress);
  }
  return db.transaction().execute(async (trx) => {
    for (const table of projector.tables) {
      await sql`lock table ${sql.table(table)} in access exclusive mode`.execute(trx);
    }
    return replayAll(trx, projector, onProgress);
  });
}

/**
 * Empties a projector's tables and applies every event it handles, in position order, within the
 * caller's transaction `trx`: the inline rebuild's replay, and the import's (infra/archive/import.ts),
 * which holds every table locked and loads the log in the same transaction. Per stream (all an inline
 * read model depends on) position order is version order; on a log that one transaction wrote (an
 * import's), it is the log's order for async read models too. Returns how many events it applied.
 */
export async function replayAll<E extends NewEvent>(
  trx: Transaction<Database>,
  projector: Projector<E>,
  onProgress?: (p: Progress) => void,
): Promise<number> {
  for (const table of projector.tables) await sql`delete from ${sql.table(table)}`.execute(trx);
  const count = await trx
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('type', 'in', projector.handles)
    .executeTakeFirstOrThrow();
  const total = Number(count.n);
  let done = 0;
  let after = '0';
  onProgress?.({ done, total });
  for (;;) {
    // Every committed event, in position order: the caller's table locks make the set complete.
    const rows = await trx
      .selectFrom('events')
      .select(storedColumns)
      .where('type', 'in', projector.handles)
      .where('position', '>', after)
      .orderBy('position')
      .limit(BATCH)
      .execute();
    await projectInTransaction(
      projector,
      rows.map((row) => toStoredEvent<E>(row)),
      trx,
    );
    done += rows.length;
    onProgress?.({ done, total: Math.max(total, done) });
    const last = rows[rows.length - 1];
    if (!last || rows.length < BATCH) return done;
    after = last.position;
  }
}

/**
 * A projector that ran async and now runs inline leaves its checkpoint behind, and maybe events after
 * it that no runner applied before the move. This applies them and removes the checkpoint, under the
 * projector's lock, in one transaction; with no checkpoint it does nothing. Run at start, after the
 * migrations. Events appended meanwhile are applied inline and may be applied here too: only for a
 * projector whose `apply` is idempotent (activity: `on conflict do nothing`). It reads every committed
 * event (readAllEvents' `heldBackToo`), not only those below the log's horizon (logHorizon):
 * with the checkpoint gone, nothing would read the others later. Returns how many events it applied.
 */
export async function retireCheckpoint<E extends NewEvent>(db: Db, projector: Projector<E>): Promise<number> {
  if (projector.mode !== 'inline') throw new Error(`${projector.name} is not inline`);
  const left = await db
    .selectFrom('checkpoints')
    .select('name')
    .where('name', '=', projector.name)
    .executeTakeFirst();
  if (left === undefined) return 0;
  return db.transaction().execute(async (trx) => {
    await lockProjector(trx, projector.name);
    let after = await readCheckpoint(trx, projector.name);
    let applied = 0;
    for (;;) {
      const events = await readAllEvents<E>(trx, after, BATCH, {
        types: projector.handles,
        heldBackToo: true,
      });
      await projectInTransaction(projector, events, trx);
      applied += events.length;
      const last = events.at(-1);
      if (events.length < BATCH || last === undefined) break;
      after = { transactionId: last.transactionId, position: last.position };
    }
    await trx.deleteFrom('checkpoints').where('name', '=', projector.name).execute();
    return applied;
  });
}

export async function projectionStatus(
  db: Db,
  projectors: readonly Projector<NewEvent>[],
): Promise<ProjectionStatus[]> {
  const out: ProjectionStatus[] = [];
  for (const p of projectors) {
    if (p.mode === 'inline') {
      out.push({ name: p.name, mode: p.mode, checkpoint: null, lag: 0 });
      continue;
    }
    out.push({
      name: p.name,
      mode: p.mode,
      checkpoint: await readCheckpoint(db, p.name),
      lag: await lagOf(db, p),
    });
  }
  return out;
}

/** How soon a projector whose read saw events held back looks again, the first time. */
export const HELD_BACK_FIRST_MS = 50;

/**
 * Runs every async projector in the background: it catches up, then sleeps until an append of a type
 * it handles wakes it (LISTEN/NOTIFY, or in-process on PGlite; an append of other types wakes only
 * their projectors) or a short poll interval passes (an event hidden behind a transaction that was
 * still open becomes visible without a notification of its own). Woken, it first lets appends settle
 * for `settleMs` (100): under load appends come one after another (edits, batches of activity
 * records), and one batch for many appends costs a few statements where a batch per append would
 * cost a few statements each. A projector whose read saw committed events held back (behind a
 * transaction still appending to the log) looks again after HELD_BACK_FIRST_MS, then twice as long
 * each time, up to the poll interval: the wake-up of those events came before they could be read.
 */
export function startAsyncProjections<E extends NewEvent = DomainEvent>(opts: {
  handle: Pick<DbHandle, 'db' | 'onAppended'>;
  projectors: readonly Projector<E>[];
  logger?: RunnerLogger;
  pollMs?: number;
  settleMs?: number;
}): { stop(): Promise<void>; idle(): Promise<void> } {
  const { handle, logger } = opts;
  const pollMs = opts.pollMs ?? 1000;
  const settleMs = opts.settleMs ?? 100;
  const asyncProjectors = opts.projectors.filter((p) => p.mode === 'async');
  let stopped = false;
  let wake: (() => void) | null = null;
  /** The projectors that may have something to apply. */
  const dirty = new Set<Projector<E>>(asyncProjectors);
  const markAll = (): void => {
    for (const p of asyncProjectors) dirty.add(p);
  };
  const unsubscribe = handle.onAppended((types) => {
    const before = dirty.size;
    if (types === null) markAll();
    else for (const p of asyncProjectors) if (types.some((type) => handles(p, type))) dirty.add(p);
    if (dirty.size > before) wake?.();
  });
  let idleWaiters: Array<() => void> = [];

  /** The projectors whose last read saw events held back, and how long they wait to look again. */
  const heldBack = new Set<Projector<E>>();
  let heldBackWait = 0;

  const loop = (async () => {
    let failures = 0;
    while (!stopped) {
      const due = asyncProjectors.filter((p) => dirty.has(p));
      for (const p of due) {
        dirty.delete(p);
        heldBack.delete(p);
      }
      let full = false;
      try {
        for (const p of due) {
          if (stopped) break;
          // A batch short of full means the projector is caught up with what was visible.
          const batch = await applyNextBatch(handle.db, p, BATCH, (error) =>
            logger?.error({ err: error, projector: p.name }, 'after-commit step failed; the sweep takes it'),
          );
          if (batch.applied === BATCH) {
            full = true;
            dirty.add(p);
          } else if (batch.heldBack) heldBack.add(p);
        }
        failures = 0;
      } catch (error) {
        failures++;
        markAll();
        logger?.error({ err: error }, 'async projection batch failed; retrying');
      }
      if (full) continue;
      if (dirty.size > 0 && failures === 0) {
        // Woken during the pass: let appends settle, then go again.
        await new Promise((resolve) => setTimeout(resolve, settleMs).unref());
        continue;
      }
      for (const resolve of idleWaiters) resolve();
      idleWaiters = [];
      if (stopped) break;
      const held = failures === 0 && heldBack.size > 0;
      heldBackWait = held ? Math.min(pollMs, heldBackWait === 0 ? HELD_BACK_FIRST_MS : heldBackWait * 2) : 0;
      const delay = failures > 0 ? Math.min(30_000, pollMs * 2 ** failures) : held ? heldBackWait : pollMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          // Polled: an event held back by a transaction that was open can be visible now.
          if (held) for (const p of heldBack) dirty.add(p);
          else markAll();
          resolve();
        }, delay);
        timer.unref();
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  })();

  return {
    async stop() {
      stopped = true;
      wake?.();
      unsubscribe();
      await loop;
      for (const resolve of idleWaiters) resolve();
    },
    /** Resolves once every async projector has applied everything visible (for tests and the CLI). */
    idle() {
      return new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        markAll();
        wake?.();
      });
    },
  };
}
