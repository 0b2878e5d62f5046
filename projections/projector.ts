import {
  type Expression,
  type Kysely,
  type OperationNodeSource,
  type SqlBool,
  sql,
  type Transaction,
} from 'kysely';
import type { DomainEvent, EventType } from '../domain/events.ts';
import type { Database } from '../infra/db/schema.ts';
import type { StoredEvent } from '../infra/event-store.ts';

/** A domain event as read back from the store: its data narrowed by type, with its place in the log. */
export type Stored<E extends DomainEvent = DomainEvent> = E &
  Pick<StoredEvent, 'position' | 'transactionId' | 'eventId' | 'streamId' | 'version'>;

export type Trx = Transaction<Database>;

/** An event about to be appended: its stream version is known (the expected one plus one), its place in the log not yet. */
export type Pending<E extends DomainEvent = DomainEvent> = E &
  Pick<StoredEvent, 'eventId' | 'streamId' | 'version'>;

/** A data-modifying statement a projector adds to the append's own statement (see `statementsFor`). */
export type InlineStatement = OperationNodeSource;

/**
 * A read model: the events it handles and how one event changes its rows. `inline` projectors run in
 * the append's transaction, or within its one statement (`statementsFor`), so reads see the write
 * at once; `async` ones follow the log from a checkpoint stored in the same transaction as their rows. Bump the version in `name` to rebuild from scratch.
 */
export interface Projector {
  readonly name: string;
  readonly mode: 'inline' | 'async';
  readonly handles: readonly EventType[];
  /** The tables it owns: emptied before a rebuild. */
  readonly tables: readonly (keyof Database)[];
  apply(event: Stored, trx: Trx): Promise<void>;
  /**
   * Optional: the same as `apply` on each event in turn, with fewer statements (the async runner
   * uses it for a whole batch when present). It must leave exactly the rows `apply` one by one leaves.
   */
  applyBatch?(events: readonly Stored[], trx: Trx): Promise<void>;
  /**
   * Optional, inline projectors: the same change as `apply` of this event, as data-modifying
   * statements that the append runs within its own statement, after the insert (infra/event-store.ts:
   * one round trip for the event and its inline read models, no transaction held open between
   * statements). Each must change nothing unless `appended` holds (the event was inserted: its
   * version claim succeeded), and must not depend on another's writes: every statement of the append
   * sees the rows as they were before it. Undefined when this event cannot be projected so (then the
   * append runs in a transaction and calls `apply`). `db` only builds the statements.
   */
  statementsFor?(
    event: Pending,
    db: Kysely<Database>,
    appended: Expression<SqlBool>,
  ): InlineStatement[] | undefined;
}

export function asStored(event: StoredEvent): Stored {
  return event as unknown as Stored;
}

export function handles(projector: Projector, type: string): boolean {
  return (projector.handles as readonly string[]).includes(type);
}

/** One page of a list query and the total it was cut from. */
export type Page<T> = { rows: T[]; total: number };
export type PageQuery = { page: number; perPage: number };

export function offsetOf(q: PageQuery): number {
  return (q.page - 1) * q.perPage;
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
