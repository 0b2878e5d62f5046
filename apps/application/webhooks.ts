import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { DomainError, invalidField } from '../../domain/errors.ts';
import { textProblem } from '../../domain/input.ts';
import { WEBHOOK_ENDPOINTS_MAX, WEBHOOK_EVENT_TYPES } from '../../domain/vocabulary.ts';
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
import type { ApplicationDeps } from './deps.ts';
import { type Answer, keepingAnswer, onceIfKeyed } from './idempotency.ts';
import { type Listed, type ListQuery, listed, pageOf } from './lists.ts';
import type { DeliveryDeps } from './webhook-delivery.ts';
import { queueRedelivery, replayEndpoint } from './webhook-replay.ts';
import { kickEndpoint } from './webhook-scheduling.ts';
import {
  type WebhookDeliveryOut,
  type WebhookEndpointOut,
  type WebhookReplayOut,
  webhookDeliveryOut,
  webhookEndpointOut,
} from './wire.ts';

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
