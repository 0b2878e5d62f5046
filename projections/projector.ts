import type { DomainEvent, EventType } from '../domain/events.ts';
import {
  type AsyncProjector,
  type InlineProjector,
  inTransactionOnly,
  type Stored,
  type Trx,
} from '../infra/projection.ts';

/** The domain events of the types `T`. */
export type EventOf<T extends EventType> = Extract<DomainEvent, { type: T }>;

/**
 * An inline projector (infra/projection.ts) of exactly the events `handles` lists: its events are
 * typed from that list, so a switch over them ends in a `never` check (`unhandled`).
 */
export function inlineProjector<const T extends EventType>(
  projector: InlineProjector<EventOf<T>> & { readonly handles: readonly T[] },
): InlineProjector<EventOf<T>> {
  return projector;
}

/**
 * An async projector of exactly the events `handles` lists (see `inlineProjector`). It gives `project`,
 * or else `applyBatch`, a batch applied in the runner's transaction, and `apply`, one event applied
 * so: its `project` is then `applyBatch` (which leaves what `apply` of each event in turn leaves).
 */
export function asyncProjector<const T extends EventType>(
  projector: (AsyncProjector<EventOf<T>> | AppliedInTransaction<EventOf<T>>) & {
    readonly handles: readonly T[];
  },
): AsyncProjector<EventOf<T>> {
  if ('project' in projector) return projector;
  const { apply, applyBatch, ...rest } = projector;
  return {
    ...rest,
    project: inTransactionOnly(
      applyBatch ??
        (async (events, trx) => {
          for (const event of events) await apply(event, trx);
        }),
    ),
  };
}

/** An async projector written as its events applied in the runner's transaction (see `asyncProjector`). */
type AppliedInTransaction<E extends EventOf<EventType>> = Omit<AsyncProjector<E>, 'project'> & {
  apply(event: Stored<E>, trx: Trx): Promise<void>;
  applyBatch?(events: readonly Stored<E>[], trx: Trx): Promise<void>;
};

/**
 * The end of a projector's switch over its events: every type it handles has a case (`event` is
 * narrowed to never; for a projector of one event type, its `type` is).
 */
export function unhandled(projector: string, event: never): never {
  throw new Error(`${projector}: unhandled event ${JSON.stringify(event)}`);
}

/** One page of a list query and the total it was cut from. */
export type Page<T> = { rows: T[]; total: number };
export type PageQuery = { page: number; perPage: number };

export function offsetOf(q: PageQuery): number {
  return (q.page - 1) * q.perPage;
}
