import { z } from 'zod';
import { Actor, type Event, eventSchema } from '../event.ts';
import { NAME_MAX } from '../input.ts';

/** An HTTP status, as a record keeps it. */
export const STATUS_MIN = 100;
export const STATUS_MAX = 599;
/** Length of a client's own `X-Request-Id` kept with a record. */
export const CLIENT_REQUEST_ID_MAX = 128;
/** Length, in characters, of what support staff search accounts by. */
export const STAFF_QUERY_MAX = 320;

/**
 * Where an activity record came from: a revision's origins (`editor`: an article change on the web
 * pages), `web` (any other change on the pages: keys, webhooks, password, assistants), and the service
 * itself and support staff (`system`).
 */
export const ActivitySource = z.enum(['api', 'mcp', 'editor', 'web', 'rewrite', 'system']);
export type ActivitySource = z.infer<typeof ActivitySource>;

/**
 * One call through a face of the service (API, MCP, web), rejected calls included: the records of the
 * log's earlier events, one event a call; calls are recorded as `CallsRecorded` now.
 */
export const CallRecordedData = z.object({
  activityId: z.string().min(1),
  accountId: z.string().min(1),
  source: ActivitySource,
  actor: Actor,
  operation: z.string().min(1).max(NAME_MAX),
  siteId: z.string().nullable(),
  articleId: z.string().nullable(),
  /** The article revision the call created; absent when it created none (and in records older than the field). */
  revision: z.number().int().min(1).optional(),
  status: z.number().int().min(STATUS_MIN).max(STATUS_MAX),
  /** The service's id of the request (`req_...`); in records older than `clientRequestId`, possibly the client's. */
  requestId: z.string().nullable(),
  /**
   * The client's own `X-Request-Id`, kept apart from the request id (null when it sent none); absent in
   * records made when a client's id could be taken as the request id.
   */
  clientRequestId: z.string().max(CLIENT_REQUEST_ID_MAX).nullable().optional(),
  durationMs: z.number().int().min(0),
});

/** One call of `CallsRecorded`: a call's record without its account (the event's), with its time. */
export const RecordedCall = CallRecordedData.omit({ accountId: true }).extend({
  at: z.iso.datetime({ offset: true }),
});

/**
 * Calls through the faces of the service of one account, recorded together (the activity log's batch:
 * one event for the calls of a moment, so that the log and its indexes grow by one row a batch, not
 * one a call).
 */
export const CallsRecordedData = z.object({
  accountId: z.string().min(1),
  calls: z.array(RecordedCall).min(1),
});

/** The most accounts a support search lists. */
export const STAFF_SEARCH_MAX = 50;

/**
 * A support staff member's search for accounts, for the staff-side audit: who searched for what, and
 * which accounts it listed (each of those has a `staff_search` record in its own activity log too).
 */
export const StaffSearchedData = z.object({
  searchId: z.string().min(1),
  staff: Actor,
  query: z.string().max(STAFF_QUERY_MAX),
  accountIds: z.array(z.string().min(1)).max(STAFF_SEARCH_MAX),
  requestId: z.string().nullable(),
});

export const ActivityEventSchemas = {
  CallRecorded: eventSchema('CallRecorded', CallRecordedData),
  CallsRecorded: eventSchema('CallsRecorded', CallsRecordedData),
  StaffSearched: eventSchema('StaffSearched', StaffSearchedData),
} as const;
export type CallRecorded = Event<'CallRecorded', z.infer<typeof CallRecordedData>>;
export type CallsRecorded = Event<'CallsRecorded', z.infer<typeof CallsRecordedData>>;
export type RecordedCall = z.infer<typeof RecordedCall>;
export type StaffSearched = Event<'StaffSearched', z.infer<typeof StaffSearchedData>>;
export type ActivityEvent = CallRecorded | CallsRecorded | StaffSearched;

/** Calls of one account: appended with expected version `any`, ordered by the global log. */
export const activityStream = (accountId: string): string => `activity-${accountId}`;
/** Searches of one staff member: appended with expected version `any`. */
export const staffSearchStream = (staffId: string): string => `staffsearch-${staffId}`;
