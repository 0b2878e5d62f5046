import { z } from 'zod';
import { Actor, type Event, eventSchema, Origin } from '../event.ts';

/** Where an activity record came from: a revision's origins, and the service itself (`system`). */
export const ActivitySource = z.enum([...Origin.options, 'system']);
export type ActivitySource = z.infer<typeof ActivitySource>;

/** One call through a face of the service (API, MCP, web), rejected calls included. */
export const CallRecordedData = z.object({
  activityId: z.string().min(1),
  accountId: z.string().min(1),
  source: ActivitySource,
  actor: Actor,
  operation: z.string().min(1).max(200),
  siteId: z.string().nullable(),
  articleId: z.string().nullable(),
  /** The article revision the call created; absent when it created none (and in records older than the field). */
  revision: z.number().int().min(1).optional(),
  status: z.number().int().min(100).max(599),
  requestId: z.string().nullable(),
  durationMs: z.number().int().min(0),
});

export const ActivityEventSchemas = { CallRecorded: eventSchema('CallRecorded', CallRecordedData) } as const;
export type CallRecorded = Event<'CallRecorded', z.infer<typeof CallRecordedData>>;
export type ActivityEvent = CallRecorded;

/** Calls of one account: appended with expected version `any`, ordered by the global log. */
export const activityStream = (accountId: string): string => `activity-${accountId}`;
