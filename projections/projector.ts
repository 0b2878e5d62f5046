import type { DomainEvent, EventType } from '../domain/events.ts';
import type { AsyncProjector, InlineProjector } from '../infra/projection.ts';

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

/** An async projector of exactly the events `handles` lists (see `inlineProjector`). */
export function asyncProjector<const T extends EventType>(
  projector: AsyncProjector<EventOf<T>> & { readonly handles: readonly T[] },
): AsyncProjector<EventOf<T>> {
  return projector;
}

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
