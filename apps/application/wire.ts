import type { Selectable } from 'kysely';
import { z } from 'zod';
import { WEBHOOK_EVENT_TYPES } from '../../domain/vocabulary.ts';
import type {
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
} from '../../infra/db/schema.ts';
import { wireId as id, rfc3339, timestamp } from './contract.ts';

/*
 * The wire objects of CONTRACT.md: each as a zod schema (what the API's routes declare as their
 * responses, the MCP tools as their outputs, and the OpenAPI document is generated from), its type, and
 * the one mapper from its read-model row (or replayed state) that every use case answers with.
 */

/** A webhook event type (CONTRACT "Webhooks"). */
export const WebhookEventType = z.enum(WEBHOOK_EVENT_TYPES).meta({ id: 'WebhookEventType' });

/** Why an endpoint was disabled: it answered 410, it failed for 3 days, or the account turned it off. */
export const WebhookDisabledReason = z.enum(['gone', 'failing', 'account']).meta({
  description:
    '`gone`: the endpoint answered 410 Gone; `failing`: every delivery failed for 3 days; `account`: turned off by the account.',
});

export const WebhookEndpoint = z
  .object({
    id,
    url: z.string().meta({
      description: 'Where deliveries are POSTed: https (http only inside OUTBOUND_ALLOW_NETWORKS).',
    }),
    events: z.array(WebhookEventType).min(1).meta({ description: 'The event types sent to it.' }),
    description: z.string().nullable(),
    enabled: z
      .boolean()
      .meta({ description: 'false: nothing is sent; deliveries wait until it is enabled again.' }),
    disabled_reason: WebhookDisabledReason.nullable(),
    disabled_at: timestamp.nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({
    id: 'WebhookEndpoint',
    description: 'An address the account’s events are sent to.',
    example: {
      id: 'whe_06h01a8m0qhs7q1n0x1d4c3b2a',
      url: 'https://hooks.northside-plumbing.example/content',
      events: ['article.published', 'report.ready'],
      description: 'Publishing notices for the team chat',
      enabled: true,
      disabled_reason: null,
      disabled_at: null,
      created_at: '2026-11-05T14:00:00Z',
      updated_at: '2026-11-05T14:00:00Z',
    },
  });

export const NewWebhookEndpoint = WebhookEndpoint.extend({
  secret: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/)
    .meta({
      description:
        'The signing secret (Standard Webhooks: `whsec_` and base64). Shown in this answer only: keep it to verify `webhook-signature`.',
    }),
}).meta({
  id: 'NewWebhookEndpoint',
  description: 'A new endpoint with its signing secret, which is shown this once.',
  example: {
    id: 'whe_06h01a8m0qhs7q1n0x1d4c3b2a',
    url: 'https://hooks.northside-plumbing.example/content',
    events: ['article.published', 'report.ready'],
    description: 'Publishing notices for the team chat',
    enabled: true,
    disabled_reason: null,
    disabled_at: null,
    created_at: '2026-11-05T14:00:00Z',
    updated_at: '2026-11-05T14:00:00Z',
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  },
});

const WebhookAttempt = z
  .object({
    attempt: z.number().int().min(1),
    at: timestamp,
    status_code: z
      .number()
      .int()
      .nullable()
      .meta({ description: 'The HTTP status answered; null when none came (timeout, refused).' }),
    duration_ms: z.number().int().min(0),
    error: z.string().nullable(),
  })
  .meta({ id: 'WebhookAttempt', description: 'One attempt to send a delivery.' });

export const WebhookDelivery = z
  .object({
    id,
    event_id: z
      .string()
      .meta({ description: 'The message id: the `webhook-id` header and the body’s `id`.' }),
    event_type: WebhookEventType,
    source: z.enum(['live', 'replay', 'redelivery']).meta({
      description:
        '`live`: made when the event happened; `replay`: by a replay; `redelivery`: by a redeliver request.',
    }),
    status: z.enum(['pending', 'succeeded', 'failed']).meta({
      description: '`pending`: to be sent or retried; `failed`: every retry of the schedule failed.',
    }),
    attempts: z.number().int().min(0),
    next_attempt_at: timestamp.meta({ description: 'When it is (or was) to be sent next.' }),
    last_attempt_at: timestamp.nullable(),
    last_status_code: z.number().int().nullable(),
    last_duration_ms: z.number().int().min(0).nullable(),
    last_error: z.string().nullable(),
    delivered_at: timestamp.nullable(),
    created_at: timestamp,
    attempt_log: z.array(WebhookAttempt).meta({ description: 'The latest 10 attempts, newest first.' }),
  })
  .meta({
    id: 'WebhookDelivery',
    description: 'One message to an endpoint, and how sending it went.',
    example: {
      id: 'dlv_06h01b2c3d4e5f6g7h8j9k0m1n',
      event_id: '019a5c3e-8f10-7d2e-9b1a-3c4d5e6f7a8b',
      event_type: 'article.published',
      source: 'live',
      status: 'succeeded',
      attempts: 2,
      next_attempt_at: '2026-11-05T14:00:05Z',
      last_attempt_at: '2026-11-05T14:00:05Z',
      last_status_code: 200,
      last_duration_ms: 84,
      last_error: null,
      delivered_at: '2026-11-05T14:00:05Z',
      created_at: '2026-11-05T14:00:00Z',
      attempt_log: [
        { attempt: 2, at: '2026-11-05T14:00:05Z', status_code: 200, duration_ms: 84, error: null },
        { attempt: 1, at: '2026-11-05T14:00:00Z', status_code: 503, duration_ms: 120, error: 'HTTP 503' },
      ],
    },
  });

export const WebhookReplay = z
  .object({
    replay_id: id,
    queued: z.number().int().min(0).meta({ description: 'How many deliveries the replay queued.' }),
  })
  .meta({
    id: 'WebhookReplay',
    description: 'A replay: the events queued again, after the endpoint’s pending deliveries.',
    example: { replay_id: 'rpl_06h01b2c3d4e5f6g7h8j9k0m1n', queued: 42 },
  });

export type WebhookEndpointOut = z.infer<typeof WebhookEndpoint>;
export type WebhookDeliveryOut = z.infer<typeof WebhookDelivery>;
export type WebhookReplayOut = z.infer<typeof WebhookReplay>;

/** A webhook endpoint as the account sees it: never its secret (only the answer that creates it has that). */
export function webhookEndpointOut(
  row: Omit<Selectable<WebhookEndpointsTable>, 'secret'>,
): WebhookEndpointOut {
  return {
    id: row.id,
    url: row.url,
    events: row.events as WebhookEndpointOut['events'],
    description: row.description,
    enabled: row.enabled,
    disabled_reason: row.disabled_reason as WebhookEndpointOut['disabled_reason'],
    disabled_at: row.disabled_at ? rfc3339(row.disabled_at) : null,
    created_at: rfc3339(row.created_at),
    updated_at: rfc3339(row.updated_at),
  };
}

/** A delivery with its latest attempts (newest first), as the deliveries list shows it. */
export function webhookDeliveryOut(
  row: Omit<Selectable<WebhookDeliveriesTable>, 'payload' | 'seq' | 'claimed_until'>,
  attempts: readonly Selectable<WebhookAttemptsTable>[],
): WebhookDeliveryOut {
  const at = (date: Date | null): string | null => (date ? rfc3339(date) : null);
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type as WebhookDeliveryOut['event_type'],
    source: row.source,
    status: row.status,
    attempts: row.attempts,
    next_attempt_at: rfc3339(row.next_attempt_at),
    last_attempt_at: at(row.last_attempt_at),
    last_status_code: row.last_status_code,
    last_duration_ms: row.last_duration_ms,
    last_error: row.last_error,
    delivered_at: at(row.delivered_at),
    created_at: rfc3339(row.created_at),
    attempt_log: attempts.map((a) => ({
      attempt: a.attempt,
      at: rfc3339(a.at),
      status_code: a.status_code,
      duration_ms: a.duration_ms,
      error: a.error,
    })),
  };
}
