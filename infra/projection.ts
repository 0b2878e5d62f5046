import {
  type Expression,
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
 *
 * One method, `project`: a batch of events in, statements out. The store calls it within an append's
 * own statement (one stream's events, or a commit group's events of several streams), and in an
 * append's transaction; the runner calls it for an async projector's batch, a rebuild and an import.
 */

/** An event as a projector is given it after its append: data narrowed by type, with its place in the log. */
export type Stored<E extends NewEvent = DomainEvent> = E &
  Pick<EventPlace, 'position' | 'transactionId' | 'eventId' | 'streamId' | 'version'>;

/** An event about to be appended: its stream version is known (the expected one plus one), its place in the log not yet. */
export type Pending<E extends NewEvent = DomainEvent> = E &
  Pick<EventPlace, 'eventId' | 'streamId' | 'version'>;

export type Trx = Transaction<Database>;

/** A data-modifying statement a projector gives for its batch (see `project`). */
export type Statement = OperationNodeSource;

/**
 * What `project` answers, within an append's statement, for a batch it can only project in a
 * transaction (it must read rows first): the append then runs in a transaction, and `project` is
 * called again there with the transaction.
 */
export const IN_TRANSACTION = 'in transaction';
export type InTransaction = typeof IN_TRANSACTION;

/** Where a batch is projected, as `project` is told it. */
export interface Projection {
  /**
   * The condition a stream's rows change under. Within an append's statement: that the stream's
   * version claim succeeded (its events were inserted); in a transaction: always. `stream` is the
   * stream's id, as a value, or as a column of a statement's rows when one statement changes the
   * rows of several streams (a commit group's).
   */
  appended(stream: string | Expression<string>): Expression<SqlBool>;
  /**
   * The transaction, when the batch is projected in one (an append's, after its insert; an async
   * batch; a rebuild; an import): the projector may read rows, and write, in it before it answers.
   * Without one, its statements go within an append's one statement, which reads nothing first: a
   * projector that must read answers IN_TRANSACTION.
   */
  trx?: Trx;
}

/**
 * What `project` answers: its statements (run together, each seeing the rows as they were before
 * them), IN_TRANSACTION (only without a transaction), or, with a transaction, its statements once it
 * has read (and written) what it needed.
 */
export type Projected = readonly Statement[] | InTransaction | Promise<readonly Statement[]>;

/** `project` of a set of projectors (`inlineProjection` in projection-runner.ts), as the event store takes it. */
export type Project<E extends NewEvent = DomainEvent> = (
  events: readonly Pending<E>[],
  at: Projection,
) => Projected;

/** What every projector has; `E`: the events it handles, exactly those `handles` names. */
interface ProjectorBase<E extends NewEvent> {
  /** Bump the version in it to rebuild from scratch. */
  readonly name: string;
  readonly handles: readonly E['type'][];
  /** The tables it owns: emptied before a rebuild, compared by the rebuild tests. */
  readonly tables: readonly (keyof ReadModelTables)[];
}

/**
 * A read model written in the append's transaction, or within its one statement, so reads see the
 * write at once.
 */
export interface InlineProjector<E extends NewEvent = DomainEvent> extends ProjectorBase<E> {
  readonly mode: 'inline';
  /**
   * What a batch of events changes: events of one stream or of several, each stream's consecutive
   * and in version order, given only those of the types it handles. Its statements leave what
   * projecting the events one by one leaves, although every statement sees the rows as they were
   * before the batch. Each changes a stream's rows only where `at.appended` of that stream holds.
   * Within an append's statement (no `at.trx`) it answers at once: statements, whose number need not
   * grow with the batch (a commit group's rows as rows of one parameter), or IN_TRANSACTION.
   */
  project(events: readonly Pending<E>[], at: Projection): Projected;
}

/**
 * A read model that follows the log from a checkpoint stored in the same transaction as its rows; also
 * a subscription that turns events into work (webhook deliveries, planned jobs): rows written with its
 * checkpoint, then `afterCommit`.
 */
export interface AsyncProjector<E extends NewEvent = DomainEvent> extends ProjectorBase<E> {
  readonly mode: 'async';
  /**
   * What a batch read from the log changes, always in a transaction (`at.trx`): what projecting its
   * events one by one would leave.
   */
  project(events: readonly Stored<E>[], at: Projection): Projected;
  /**
   * Called with a batch's events once its transaction has committed (to hand the rows it wrote to a
   * queue, say). A failure is logged and not retried: the batch is done, so whatever this does must
   * also be done by a sweep that reads the rows.
   */
  afterCommit?(events: readonly Stored<E>[]): Promise<void>;
}

/** A read model: the events it handles and what a batch of them changes. */
export type Projector<E extends NewEvent = DomainEvent> = InlineProjector<E> | AsyncProjector<E>;

/** Whether the projector handles events of this type. */
export function handles(projector: Projector<NewEvent>, type: string): boolean {
  const types: readonly string[] = projector.handles;
  return types.includes(type);
}

/** Every change, when applied in a transaction (no append to wait for). */
export const ALWAYS: Expression<SqlBool> = sql<SqlBool>`true`;

/** A transaction's place: every stream's rows change. */
export function inTransaction(trx: Trx): Projection {
  return { appended: () => ALWAYS, trx };
}

/** A projector's batch in a transaction: `project`, then its statements. */
export async function projectInTransaction<E extends NewEvent>(
  projector: Projector<E>,
  events: readonly Stored<E>[],
  trx: Trx,
): Promise<void> {
  if (events.length === 0) return;
  await runProjected(trx, await projector.project(events, inTransaction(trx)), projector.name);
}

/** Runs what `project` answered in a transaction; IN_TRANSACTION there is a projector's mistake. */
export async function runProjected(
  trx: Trx,
  projected: readonly Statement[] | InTransaction,
  name = 'the inline projections',
): Promise<void> {
  if (projected === IN_TRANSACTION) throw new Error(`${name} answered IN_TRANSACTION in a transaction`);
  await runTogether(trx, projected);
}

/** What `project` answered without a transaction: statements or IN_TRANSACTION, never a promise. */
export function inStatement(
  projected: Projected,
  name = 'the inline projections',
): readonly Statement[] | InTransaction {
  if (projected instanceof Promise) throw new Error(`${name} answered a promise without a transaction`);
  return projected;
}

/**
 * Runs data-modifying statements as one (each a WITH query of it): all see the rows as they were
 * before it, as in the append's statement.
 */
export async function runTogether(trx: Trx, statements: readonly Statement[]): Promise<void> {
  if (statements.length === 0) return;
  const parts = statements.map((statement, index) => sql`${sql.raw(`s${index}`)} as (${statement})`);
  await sql`with ${sql.join(parts)} select`.execute(trx);
}

/** The events of a batch by stream, each stream's in their order: a commit group's runs. */
export function runsOf<P extends Pending<NewEvent>>(events: readonly P[]): P[][] {
  return [...Map.groupBy(events, (event) => event.streamId).values()];
}

/** A stream id as a column of a statement's rows (`r.stream_id`), for `Projection.appended`. */
export const ROW_STREAM: RawBuilder<string> = sql<string>`r.stream_id`;

/**
 * `project` of a projector whose every event is a few statements of its own that read nothing (a row
 * inserted, a column set). Within an append's statement: one event's statements; several events,
 * which could depend on each other's writes, go in a transaction. In a transaction: each event's
 * statements in turn.
 */
export function eachEvent<E extends NewEvent>(
  statementsOf: (event: Pending<E>, when: Expression<SqlBool>) => Statement[],
): (events: readonly Pending<E>[], at: Projection) => Projected {
  return (events, at) => {
    const { trx } = at;
    if (trx !== undefined) {
      return (async () => {
        for (const event of events) await runTogether(trx, statementsOf(event, ALWAYS));
        return [];
      })();
    }
    const [only] = events;
    if (only === undefined) return [];
    return events.length === 1 ? statementsOf(only, at.appended(only.streamId)) : IN_TRANSACTION;
  };
}

/**
 * `project` of a projector that writes its batch itself, in a transaction (it reads as it goes: an
 * async read model, a subscription): never within an append's statement.
 */
export function inTransactionOnly<S extends Pending<NewEvent>>(
  apply: (events: readonly S[], trx: Trx) => Promise<void>,
): (events: readonly S[], at: Projection) => Projected {
  return (events, at) => {
    const { trx } = at;
    if (trx === undefined) return IN_TRANSACTION;
    return apply(events, trx).then(() => []);
  };
}
