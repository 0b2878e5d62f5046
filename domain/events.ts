import type { z } from 'zod';
import { type AccountEvent, AccountEventSchemas, accountStream, staffStream } from './account/events.ts';
import {
  type ActivityEvent,
  ActivityEventSchemas,
  activityStream,
  staffSearchStream,
} from './activity/events.ts';
import { type ArticleEvent, ArticleEventSchemas, articleStream } from './article/events.ts';
import { type BacklinkEvent, BacklinkEventSchemas, backlinkStream } from './backlink/events.ts';
import { DomainError } from './errors.ts';
import { type ReportEvent, ReportEventSchemas, reportStream } from './report/events.ts';
import { type SiteEvent, SiteEventSchemas, siteStream } from './site/events.ts';

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

/**
 * The stream an event is appended to, read from its data: the commands append each event to the
 * stream of the aggregate it names (a password's to its holder's, a staff search to the searcher's).
 */
export function streamOfEvent(event: DomainEvent): string {
  switch (event.type) {
    case 'AccountOpened':
    case 'ApiKeyCreated':
    case 'ApiKeyRevoked':
      return accountStream(event.data.accountId);
    case 'StaffMemberAdded':
      return staffStream(event.data.staffId);
    case 'PasswordSet':
    case 'PasswordChanged':
      return event.data.holder === 'staff'
        ? staffStream(event.data.holderId)
        : accountStream(event.data.holderId);
    case 'SiteAdded':
      return siteStream(event.data.siteId);
    case 'BacklinkAcquired':
      return backlinkStream(event.data.backlinkId);
    case 'ArticleCreated':
    case 'ArticleEdited':
    case 'FeaturedImageReplaced':
    case 'ArticleRestored':
    case 'ArticleStatusChanged':
      return articleStream(event.data.articleId);
    case 'CallRecorded':
    case 'CallsRecorded':
      return activityStream(event.data.accountId);
    case 'StaffSearched':
      return staffSearchStream(event.data.staff.id);
    case 'MonthlyReportReady':
      return reportStream(event.data.siteId, event.data.period);
    default: {
      const unknown: never = event;
      throw new Error(`unknown event ${JSON.stringify(unknown)}`);
    }
  }
}
