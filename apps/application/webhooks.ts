import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { type Selectable, sql } from 'kysely';
import { DomainError, invalidField } from '../../domain/errors.ts';
import { textProblem } from '../../domain/input.ts';
import { WEBHOOK_ENDPOINTS_MAX, WEBHOOK_EVENT_TYPES } from '../../domain/vocabulary.ts';
import type { Db, WebhookAttemptsTable } from '../../infra/db/schema.ts';
import type { AnswerKey } from '../../infra/idempotency.ts';
import { newId } from '../../infra/ids.ts';
import { isPublicAddress } from '../../infra/net/guarded-fetch.ts';
import { invalidKeyError, isKeyLive } from '../../projections/accounts.ts';
import { offsetOf } from '../../projections/projector.ts';
import { type Call, type Idempotency, type Outcome, outcomeOf, type Principal } from './call.ts';
import type { ApplicationDeps } from './deps.ts';
import { type Answer, keepingAnswer, onceIfKeyed } from './idempotency.ts';
import { type Listed, type ListQuery, listed, pageOf } from './lists.ts';
import { type DeliveryDeps, kickEndpoint, replayEndpoint } from './webhook-delivery.ts';
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
 * engine's (webhook-delivery.ts): these use cases store what the account asked for and kick it.
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
export type UpdateWebhookInput = {
  url?: string | undefined;
  events?: readonly string[] | undefined;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
};

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

/** An endpoint row as its use cases read it: everything but the secret. */
const ENDPOINT_COLUMNS = [
  'id',
  'account_id',
  'url',
  'events',
  'description',
  'enabled',
  'disabled_reason',
  'disabled_at',
  'failing_since',
  'created_at',
  'updated_at',
] as const;

/** A delivery row as the deliveries list shows it: everything but its payload and claim. */
const DELIVERY_COLUMNS = [
  'id',
  'endpoint_id',
  'account_id',
  'event_id',
  'event_type',
  'source',
  'source_id',
  'status',
  'attempts',
  'next_attempt_at',
  'last_attempt_at',
  'last_status_code',
  'last_duration_ms',
  'last_error',
  'delivered_at',
  'created_at',
] as const;

/** The latest WEBHOOK_ATTEMPT_LOG_MAX attempts of each delivery, newest first, by delivery id. */
async function attemptLogs(
  db: Db,
  deliveryIds: readonly string[],
): Promise<Map<string, Selectable<WebhookAttemptsTable>[]>> {
  const logs = new Map<string, Selectable<WebhookAttemptsTable>[]>();
  if (deliveryIds.length === 0) return logs;
  const rows = await db
    .selectFrom((eb) =>
      eb
        .selectFrom('webhook_attempts')
        .selectAll()
        .select(sql<number>`row_number() over (partition by delivery_id order by attempt desc)`.as('rank'))
        .where('delivery_id', 'in', deliveryIds)
        .as('a'),
    )
    .select(['delivery_id', 'attempt', 'at', 'status_code', 'duration_ms', 'error'])
    .where('rank', '<=', WEBHOOK_ATTEMPT_LOG_MAX)
    .orderBy('delivery_id')
    .orderBy('attempt', 'desc')
    .execute();
  for (const row of rows) {
    const log = logs.get(row.delivery_id) ?? [];
    log.push(row);
    logs.set(row.delivery_id, log);
  }
  return logs;
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
    const row = await db
      .selectFrom('webhook_endpoints')
      .select(ENDPOINT_COLUMNS)
      .where('id', '=', endpointId)
      .where('account_id', '=', call.principal.accountId)
      .executeTakeFirst();
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
      const row = await trx
        .updateTable('webhook_endpoints')
        .set({
          updated_at: now,
          ...(url !== undefined ? { url } : {}),
          ...(events !== undefined ? { events: [...events] } : {}),
          ...(description !== undefined ? { description } : {}),
          ...(enabled === true
            ? {
                enabled: true,
                disabled_reason: null,
                disabled_at: null,
                failing_since: sql<Date | null>`case when enabled then failing_since end`,
              }
            : {}),
          ...(enabled === false
            ? {
                enabled: false,
                disabled_reason: sql<
                  string | null
                >`case when enabled then 'account' else disabled_reason end`,
                disabled_at: sql<Date | null>`case when enabled then ${now}::timestamptz else disabled_at end`,
              }
            : {}),
        })
        .where('id', '=', endpointId)
        .where('account_id', '=', call.principal.accountId)
        .returning(ENDPOINT_COLUMNS)
        .executeTakeFirst();
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
            await sql`select pg_advisory_xact_lock(hashtext(${`webhook-endpoints:${accountId}`}))`.execute(
              trx,
            );
            const { n } = await trx
              .selectFrom('webhook_endpoints')
              .select((eb) => eb.fn.countAll<string>().as('n'))
              .where('account_id', '=', accountId)
              .executeTakeFirstOrThrow();
            if (Number(n) >= WEBHOOK_ENDPOINTS_MAX) {
              throw new DomainError(
                'conflict',
                `This account has ${WEBHOOK_ENDPOINTS_MAX} webhook endpoints, the most it may have; delete one to add another`,
              );
            }
            const row = await trx
              .insertInto('webhook_endpoints')
              .values({
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
              })
              .returning(ENDPOINT_COLUMNS)
              .executeTakeFirstOrThrow();
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
        const page = pageOf(query);
        const [rows, count] = await Promise.all([
          db
            .selectFrom('webhook_endpoints')
            .select(ENDPOINT_COLUMNS)
            .where('account_id', '=', accountId)
            .orderBy('created_at')
            .orderBy('id')
            .limit(page.perPage)
            .offset(offsetOf(page))
            .execute(),
          db
            .selectFrom('webhook_endpoints')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .where('account_id', '=', accountId)
            .executeTakeFirstOrThrow(),
        ]);
        return listed({ rows, total: Number(count.n) }, query, webhookEndpointOut);
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
            const row = await trx
              .deleteFrom('webhook_endpoints')
              .where('id', '=', endpointId)
              .where('account_id', '=', call.principal.accountId)
              .returning('id')
              .executeTakeFirst();
            if (!row) throw notFound(endpointId);
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
        const page = pageOf(query);
        const [rows, count] = await Promise.all([
          db
            .selectFrom('webhook_deliveries')
            .select(DELIVERY_COLUMNS)
            .where('endpoint_id', '=', endpointId)
            .orderBy('seq', 'desc')
            .limit(page.perPage)
            .offset(offsetOf(page))
            .execute(),
          db
            .selectFrom('webhook_deliveries')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .where('endpoint_id', '=', endpointId)
            .executeTakeFirstOrThrow(),
        ]);
        const logs = await attemptLogs(
          db,
          rows.map((r) => r.id),
        );
        return listed({ rows, total: Number(count.n) }, query, (r) =>
          webhookDeliveryOut(r, logs.get(r.id) ?? []),
        );
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
        const now = deps.now();
        const id = newId('dlv', now.getTime());
        const row = await db
          .insertInto('webhook_deliveries')
          .columns([
            'id',
            'endpoint_id',
            'account_id',
            'event_id',
            'event_type',
            'payload',
            'source',
            'source_id',
            'status',
            'attempts',
            'next_attempt_at',
            'created_at',
          ])
          .expression((eb) =>
            eb
              .selectFrom('webhook_deliveries')
              .select((s) => [
                sql.val(id).as('id'),
                'endpoint_id',
                'account_id',
                'event_id',
                'event_type',
                'payload',
                sql.lit('redelivery').as('source'),
                'id as source_id',
                sql.lit('pending').as('status'),
                sql.lit(0).as('attempts'),
                s.val(now).as('next_attempt_at'),
                s.val(now).as('created_at'),
              ])
              .where('id', '=', deliveryId)
              .where('endpoint_id', '=', endpointId)
              .where('account_id', '=', call.principal.accountId),
          )
          .returning(DELIVERY_COLUMNS)
          .executeTakeFirst();
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
