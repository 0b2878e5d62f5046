import { z } from 'zod';

/** Where a revision, or an activity record, came from. */
export const Origin = z.enum(['api', 'mcp', 'editor', 'rewrite']);
export type Origin = z.infer<typeof Origin>;

/** Who did it: an API key, an OAuth client, a signed-in user, or the service itself. */
export const Actor = z.object({
  type: z.enum(['api_key', 'oauth_client', 'user', 'staff', 'system']),
  id: z.string().min(1),
  name: z.string(),
});
export type Actor = z.infer<typeof Actor>;

/** The metadata every command carries in: the time and the causing request; domain code reads no clock. */
export const EventMetadata = z.object({
  at: z.iso.datetime({ offset: true }),
  requestId: z.string().optional(),
  /**
   * The W3C trace context (`traceparent`) of the traced work that decided the event, when the service
   * traces (docs/operations.md, "Traces"): what the work the event causes later links to.
   */
  traceparent: z
    .string()
    .regex(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/)
    .optional(),
});
export type EventMetadata = z.infer<typeof EventMetadata>;

/** A domain event: `type` in the past tense, `data` validated by its zod schema at the boundary. */
export type Event<Type extends string, Data> = {
  readonly type: Type;
  readonly data: Data;
  readonly metadata: EventMetadata;
};

/** A command: what a caller asks for, with the time and actor in it. */
export type Command<Type extends string, Data> = {
  readonly type: Type;
  readonly data: Data;
  readonly metadata: EventMetadata;
};

/** Builds the schema of one event from the zod schema of its data. */
export function eventSchema<const T extends string, D extends z.ZodType>(type: T, data: D) {
  return z.object({ type: z.literal(type), data, metadata: EventMetadata });
}
