import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import type { Selectable } from 'kysely';
import { z } from 'zod';
import { DomainError, invalidField } from '../../domain/errors.ts';
import { textProblem } from '../../domain/input.ts';
import { WEBHOOK_ENDPOINTS_MAX, WEBHOOK_EVENT_TYPES } from '../../domain/vocabulary.ts';
import type {
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
} from '../../infra/db/schema.ts';
import type { AnswerKey } from '../../infra/idempotency.ts';
import { newId } from '../../infra/ids.ts';
import { isPublicAddress } from '../../infra/net/guarded-fetch.ts';
import { attemptLogs, listDeliveries } from '../../infra/webhooks/deliveries.ts';
import {
  countEndpointsLocked,
  deleteEndpoint,
  type EndpointChange,
  findEndpoint,
  insertEndpoint,
  listEndpoints,
  type RowWindow,
  updateEndpoint,
} from '../../infra/webhooks/endpoints.ts';
import { invalidKeyError, isKeyLive } from '../../projections/accounts.ts';
import { offsetOf } from '../../projections/projector.ts';
import { type Call, type Idempotency, type Outcome, outcomeOf, type Principal } from './call.ts';
import { atMost, wireId as id, idParam, rfc3339, timestamp } from './contract.ts';
import type { ApplicationDeps } from './deps.ts';
import { type Answer, keepingAnswer, onceIfKeyed } from './idempotency.ts';
import { type Listed, type ListQuery, listed, pageOf } from './lists.ts';
import type { DeliveryDeps } from './webhook-delivery.ts';
import { queueRedelivery, replayEndpoint } from './webhook-replay.ts';
import { kickEndpoint } from './webhook-scheduling.ts';

/*
 * The account's webhook endpoints (CONTRACT "Webhooks"): register, list, change, enable or disable,
 * delete; an endpoint's deliveries, a redelivery of one, a replay from a time. Sending is the delivery
 * engine's (webhook-delivery.ts): these use cases have the webhook store (infra/webhooks/) keep what
 * the account asked for, and kick it.
 * Webhooks touch no site, article or revision: their calls' activity records name none.
 */

export type Webhooks = ReturnType<typeof createWebhooks>;

/** The longest webhook URL accepted. */
export const WEBHOOK_URL_MAX = 2048;
/** The longest description of an endpoint. */
export const WEBHOOK_DESCRIPTION_MAX = 500;
/** Attempts shown per delivery: the latest. */
export const WEBHOOK_ATTEMPT_LOG_MAX = 10;

/*
 * The webhooks' contract: endpoints, deliveries and replays as they are asked for (the API's bodies
 * and parameters) and as they are answered (the wire objects and their mappers).
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

/* What the webhook use cases are asked with. */

const urlField = z
  .string({ message: 'must be a URL (a string)' })
  .min(1, 'must not be empty')
  .max(WEBHOOK_URL_MAX, atMost(WEBHOOK_URL_MAX))
  .meta({
    description:
      'Where deliveries are POSTed: an absolute https URL without a user name or password. http only for an ' +
      'internal address the service is configured to reach (OUTBOUND_ALLOW_NETWORKS).',
    examples: ['https://hooks.northside-plumbing.example/content'],
  });
const eventsField = z
  .array(WebhookEventType)
  .min(1, 'must name at least one event type')
  .max(WEBHOOK_EVENT_TYPES.length)
  .meta({ description: 'The event types to receive: at least one, each once.' });
const descriptionField = z
  .string()
  .max(WEBHOOK_DESCRIPTION_MAX, atMost(WEBHOOK_DESCRIPTION_MAX))
  .nullable()
  .meta({
    description: `What the endpoint is for, one line of at most ${WEBHOOK_DESCRIPTION_MAX} characters.`,
  });

export const CreateWebhookBody = z
  .strictObject({ url: urlField, events: eventsField, description: descriptionField.optional() })
  .meta({
    id: 'CreateWebhookEndpoint',
    example: {
      url: 'https://hooks.northside-plumbing.example/content',
      events: ['article.published', 'report.ready'],
      description: 'Publishing notices for the team chat',
    },
  });

export const UpdateWebhookBody = z
  .strictObject({
    url: urlField.optional(),
    events: eventsField.optional(),
    description: descriptionField.optional().meta({ description: 'A new description; null clears it.' }),
    enabled: z
      .boolean()
      .optional()
      .meta({
        description:
          '`false` stops deliveries (reason `account`); `true` enables a disabled endpoint again: its pending ' +
          'deliveries go out in their order.',
      }),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    message: 'give at least one of url, events, description, enabled',
    path: ['url'],
  })
  .meta({ id: 'UpdateWebhookEndpoint', example: { enabled: true } });

export const ReplayBody = z
  .strictObject({
    from: z.iso
      .datetime({ offset: true, message: 'must be an RFC 3339 time, like 2026-11-02T09:30:00Z' })
      .meta({
        description:
          'An RFC 3339 time, not in the future: every event of the endpoint’s types recorded since then is sent again.',
        examples: ['2026-11-02T09:30:00Z'],
      }),
  })
  .meta({ id: 'ReplayWebhookEvents', example: { from: '2026-11-02T09:30:00Z' } });

export const WebhookParams = z.strictObject({
  id: idParam.meta({ description: 'Webhook endpoint id', examples: ['whe_06h01a8m0qhs7q1n0x1d4c3b2a'] }),
});

export const DeliveryParams = z.strictObject({
  id: idParam.meta({ description: 'Webhook endpoint id', examples: ['whe_06h01a8m0qhs7q1n0x1d4c3b2a'] }),
  delivery_id: idParam.meta({ description: 'Delivery id', examples: ['dlv_06h01b2c3d4e5f6g7h8j9k0m1n'] }),
});

/** What registering an endpoint takes. */
export type CreateWebhookInput = {
  url: string;
  events: readonly string[];
  description?: string | null | undefined;
};

/** What a change of an endpoint takes (PATCH): any of these, at least one. */
export type UpdateWebhookInput = EndpointChange;

/** A new endpoint: its wire object and its signing secret, which no other answer carries. */
export type NewWebhookEndpointOut = WebhookEndpointOut & { secret: string };

/** A signing secret in the Standard Webhooks format: `whsec_` and the base64 of 24 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** The host of a URL as an IP address (IPv6 without its brackets), or null for a name. */
function ipLiteralOf(hostname: string): string | null {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return isIP(bare) === 0 ? null : bare;
}

/**
 * Why a URL cannot receive webhooks, or null: it must be absolute, https, without credentials, and
 * within WEBHOOK_URL_MAX. An address given as an IP literal must be one the service may reach: public,
 * or in `allowOutbound` (OUTBOUND_ALLOW_NETWORKS); http only for such a private address. Host names
 * are checked when a delivery connects (the SSRF guard), since what they resolve to may change. Pure.
 */
export function webhookUrlProblem(url: string, allowOutbound?: (ip: string) => boolean): string | null {
  if (url.length > WEBHOOK_URL_MAX) return `must be at most ${WEBHOOK_URL_MAX} characters`;
  if (textProblem(url, { lines: false }) !== null || /\s/.test(url)) {
    return 'must not contain spaces or control characters';
  }
  const parsed = URL.parse(url);
  if (!parsed || !/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    return 'must be an absolute URL, like https://hooks.example.com/content';
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must be an https URL';
  if (parsed.username !== '' || parsed.password !== '') {
    return 'must not contain a user name or password (the deliveries are signed instead)';
  }
  const ip = ipLiteralOf(parsed.hostname);
  const isPrivate = ip !== null && !isPublicAddress(ip);
  if (isPrivate && !(allowOutbound?.(ip) ?? false)) {
    return 'must not be a private, loopback or reserved address (unless the service is configured to reach it)';
  }
  if (parsed.protocol === 'http:' && !isPrivate) {
    return 'must be an https URL (http only for an internal address the service is configured to reach)';
  }
  return null;
}

/** Why a list of event types cannot be subscribed to, or null: at least one, each known, none twice. Pure. */
export function webhookEventsProblem(events: readonly string[]): string | null {
  if (events.length === 0) return 'must name at least one event type';
  const known: readonly string[] = WEBHOOK_EVENT_TYPES;
  const unknown = events.find((e) => !known.includes(e));
  if (unknown !== undefined) {
    return `has ${JSON.stringify(unknown)}, which is not an event type (${WEBHOOK_EVENT_TYPES.join(', ')})`;
  }
  const twice = events.find((e, i) => events.indexOf(e) !== i);
  if (twice !== undefined) return `names ${twice} twice`;
  return null;
}

/** Why a description cannot be kept, or null: one line of text of at most WEBHOOK_DESCRIPTION_MAX characters. Pure. */
export function webhookDescriptionProblem(description: string): string | null {
  if (description.length > WEBHOOK_DESCRIPTION_MAX)
    return `must be at most ${WEBHOOK_DESCRIPTION_MAX} characters`;
  return textProblem(description, { lines: false });
}

/** An RFC 3339 time with a zone (`2026-11-02T09:30:00Z`, `...+01:00`, fractions allowed), or null. Pure. */
export function parseRfc3339(value: string): Date | null {
  const match = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/.exec(
    value,
  );
  if (!match) return null;
  const [, y, mo, d, h, mi, s] = match.map(Number) as number[];
  const date = new Date(value);
  // Date accepts what the calendar does not have (Feb 30 rolls over): the fields must be as written.
  const asWritten = new Date(Date.UTC(y as number, (mo as number) - 1, d as number, h, mi, s));
  if (
    Number.isNaN(date.getTime()) ||
    asWritten.getUTCDate() !== d ||
    asWritten.getUTCMonth() !== (mo as number) - 1 ||
    (h as number) > 23 ||
    (mi as number) > 59 ||
    (s as number) > 59
  ) {
    return null;
  }
  return date;
}

/** Refuses a field with its problem as `invalid_request` naming it, when there is one. */
function refuse(field: string, problem: string | null): void {
  if (problem !== null) throw invalidField(`The ${field} ${problem}`, field, problem);
}

/** Webhooks are the account's own settings: a read-only grant may neither see nor change them (CONTRACT). */
function requireWebhookGrant(principal: Principal): void {
  if (principal.scope !== 'write') {
    throw new DomainError(
      'insufficient_scope',
      'Webhooks need a key with the write scope; this one may read only',
    );
  }
}

function notFound(endpointId: string): DomainError {
  return new DomainError('not_found', `No webhook endpoint ${endpointId}`);
}

/** The rows of a list's page. */
function windowOf(query: ListQuery): RowWindow {
  const page = pageOf(query);
  return { limit: page.perPage, offset: offsetOf(page) };
}

/** The webhook use cases over the application's database, clock, job sink and outbound allow-list. */
export function createWebhooks(
  deps: Pick<ApplicationDeps, 'db' | 'now' | 'jobs' | 'allowOutbound'> &
    Partial<Pick<ApplicationDeps, 'publicUrl'>>,
) {
  const { db } = deps;
  const delivery: DeliveryDeps = { db, jobs: deps.jobs, now: deps.now, publicUrl: deps.publicUrl };

  /** The grant, and the API key confirmed unrevoked when the adapter left that to the use case. */
  async function admit(call: Call): Promise<void> {
    requireWebhookGrant(call.principal);
    const key = call.principal.liveKey;
    if (key !== undefined && !(await isKeyLive(db, key))) throw invalidKeyError();
  }

  /** An endpoint of the call's account; another account's is `not_found`, as one that does not exist. */
  async function endpointOf(call: Call, endpointId: string) {
    const row = await findEndpoint(db, call.principal.accountId, endpointId);
    if (!row) throw notFound(endpointId);
    return row;
  }

  /**
   * Asks the delivery engine to send what the endpoint has pending. The change that called for it is
   * stored by then, and the workers' sweep finds pending deliveries of enabled endpoints within a
   * minute, so a kick that fails (the queue out of reach) does not fail the call: it only delays.
   */
  async function kick(endpointId: string): Promise<void> {
    try {
      await kickEndpoint(delivery, endpointId);
    } catch {
      // Left to the sweep (see above).
    }
  }

  /**
   * An endpoint's change (`update`), its answer kept under `answerKey` in the change's transaction;
   * enabling kicks the pending deliveries once it has committed.
   */
  async function change(
    call: Call,
    endpointId: string,
    input: UpdateWebhookInput,
    answerKey: AnswerKey | undefined,
  ): Promise<WebhookEndpointOut> {
    const { url, events, description, enabled } = input;
    if (url === undefined && events === undefined && description === undefined && enabled === undefined) {
      throw invalidField(
        'Give at least one of url, events, description, enabled',
        'url',
        'give at least one of url, events, description, enabled',
      );
    }
    if (url !== undefined) refuse('url', webhookUrlProblem(url, deps.allowOutbound));
    if (events !== undefined) refuse('events', webhookEventsProblem(events));
    if (description !== undefined && description !== null) {
      refuse('description', webhookDescriptionProblem(description));
    }
    const now = deps.now();
    const answer = await keepingAnswer(db, answerKey, async (trx) => {
      const row = await updateEndpoint(trx, call.principal.accountId, endpointId, input, now);
      if (!row) throw notFound(endpointId);
      return webhookEndpointOut(row);
    });
    if (enabled === true) await kick(endpointId);
    return answer;
  }

  return {
    /**
     * Registers an endpoint: its URL, the event types it receives and a description. The answer is the
     * only one that carries the signing secret. At most WEBHOOK_ENDPOINTS_MAX per account: one more is
     * a `conflict`, counted under a lock of the account's endpoints so that two at once cannot pass it.
     * With an idempotency key, once (apps/application/idempotency.ts): a retry gets the first answer,
     * secret included (the same caller asking again for the answer it may have lost), and no second
     * endpoint.
     */
    create(
      call: Call,
      input: CreateWebhookInput,
      idempotency?: Idempotency,
    ): Promise<Outcome<Answer<NewWebhookEndpointOut>>> {
      return outcomeOf({}, async () => {
        await admit(call);
        const accountId = call.principal.accountId;
        return onceIfKeyed(db, accountId, idempotency, async (answerKey) => {
          refuse('url', webhookUrlProblem(input.url, deps.allowOutbound));
          refuse('events', webhookEventsProblem(input.events));
          const description = input.description ?? null;
          if (description !== null) refuse('description', webhookDescriptionProblem(description));
          const now = deps.now();
          const secret = newWebhookSecret();
          return keepingAnswer(db, answerKey, async (trx) => {
            if ((await countEndpointsLocked(trx, accountId)) >= WEBHOOK_ENDPOINTS_MAX) {
              throw new DomainError(
                'conflict',
                `This account has ${WEBHOOK_ENDPOINTS_MAX} webhook endpoints, the most it may have; delete one to add another`,
              );
            }
            const row = await insertEndpoint(trx, {
              id: newId('whe', now.getTime()),
              account_id: accountId,
              url: input.url,
              events: [...input.events],
              description,
              secret,
              enabled: true,
              disabled_reason: null,
              disabled_at: null,
              failing_since: null,
              created_at: now,
              updated_at: now,
            });
            return { ...webhookEndpointOut(row), secret };
          });
        });
      });
    },

    /** A page of the account's endpoints, oldest first (ties by id). */
    list(call: Call, query: ListQuery): Promise<Outcome<Listed<WebhookEndpointOut>>> {
      return outcomeOf({}, async () => {
        await admit(call);
        const accountId = call.principal.accountId;
        const page = await listEndpoints(db, accountId, windowOf(query));
        return listed(page, query, webhookEndpointOut);
      });
    },

    /** One endpoint of the account; `not_found` otherwise. */
    get(call: Call, endpointId: string): Promise<Outcome<WebhookEndpointOut>> {
      return outcomeOf({}, async () => {
        await admit(call);
        return webhookEndpointOut(await endpointOf(call, endpointId));
      });
    },

    /**
     * Changes an endpoint: its URL, event types and description (null clears it), and whether it is
     * enabled. Disabling an enabled endpoint records `account` as the reason and the time; enabling a
     * disabled one clears the reason, the time and its failure streak, and kicks its pending deliveries,
     * which then go out in their order. Enabling an enabled endpoint, or disabling a disabled one,
     * leaves its state (and its reason) as it was. With an idempotency key, once: a retry gets the
     * first answer and changes nothing (the endpoint as it was then, even if changed since).
     */
    update(
      call: Call,
      endpointId: string,
      input: UpdateWebhookInput,
      idempotency?: Idempotency,
    ): Promise<Outcome<Answer<WebhookEndpointOut>>> {
      return outcomeOf({}, async () => {
        await admit(call);
        return onceIfKeyed(db, call.principal.accountId, idempotency, (answerKey) =>
          change(call, endpointId, input, answerKey),
        );
      });
    },

    /**
     * Deletes an endpoint, and with it its deliveries and their attempts. With an idempotency key, once:
     * a retry is answered as the first was (deleted), not `not_found`.
     */
    remove(call: Call, endpointId: string, idempotency?: Idempotency): Promise<Outcome<Answer<null>>> {
      return outcomeOf({}, async () => {
        await admit(call);
        return onceIfKeyed(db, call.principal.accountId, idempotency, (answerKey) =>
          keepingAnswer(db, answerKey, async (trx) => {
            if (!(await deleteEndpoint(trx, call.principal.accountId, endpointId)))
              throw notFound(endpointId);
            return null;
          }),
        );
      });
    },

    /** A page of an endpoint's deliveries, newest first, each with its latest attempts. */
    deliveries(
      call: Call,
      endpointId: string,
      query: ListQuery,
    ): Promise<Outcome<Listed<WebhookDeliveryOut>>> {
      return outcomeOf({}, async () => {
        await admit(call);
        await endpointOf(call, endpointId);
        const page = await listDeliveries(db, endpointId, windowOf(query));
        const logs = await attemptLogs(
          db,
          page.rows.map((r) => r.id),
          WEBHOOK_ATTEMPT_LOG_MAX,
        );
        return listed(page, query, (r) => webhookDeliveryOut(r, logs.get(r.id) ?? []));
      });
    },

    /**
     * Sends a delivery again: a new delivery (`source: redelivery`, `source_id` the original) with the
     * same message (event id, type and body: receivers deduplicating by `webhook-id` see it as the same
     * message), after the endpoint's pending ones; then kicks the endpoint.
     */
    redeliver(call: Call, endpointId: string, deliveryId: string): Promise<Outcome<WebhookDeliveryOut>> {
      return outcomeOf({}, async () => {
        await admit(call);
        const row = await queueRedelivery(delivery, call.principal.accountId, endpointId, deliveryId);
        if (!row) {
          throw new DomainError('not_found', `No delivery ${deliveryId} of webhook endpoint ${endpointId}`);
        }
        await kick(endpointId);
        return webhookDeliveryOut(row, []);
      });
    },

    /**
     * Replays the endpoint's events from a time (RFC 3339, not in the future): every event of its
     * types recorded since then is queued again as a `replay` delivery, after its pending ones.
     */
    replay(call: Call, endpointId: string, input: { from: string }): Promise<Outcome<WebhookReplayOut>> {
      return outcomeOf({}, async () => {
        await admit(call);
        const from = parseRfc3339(input.from);
        if (from === null) {
          throw invalidField(
            'The from time must be an RFC 3339 time, like 2026-11-02T09:30:00Z',
            'from',
            'must be an RFC 3339 time, like 2026-11-02T09:30:00Z',
          );
        }
        if (from.getTime() > deps.now().getTime()) refuse('from', 'must not be in the future');
        const endpoint = await endpointOf(call, endpointId);
        const { replayId, queued } = await replayEndpoint(delivery, endpoint, from);
        await kick(endpointId);
        return { replay_id: replayId, queued };
      });
    },
  };
}
