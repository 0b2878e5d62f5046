import type { Transaction } from 'kysely';
import type { DomainEvent, EventType } from '../domain/events.ts';
import type { Database } from '../infra/db/schema.ts';
import type { StoredEvent } from '../infra/event-store.ts';

/** A domain event as read back from the store: its data narrowed by type, with its place in the log. */
export type Stored<E extends DomainEvent = DomainEvent> = E &
  Pick<StoredEvent, 'position' | 'transactionId' | 'eventId' | 'streamId' | 'version'>;

export type Trx = Transaction<Database>;

/**
 * A read model: the events it handles and how one event changes its rows. `inline` projectors run in
 * the append's transaction (read-your-writes); `async` ones follow the log from a checkpoint stored in
 * the same transaction as their rows. Bump the version in `name` to rebuild from scratch.
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
