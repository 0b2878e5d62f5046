import type { z } from 'zod';
import { type AccountEvent, AccountEventSchemas } from './account/events.ts';
import { type ActivityEvent, ActivityEventSchemas } from './activity/events.ts';
import { type ArticleEvent, ArticleEventSchemas } from './article/events.ts';
import { type BacklinkEvent, BacklinkEventSchemas } from './backlink/events.ts';
import { DomainError } from './errors.ts';
import { type ReportEvent, ReportEventSchemas } from './report/events.ts';
import { type SiteEvent, SiteEventSchemas } from './site/events.ts';

/** Every event the service stores, with the schema the event store validates it by on append. */
const EventSchemas = {
  ...AccountEventSchemas,
  ...SiteEventSchemas,
  ...BacklinkEventSchemas,
  ...ArticleEventSchemas,
  ...ActivityEventSchemas,
  ...ReportEventSchemas,
} as const;

export type DomainEvent =
  | AccountEvent
  | SiteEvent
  | BacklinkEvent
  | ArticleEvent
  | ActivityEvent
  | ReportEvent;
export type EventType = DomainEvent['type'];

// The inferred schema type and the hand-written union must agree, in both directions.
type Inferred = { [K in keyof typeof EventSchemas]: z.infer<(typeof EventSchemas)[K]> }[EventType];
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _schemasMatchUnion: Same<Inferred, DomainEvent> = true;
void _schemasMatchUnion;

/** Throws `invalid_request` naming the first problem when an event does not match its schema. */
export function validateEvent(event: { type: string; data: unknown; metadata: unknown }): void {
  const schema = (EventSchemas as Record<string, z.ZodType | undefined>)[event.type];
  if (!schema) throw new DomainError('invalid_request', `Unknown event type ${event.type}`);
  const result = schema.safeParse(event);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new DomainError(
      'invalid_request',
      `Invalid ${event.type}: ${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`,
      result.error.issues.map((i) => ({ field: i.path.join('.'), message: i.message })),
    );
  }
}
