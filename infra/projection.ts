import {
  type Expression,
  type Kysely,
  type OperationNodeSource,
  type RawBuilder,
  type SqlBool,
  sql,
  type Transaction,
} from 'kysely';
import type { DomainEvent } from '../domain/events.ts';
import type { ReadModelTables } from './db/read-model-tables.ts';
import type { Database } from './db/schema.ts';
import type { EventPlace, NewEvent } from './event-store.ts';

/*
 * The projector port: what a read model gives the event store and the projection runner. infra owns
 * it (the store runs inline projectors' statements, the runner applies and rebuilds); projections/
 * implement it, and a composition root hands the set of projectors in.
 */

/** An event as a projector is given it after its append: data narrowed by type, with its place in the log. */
export type Stored<E extends NewEvent = DomainEvent> = E &
  Pick<EventPlace, 'position' | 'transactionId' | 'eventId' | 'streamId' | 'version'>;

/** An event about to be appended: its stream version is known (the expected one plus one), its place in the log not yet. */
export type Pending<E extends NewEvent = DomainEvent> = E &
  Pick<EventPlace, 'eventId' | 'streamId' | 'version'>;

export type Trx = Transaction<Database>;

/** A data-modifying statement a projector adds to the append's own statement (see `statementsFor`). */
export type InlineStatement = OperationNodeSource;

/**
 * What an inline projector's `statementsFor` answers for an event it can only apply in a transaction
 * (it must read rows first): the append then runs in a transaction and calls `apply`.
 */
export const IN_TRANSACTION = 'in transaction';
export type InTransaction = typeof IN_TRANSACTION;

/** What every projector has; `E`: the events it handles, exactly those `handles` names. */
interface ProjectorBase<E extends NewEvent> {
  /** Bump the version in it to rebuild from scratch. */
  readonly name: string;
  readonly handles: readonly E['type'][];
  /** The tables it owns: emptied before a rebuild, compared by the rebuild tests. */
  readonly tables: readonly (keyof ReadModelTables)[];
  apply(event: Stored<E>, trx: Trx): Promise<void>;
  /**
   * Optional: the same as `apply` on each event in turn, with fewer statements (the runner uses it for
   * a whole batch when present). It must leave exactly the rows `apply` one by one leaves.
   */
  applyBatch?(events: readonly Stored<E>[], trx: Trx): Promise<void>;
}

/**
 * A read model written in the append's transaction, or within its one statement (`statementsFor`), so
 * reads see the write at once.
 */
export interface InlineProjector<E extends NewEvent = DomainEvent> extends ProjectorBase<E> {
  readonly mode: 'inline';
  /**
   * The same change as `apply` of `event`, as data-modifying statements that the append runs within
   * its own statement, after the insert (infra/event-store.ts: one round trip for the event and its
   * inline read models, no transaction held open between statements); IN_TRANSACTION for an event it
   * cannot project so. Each statement must change nothing unless `appended` holds (the event was
   * inserted: its version claim succeeded), and must not depend on another's writes: every statement
   * of the append sees the rows as they were before it. `db` only builds the statements.
   */
  statementsFor(
    event: Pending<E>,
    db: Kysely<Database>,
    appended: Expression<SqlBool>,
  ): InlineStatement[] | InTransaction;
  /**
   * Optional: `statementsFor` of a run, consecutive events of one stream appended by one statement
   * (an article's queued edits): statements that leave what `apply` of each event in turn leaves,
   * although every statement sees the rows as they were before the run. IN_TRANSACTION, or no such
   * method, and a run of more than one event the projector handles is appended in a transaction.
   */
  statementsForRun?(
    events: readonly Pending<E>[],
    db: Kysely<Database>,
    appended: Expression<SqlBool>,
  ): InlineStatement[] | InTransaction;
  /**
   * Optional: `statementsForRun` of several runs, each of a different stream, appended by one
   * statement (group commit): the same changes as each run's own statements, made by a few statements
   * whatever the number of runs, each run's rows as rows of one JSON parameter. A run's rows change
   * nothing unless its stream is among `appendedStreams` (a subquery of the stream ids whose version
   * claim succeeded): each run is guarded as alone. IN_TRANSACTION, or no such method: each run's own
   * statements are used instead.
   */
  statementsForGroup?(
    runs: readonly (readonly Pending<E>[])[],
    appendedStreams: RawBuilder<unknown>,
  ): InlineStatement[] | InTransaction;
}

/**
 * A read model that follows the log from a checkpoint stored in the same transaction as its rows; also
 * a subscription that turns events into work (webhook deliveries, planned jobs): rows written with its
 * checkpoint, then `afterCommit`.
 */
export interface AsyncProjector<E extends NewEvent = DomainEvent> extends ProjectorBase<E> {
  readonly mode: 'async';
  /**
   * Called with a batch's events once its transaction has committed (to hand the rows it wrote to a
   * queue, say). A failure is logged and not retried: the batch is done, so whatever this does must
   * also be done by a sweep that reads the rows.
   */
  afterCommit?(events: readonly Stored<E>[]): Promise<void>;
}

/** A read model: the events it handles and how one event changes its rows. */
export type Projector<E extends NewEvent = DomainEvent> = InlineProjector<E> | AsyncProjector<E>;

/** Whether the projector handles events of this type. */
export function handles(projector: Projector<NewEvent>, type: string): boolean {
  const types: readonly string[] = projector.handles;
  return types.includes(type);
}

/** Every change, when applied on its own (no append to wait for). */
export const ALWAYS: Expression<SqlBool> = sql<SqlBool>`true`;

/**
 * Runs data-modifying statements as one (each a WITH query of it): all see the rows as they were
 * before it, as in the append's statement.
 */
export async function runTogether(trx: Trx, statements: readonly InlineStatement[]): Promise<void> {
  if (statements.length === 0) return;
  const parts = statements.map((statement, index) => sql`${sql.raw(`s${index}`)} as (${statement})`);
  await sql`with ${sql.join(parts)} select`.execute(trx);
}

/**
 * `apply` derived from statements that every event the projector handles has: the statements run on
 * their own, in one round trip. For a projector that never answers IN_TRANSACTION.
 */
export function applyStatements<E extends NewEvent>(
  statementsFor: (
    event: Pending<E>,
    db: Kysely<Database>,
    appended: Expression<SqlBool>,
  ) => InlineStatement[],
): (event: Stored<E>, trx: Trx) => Promise<void> {
  return (event, trx) => runTogether(trx, statementsFor(event, trx, ALWAYS));
}
