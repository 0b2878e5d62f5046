import { performance } from 'node:perf_hooks';
import { type RawBuilder, sql } from 'kysely';
import {
  WEBHOOK_DISABLE_AFTER_DAYS,
  WEBHOOK_ENDPOINTS_MAX,
  WEBHOOK_TIMEOUT_SECONDS,
} from '../../domain/vocabulary.ts';
import type { Db } from '../../infra/db/schema.ts';
import { type LogPosition, START, storedColumns, toStoredEvent } from '../../infra/event-store.ts';
import { newId } from '../../infra/ids.ts';
import { type JobSink, jobIdOf, QUEUES } from '../../infra/jobs/queue.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { Stored, Trx } from '../../infra/projection.ts';
import { inSpan, linksTo, spansOn } from '../../infra/telemetry/spans.ts';
import type { SendOutcome, SendWebhook } from '../../infra/webhooks/send.ts';
import { createSnapshotMemory, type SnapshotMemory } from '../../projections/article-snapshots.ts';
import { asyncProjector } from '../../projections/projector.ts';
import {
  createMessageMaker,
  inDocumentedOrder,
  type Located,
  sourceTypesOf,
  WEBHOOK_SOURCE_TYPES,
  type WebhookMessage,
  type WebhookSource,
} from './webhook-events.ts';

/*
 * Webhook deliveries (CONTRACT "Webhooks", docs/webhooks.md "Deliveries"): the subscription that makes
 * them from the log, the job that sends them, the sweep, and replays.
 *
 * - The subscription (`webhooks@1`) follows the log like an async projector: per batch, one `live`
 *   delivery per (event, subscribed endpoint), written in the batch's transaction with its checkpoint
 *   (the unique index makes a second one impossible), then a kick of each endpoint that got some.
 * - An endpoint's deliveries go out one at a time, in `seq` order (log order for live ones): a job
 *   claims the endpoint's oldest pending delivery with one conditional update (`claimed_until`), sends
 *   it, records the attempt, and goes on with the next one while one is due, or plans the retry.
 * - Every step can be lost (a process dies, a queue forgets its jobs): the sweep kicks every enabled
 *   endpoint with pending deliveries, at start and every minute, and a claim lapses after 15 s. What a
 *   receiver may see is a message twice (at least once), never out of order on one endpoint.
 * - Fairness between accounts: an account has at most ACCOUNT_SHARE deliveries claimed at once, over
 *   every process (the claim counts them). A job whose delivery's account is at its share does not
 *   wait for it, which would hold one of the queue's workers: it sets the endpoint aside (a job for a
 *   little later) and ends, and the account's job that ends a send while the account was at its share
 *   kicks the endpoints set aside. So one account's slow endpoints hold at most ACCOUNT_SHARE of the
 *   queue's workers, and the other accounts' deliveries are taken by the others meanwhile.
 */

/** What kicking and replaying need. `publicUrl` makes report.ready's `report_url` (a replay of one needs it). */
export type DeliveryDeps = {
  db: Db;
  jobs?: JobSink | undefined;
  now: () => Date;
  publicUrl?: string | undefined;
};

/** What sending needs besides: the sender, the retry schedule (seconds before retry 1, 2, ...), randomness for jitter. */
export type SendDeps = DeliveryDeps & {
  send: SendWebhook;
  retrySchedule: readonly number[];
  random?: () => number;
  logger?: { warn(obj: object, msg: string): void };
  /** The process's metrics: each attempt by its result, and the delay of each delivery made. */
  metrics?:
    | Pick<Metrics, 'webhookAttempts' | 'webhookDeliveryDelay' | 'webhookEndpointsDisabled'>
    | undefined;
};

/** The job that sends an endpoint's next delivery (queue `webhooks`), with data `DeliverJobData`. */
export const DELIVER_JOB = 'webhook.deliver';
/** A deliver job's data: the delivery it was added for (it goes on with the endpoint's next ones). */
export type DeliverJobData = { deliveryId: string };
/** The job that kicks every endpoint with pending deliveries (queue `maintenance`). */
export const SWEEP_JOB = 'webhook.sweep';

/**
 * How long a claim lasts: a send (WEBHOOK_TIMEOUT_SECONDS) and its recording, with room to spare. A
 * claim lost with its worker holds the endpoint this long at most (then its take-over job runs).
 */
export const CLAIM_SECONDS = WEBHOOK_TIMEOUT_SECONDS + 5;
/** A job sends at most this many deliveries of its endpoint in a row, or for this long, then hands over. */
export const CHAIN_MAX_DELIVERIES = 100;
/**
 * How many deliveries of one account may be claimed (being sent) at once, over every process: half of
 * one process's webhook workers, and no more than an account may have endpoints. An account's slow
 * endpoints (10 at most, each attempt up to WEBHOOK_TIMEOUT_SECONDS) leave the other half of every
 * process's workers to the other accounts.
 */
export const ACCOUNT_SHARE = Math.min(
  WEBHOOK_ENDPOINTS_MAX,
  Math.max(1, Math.floor(QUEUES.webhooks.concurrency / 2)),
);
/**
 * An endpoint set aside while its account is at its share is tried again by a job at the next multiple
 * of this (one job per window, however often it is set aside meanwhile), should no kick of the
 * account's come first: the safety net for a kick lost with its worker.
 */
export const SHARE_RETRY_MS = 5_000;
/** Articles whose folded state (without body, about a kilobyte) the subscription keeps for its next batch. */
const FOLDS_REMEMBERED = 10_000;
/** See CHAIN_MAX_DELIVERIES: a long run of one endpoint leaves the queue's other endpoints their turn. */
export const CHAIN_MAX_MS = 10_000;
/** Share of a retry's delay taken off at random, so that deliveries failed together do not retry together. */
export const RETRY_JITTER = 0.1;
/** Events read per step of a replay. */
const REPLAY_BATCH = 500;
/** Rows per multi-row insert. */
const INSERT_ROWS = 500;

/**
 * The job id of an attempt of a delivery: one job per delivery and attempt, so kicking an endpoint
 * again (the sweep, a new event) adds nothing while its job waits. By delivery, not event: a
 * redelivery or replay of a message shares its event id and needs jobs of its own. With the
 * endpoint's version (its `updated_at`): a queue keeps the ids of finished jobs a while (BullMQ: an
 * hour), so a job that found its endpoint disabled would otherwise hold the id the endpoint's
 * re-enabling asks for.
 */
export function deliverJobId(
  endpointId: string,
  deliveryId: string,
  attempt: number,
  endpointVersion: Date,
): string {
  return jobIdOf('webhook', endpointId, deliveryId, attempt, endpointVersion.getTime());
}

// ---------------------------------------------------------------------------------------------------
// The subscription

/** A delivery row as the subscription and replays insert it. */
type NewDelivery = {
  id: string;
  endpoint_id: string;
  account_id: string;
  event_id: string;
  event_type: string;
  payload: string;
  source: 'live' | 'replay';
  source_id: string | null;
  status: 'pending';
  attempts: number;
  next_attempt_at: Date;
  created_at: Date;
};

type EndpointOfAccount = { id: string; account_id: string; events: string[]; created_at: Date };

/**
 * The live deliveries of a batch: for each event in log order, one per enabled endpoint of its account
 * that subscribes to its type and existed when it happened (earlier events come by replay). Written in
 * `trx`, the batch's transaction; the messages are made only for events some endpoint wants.
 */
async function makeLiveDeliveries(
  deps: DeliveryDeps & { publicUrl: string },
  events: readonly Stored<WebhookSource>[],
  trx: Trx,
  folds: SnapshotMemory,
): Promise<void> {
  const maker = createMessageMaker(trx, deps.publicUrl, folds);
  const located = await maker.locate(events);
  const accounts = [...new Set(located.map((l) => l.accountId))];
  if (accounts.length === 0) return;
  const endpoints = await trx
    .selectFrom('webhook_endpoints')
    .select(['id', 'account_id', 'events', 'created_at'])
    .where('enabled', '=', true)
    .where('account_id', 'in', accounts)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  if (endpoints.length === 0) return;
  const byAccount = Map.groupBy(endpoints, (e) => e.account_id);
  const pairs = located.flatMap((l) =>
    (byAccount.get(l.accountId) ?? [])
      .filter((e) => receives(e, l))
      .map((endpoint) => ({ located: l, endpoint })),
  );
  if (pairs.length === 0) return;
  const messages = await maker.messages([...new Set(pairs.map((p) => p.located))]);
  const now = deps.now();
  const rows = pairs.map(({ located: l, endpoint }) =>
    deliveryRow(endpoint, l, messages, { source: 'live', sourceId: null, now }),
  );
  for (let i = 0; i < rows.length; i += INSERT_ROWS) {
    await trx
      .insertInto('webhook_deliveries')
      .values(rows.slice(i, i + INSERT_ROWS))
      // The live-once index's predicate, as a literal: a parameter cannot prove the partial index applies.
      .onConflict((oc) =>
        oc.columns(['endpoint_id', 'event_id']).where(sql<boolean>`source = 'live'`).doNothing(),
      )
      .execute();
  }
}

/** Whether an endpoint gets a live message of an event: its type, and the event no older than the endpoint. */
function receives(endpoint: EndpointOfAccount, l: Located): boolean {
  return endpoint.events.includes(l.type) && Date.parse(l.event.metadata.at) >= endpoint.created_at.getTime();
}

function deliveryRow(
  endpoint: Pick<EndpointOfAccount, 'id' | 'account_id'>,
  l: Located,
  messages: ReadonlyMap<string, WebhookMessage>,
  opts: { source: 'live' | 'replay'; sourceId: string | null; now: Date },
): NewDelivery {
  const message = messages.get(l.event.eventId);
  if (!message) throw new Error(`no message made for event ${l.event.eventId}`);
  return {
    id: newId('dlv', opts.now.getTime()),
    endpoint_id: endpoint.id,
    account_id: endpoint.account_id,
    event_id: l.event.eventId,
    event_type: l.type,
    payload: JSON.stringify(message),
    source: opts.source,
    source_id: opts.sourceId,
    status: 'pending',
    attempts: 0,
    next_attempt_at: opts.now,
    created_at: opts.now,
  };
}

/**
 * The subscription that makes live webhook deliveries from the log: an async projector with no tables
 * (never rebuilt: its rows are work, not a read model), run by the projection runner. Its rows and its
 * checkpoint commit together, so a crash loses nothing and the unique index makes nothing twice; once
 * committed, each endpoint that got deliveries is kicked (and should that be lost, the sweep kicks it).
 */
export function webhookSubscription(deps: DeliveryDeps & { publicUrl: string }) {
  // Where each article's fold ended (webhook-events.ts createMessageMaker), for the next batch.
  const folds = createSnapshotMemory(FOLDS_REMEMBERED);
  return asyncProjector({
    name: 'webhooks@1',
    mode: 'async',
    handles: WEBHOOK_SOURCE_TYPES,
    tables: [],
    async apply(event, trx) {
      await makeLiveDeliveries(deps, [event], trx, folds);
    },
    async applyBatch(events, trx) {
      await makeLiveDeliveries(deps, events, trx, folds);
    },
    async afterCommit(events) {
      if (!deps.jobs) return;
      const ids = events.map((e) => e.eventId);
      const endpoints = new Set<string>();
      for (let i = 0; i < ids.length; i += INSERT_ROWS) {
        const rows = await deps.db
          .selectFrom('webhook_deliveries')
          .select('endpoint_id')
          .distinct()
          .where('source', '=', 'live')
          .where('status', '=', 'pending')
          .where('event_id', 'in', ids.slice(i, i + INSERT_ROWS))
          .execute();
        for (const row of rows) endpoints.add(row.endpoint_id);
      }
      for (const endpointId of endpoints) await kickEndpoint(deps, endpointId);
    },
  });
}

// ---------------------------------------------------------------------------------------------------
// Kicking and sweeping

type Head = {
  id: string;
  attempts: number;
  next_attempt_at: Date;
  claimed_until: Date | null;
  endpoint_updated_at: Date;
};

/** The endpoint's oldest pending delivery, when the endpoint is enabled. */
async function headOf(db: Db, endpointId: string): Promise<Head | undefined> {
  return db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .select([
      'd.id',
      'd.attempts',
      'd.next_attempt_at',
      'd.claimed_until',
      'e.updated_at as endpoint_updated_at',
    ])
    .where('d.endpoint_id', '=', endpointId)
    .where('d.status', '=', 'pending')
    .where('e.enabled', '=', true)
    .orderBy('d.seq')
    .limit(1)
    .executeTakeFirst();
}

/**
 * A kick other than the plain one, with a job id of its own: the plain job's id may have been taken by a
 * job that found the account at its share and ended (a queue keeps finished ids a while).
 * `after`: the job runs no earlier than this (epoch milliseconds).
 */
type Turn = { idParts: readonly (string | number)[]; after?: number };

/**
 * Adds the job that sends the endpoint's next pending delivery, if it has one and is enabled, delayed
 * until the delivery is due (and `turn.after`). When a worker is sending it now, only a job for the
 * moment its claim lapses: that worker goes on or kicks.
 */
export async function kickEndpoint(deps: DeliveryDeps, endpointId: string, turn?: Turn): Promise<void> {
  if (!deps.jobs) return;
  const head = await headOf(deps.db, endpointId);
  if (!head) return;
  const now = deps.now().getTime();
  const data: DeliverJobData = { deliveryId: head.id };
  if (head.claimed_until !== null && head.claimed_until.getTime() > now) {
    // A worker holds it: it goes on with the endpoint when it is done. Should that worker be gone (a
    // process killed mid-send), its claim lapses at claimed_until: a job for that moment takes over,
    // rather than the next sweep up to a minute later. A job of its own: the claimer's id is taken.
    const lapses = head.claimed_until.getTime();
    await deps.jobs.add(DELIVER_JOB, data, {
      jobId: `${deliverJobId(endpointId, head.id, head.attempts + 1, head.endpoint_updated_at)}.lapse.${lapses}`,
      delayMs: Math.max(0, lapses - now) + CLAIM_LAPSE_MARGIN_MS,
    });
    return;
  }
  const jobId = deliverJobId(endpointId, head.id, head.attempts + 1, head.endpoint_updated_at);
  await deps.jobs.add(DELIVER_JOB, data, {
    jobId: turn ? jobIdOf(jobId, ...turn.idParts) : jobId,
    delayMs: Math.max(0, head.next_attempt_at.getTime() - now, (turn?.after ?? 0) - now),
  });
}

/**
 * Sets an endpoint aside while its account is at its share: a job at the next multiple of
 * SHARE_RETRY_MS (the same for every setting aside in that window), should no kick of the account's
 * ({@link handOver}) come first.
 */
async function setAside(deps: DeliveryDeps, endpointId: string): Promise<void> {
  const after = Math.ceil((deps.now().getTime() + SHARE_RETRY_MS) / SHARE_RETRY_MS) * SHARE_RETRY_MS;
  await kickEndpoint(deps, endpointId, { idParts: ['share', after], after });
}

/**
 * How many deliveries of an account are claimed now (being sent), but for those of endpoint `except`.
 * A claim is only ever its endpoint's head, so each endpoint's head is looked at (one index probe each,
 * an account has at most WEBHOOK_ENDPOINTS_MAX endpoints), not its pending deliveries.
 */
function claimedOf(
  account: RawBuilder<unknown> | string,
  now: Date,
  except?: RawBuilder<unknown>,
): RawBuilder<number> {
  return sql<number>`(
    select count(*)::integer from webhook_endpoints o
    where o.account_id = ${account} ${except ? sql`and o.id <> ${except}` : sql``}
      and (
        select h.claimed_until from webhook_deliveries h
        where h.endpoint_id = o.id and h.status = 'pending'
        order by h.seq limit 1
      ) > ${now}::timestamptz
  )`;
}

/**
 * After a job's last send, when its account was at its share as one of the job's claims ended (some of
 * its endpoints may have been set aside meanwhile): kicks the account's other endpoints that wait, due
 * and unclaimed, oldest first, each with a job of its own. Those that find the account at its share
 * again are set aside again. Of the claims that filled the share when an endpoint was set aside, the
 * first to end sees it full: so an endpoint set aside is kicked when a turn is free (or, should that
 * kick be lost, by its own job SHARE_RETRY_MS later).
 */
async function handOver(deps: DeliveryDeps, ended: Claim): Promise<void> {
  if (!deps.jobs) return;
  const now = deps.now();
  const { rows } = await sql<{ id: string }>`
    select o.id
    from webhook_endpoints o
    join lateral (
      select h.next_attempt_at, h.claimed_until from webhook_deliveries h
      where h.endpoint_id = o.id and h.status = 'pending'
      order by h.seq limit 1
    ) h on true
    where o.account_id = ${ended.account_id} and o.enabled and o.id <> ${ended.endpoint_id}
      and h.next_attempt_at <= ${now}::timestamptz
      and (h.claimed_until is null or h.claimed_until <= ${now}::timestamptz)
    order by h.next_attempt_at, o.id`.execute(deps.db);
  for (const row of rows) {
    await kickEndpoint(deps, row.id, { idParts: ['turn', ended.id, ended.attempts + 1] });
  }
}

/** How long after a claim lapses its take-over job runs: clocks of processes differ a little. */
const CLAIM_LAPSE_MARGIN_MS = 500;

/**
 * Kicks every enabled endpoint with a pending delivery: what a lost kick, a lost job or a claim lost
 * with its worker left waiting is planned again. Returns how many endpoints it kicked.
 */
export async function sweepWebhooks(deps: DeliveryDeps): Promise<number> {
  const endpoints = await deps.db
    .selectFrom('webhook_endpoints as e')
    .select('e.id')
    .where('e.enabled', '=', true)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('webhook_deliveries as d')
          .select(sql`1`.as('one'))
          .whereRef('d.endpoint_id', '=', 'e.id')
          .where('d.status', '=', 'pending'),
      ),
    )
    .orderBy('e.id')
    .execute();
  for (const endpoint of endpoints) await kickEndpoint(deps, endpoint.id);
  return endpoints.length;
}

// ---------------------------------------------------------------------------------------------------
// Sending

/** What an attempt's outcome does to its delivery and its endpoint. */
export type AttemptDecision = {
  delivery: {
    status: 'succeeded' | 'pending' | 'failed';
    nextAttemptAt: Date | null;
    deliveredAt: Date | null;
  };
  /** `ok`: the endpoint answered 2xx (it is failing no more); `disable`: why it is turned off now, if it is. */
  endpoint: { ok: boolean; disable: 'gone' | 'failing' | null };
};

/**
 * What an attempt's outcome decides. Pure. A 2xx succeeds. Anything else is a failure: retry n (n =
 * the attempts made so far) waits the schedule's n-th delay less up to RETRY_JITTER of it, and once
 * the schedule is used up the delivery has failed. A 410 disables the endpoint at once; so does a
 * failure when the endpoint has been failing (every attempt since its last success) for
 * WEBHOOK_DISABLE_AFTER_DAYS.
 */
export function decideAttempt(input: {
  statusCode: number | null;
  /** Attempts made before this one. */
  attemptsBefore: number;
  retrySchedule: readonly number[];
  failingSince: Date | null;
  now: Date;
  random: () => number;
}): AttemptDecision {
  const { statusCode, now } = input;
  if (statusCode !== null && statusCode >= 200 && statusCode < 300) {
    return {
      delivery: { status: 'succeeded', nextAttemptAt: null, deliveredAt: now },
      endpoint: { ok: true, disable: null },
    };
  }
  const delaySeconds = input.retrySchedule[input.attemptsBefore];
  const delivery: AttemptDecision['delivery'] =
    delaySeconds === undefined
      ? { status: 'failed', nextAttemptAt: null, deliveredAt: null }
      : {
          status: 'pending',
          nextAttemptAt: new Date(now.getTime() + delaySeconds * 1000 * (1 - input.random() * RETRY_JITTER)),
          deliveredAt: null,
        };
  const failingFor = input.failingSince === null ? 0 : now.getTime() - input.failingSince.getTime();
  const disable =
    statusCode === 410 ? 'gone' : failingFor >= WEBHOOK_DISABLE_AFTER_DAYS * 86_400_000 ? 'failing' : null;
  return { delivery, endpoint: { ok: false, disable } };
}

/** A delivery claimed for sending, with what sending it needs. */
type Claim = {
  id: string;
  endpoint_id: string;
  account_id: string;
  /** How many endpoints the account has: with no more than its share, it can never be over it. */
  endpoints: number;
  event_id: string;
  payload: unknown;
  attempts: number;
  url: string;
  secret: string;
  failing_since: Date | null;
  /** The claim's own mark: recording checks it still holds. */
  claimed_until: Date;
  /** When the delivery was queued (its delay, once delivered, runs from here). */
  created_at: Date;
  /**
   * The W3C trace context of the traced work that made the delivery's event (its metadata's
   * `traceparent`), read only while tracing is on: the delivery's span links to it.
   */
  traceparent: string | null;
};

/**
 * Claims a delivery with one conditional update: it is pending and due, its endpoint enabled, it is
 * the endpoint's head (its oldest pending delivery), no one holds it (or their claim lapsed), and its
 * account has fewer than ACCOUNT_SHARE deliveries claimed. Either a given delivery or an endpoint's
 * head. The head is found by `min(seq)` on the partial index of pending deliveries: one index probe,
 * however many are pending.
 *
 * Claims of one account made at the same moment do not see each other, so for an account with more
 * endpoints than its share a second statement counts again, now that this claim is committed, and
 * lets it go if the account is over its share: of claims made together, the last to commit sees all
 * the others, so the account is never over its share while sending.
 */
async function claim(
  deps: DeliveryDeps,
  which: { deliveryId: string } | { endpointId: string },
): Promise<Claim | undefined> {
  const now = deps.now();
  const until = new Date(now.getTime() + CLAIM_SECONDS * 1000);
  // A given delivery (its unique id), checked to be its endpoint's head; or an endpoint's head (its
  // `seq`, found first: the primary key, not a scan of the endpoint's pending ones).
  const target =
    'deliveryId' in which
      ? sql`d.id = ${which.deliveryId} and d.seq = (
          select min(p.seq) from webhook_deliveries p
          where p.endpoint_id = d.endpoint_id and p.status = 'pending'
        )`
      : sql`d.seq = (
          select min(p.seq) from webhook_deliveries p
          where p.endpoint_id = ${which.endpointId} and p.status = 'pending'
        )`;
  const { rows } = await sql<Claim>`
    update webhook_deliveries d set claimed_until = ${until}
    from webhook_endpoints e
    where ${target}
      and e.id = d.endpoint_id and e.enabled
      and d.status = 'pending'
      and d.next_attempt_at <= ${now}
      and (d.claimed_until is null or d.claimed_until <= ${now})
      and ${claimedOf(sql.ref('d.account_id'), now, sql.ref('d.endpoint_id'))} < ${ACCOUNT_SHARE}
    returning d.id, d.endpoint_id, d.account_id, d.event_id, d.payload, d.attempts, e.url, e.secret,
      e.failing_since, d.claimed_until, d.created_at, ${traceparentOf(sql.ref('d.event_id'))} as traceparent,
      (select count(*)::integer from webhook_endpoints n where n.account_id = d.account_id) as endpoints`.execute(
    deps.db,
  );
  const held = rows[0];
  if (!held || held.endpoints <= ACCOUNT_SHARE) return held;
  const over = await sql`
    update webhook_deliveries set claimed_until = null
    where id = ${held.id} and claimed_until = ${held.claimed_until}::timestamptz
      and ${claimedOf(held.account_id, now)} > ${ACCOUNT_SHARE}
    returning id`.execute(deps.db);
  return over.rows.length === 0 ? held : undefined;
}

/**
 * The `traceparent` of an event's metadata (a delivery's `event_id`) while tracing is on (one index
 * probe of the events' unique key), null when off: what a delivery carries of the trace that caused it.
 */
function traceparentOf(eventId: RawBuilder<unknown>): RawBuilder<string | null> {
  return spansOn()
    ? sql<
        string | null
      >`(select t.metadata->>'traceparent' from events t where t.event_id = ${eventId}::uuid)`
    : sql<null>`null::text`;
}

/** Why a delivery could not be claimed. */
type Unclaimed = 'done' | 'endpoint_off' | 'not_head' | 'busy' | 'not_due' | 'share';

async function whyUnclaimed(
  deps: DeliveryDeps,
  deliveryId: string,
): Promise<{ why: Unclaimed; endpointId?: string; until?: Date }> {
  const now = deps.now();
  const row = await deps.db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .select(['d.endpoint_id', 'd.status', 'd.claimed_until', 'd.next_attempt_at', 'e.enabled'])
    .select(
      sql<boolean>`d.seq > (
        select min(p.seq) from webhook_deliveries p
        where p.endpoint_id = d.endpoint_id and p.status = 'pending'
      )`.as('behind'),
    )
    .select(claimedOf(sql.ref('d.account_id'), now, sql.ref('d.endpoint_id')).as('claimed'))
    .where('d.id', '=', deliveryId)
    .executeTakeFirst();
  if (row?.status !== 'pending') return { why: 'done' };
  if (!row.enabled) return { why: 'endpoint_off' };
  if (row.behind) return { why: 'not_head', endpointId: row.endpoint_id };
  if (row.claimed_until !== null && row.claimed_until > now) {
    return { why: 'busy', endpointId: row.endpoint_id, until: row.claimed_until };
  }
  if (row.next_attempt_at > now) {
    return { why: 'not_due', endpointId: row.endpoint_id, until: row.next_attempt_at };
  }
  if (row.claimed >= ACCOUNT_SHARE) return { why: 'share', endpointId: row.endpoint_id };
  // Free and due a moment ago: claimed by someone else meanwhile, or free again; try again.
  return { why: 'busy', endpointId: row.endpoint_id, until: now };
}

/** The body as sent: the stored message with its fields in the documented order. */
export function messageBody(payload: unknown): string {
  const message = (typeof payload === 'string' ? JSON.parse(payload) : payload) as WebhookMessage;
  return JSON.stringify(inDocumentedOrder(message));
}

/**
 * Records an attempt and its decision; false when the claim had lapsed and another worker took over.
 * `atShare`: the account had its share claimed, this claim included, as it ended (counted only for an
 * account with more endpoints than its share): some of its endpoints may have been set aside.
 */
async function record(
  deps: SendDeps,
  held: Claim,
  outcome: SendOutcome,
  at: Date,
): Promise<{ recorded: boolean; decision: AttemptDecision; atShare: boolean }> {
  const attempt = held.attempts + 1;
  const decision = decideAttempt({
    statusCode: outcome.statusCode,
    attemptsBefore: held.attempts,
    retrySchedule: deps.retrySchedule,
    failingSince: held.failing_since,
    now: at,
    random: deps.random ?? Math.random,
  });
  // The endpoint's side: failing no more; or failing since now if not already, and turned off when
  // the decision says so (unless it is off already: a person's reason stays).
  const endpoint = decision.endpoint.ok
    ? sql`failing_since = null where id = ${held.endpoint_id} and failing_since is not null`
    : decision.endpoint.disable === null
      ? sql`failing_since = coalesce(failing_since, ${at}::timestamptz) where id = ${held.endpoint_id}`
      : sql`failing_since = coalesce(failing_since, ${at}::timestamptz),
          disabled_reason = case when enabled then ${decision.endpoint.disable}::text else disabled_reason end,
          disabled_at = case when enabled then ${at}::timestamptz else disabled_at end,
          updated_at = case when enabled then ${at}::timestamptz else updated_at end,
          enabled = false
        where id = ${held.endpoint_id}`;
  // One statement (its own transaction): the delivery, its attempt and the endpoint, or nothing when
  // the claim lapsed meanwhile (another worker took over). The account's claims are counted in the
  // statement's snapshot, before its own update: this claim among them.
  const claimed = held.endpoints > ACCOUNT_SHARE ? claimedOf(held.account_id, at) : sql<number>`0`;
  const { rows } = await sql<{ recorded: boolean; claimed: number }>`
    with d as (
      update webhook_deliveries set
        status = ${decision.delivery.status},
        attempts = ${attempt}::integer,
        next_attempt_at = ${decision.delivery.nextAttemptAt ?? at}::timestamptz,
        claimed_until = null,
        last_attempt_at = ${at}::timestamptz,
        last_status_code = ${outcome.statusCode}::integer,
        last_duration_ms = ${outcome.durationMs}::integer,
        last_error = ${outcome.error}::text,
        delivered_at = ${decision.delivery.deliveredAt}::timestamptz
      where id = ${held.id} and claimed_until = ${held.claimed_until}::timestamptz
      returning id
    ), a as (
      insert into webhook_attempts (delivery_id, attempt, at, status_code, duration_ms, error)
      select id, ${attempt}::integer, ${at}::timestamptz, ${outcome.statusCode}::integer,
        ${outcome.durationMs}::integer, ${outcome.error}::text
      from d
      on conflict (delivery_id, attempt) do nothing
    ), e as (
      update webhook_endpoints set ${endpoint} and exists (select from d)
    )
    select exists (select from d) as recorded, ${claimed} as claimed`.execute(deps.db);
  const recorded = rows[0]?.recorded === true;
  return { recorded, decision, atShare: (rows[0]?.claimed ?? 0) >= ACCOUNT_SHARE };
}

/** How often a job waiting on another worker's claim looks again, and how long it waits at most. */
const BUSY_POLL_MS = 250;
const BUSY_WAIT_MAX_MS = (CLAIM_SECONDS + 5) * 1000;
/**
 * A claim of another worker's that lapses within this is waited for (its worker is most likely gone: a
 * live one records its send well before its claim lapses). One that lasts longer is not: waiting would
 * hold a worker of the queue for a whole send; its worker goes on or kicks, and a job for the moment
 * the claim lapses covers that worker's loss.
 */
const LAPSE_WAIT_MAX_MS = 1_000;
/**
 * A job that runs this little before its delivery is due (clocks of two machines, a timer a moment
 * early) waits for it; one that runs earlier is not the delivery's job (the attempt it was for was
 * made, and the retry has its own job) and ends.
 */
const EARLY_WAIT_MAX_MS = 5_000;

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Claims the delivery, or finds out why it cannot: done, its endpoint disabled, not the endpoint's
 * head (the head is kicked), due later (waited for when it is a moment away), its account at its share
 * (the endpoint is set aside), or held by another worker: a claim about to lapse is waited for (that
 * worker died) and tried again; a longer one is left to its worker, with a job for when it lapses.
 */
async function claimOrWait(deps: SendDeps, deliveryId: string): Promise<Claim | undefined> {
  const started = performance.now();
  for (;;) {
    const held = await claim(deps, { deliveryId });
    if (held) return held;
    const { why, endpointId, until } = await whyUnclaimed(deps, deliveryId);
    if (why === 'not_head' && endpointId) await kickEndpoint(deps, endpointId);
    if (why === 'share' && endpointId) await setAside(deps, endpointId);
    if (why === 'busy' && endpointId && until && until.getTime() - deps.now().getTime() > LAPSE_WAIT_MAX_MS) {
      await kickEndpoint(deps, endpointId);
      return undefined;
    }
    if (why === 'not_due' && until) {
      const wait = until.getTime() - deps.now().getTime();
      if (wait > EARLY_WAIT_MAX_MS) return undefined;
      await pause(Math.max(1, wait));
      continue;
    }
    if (why !== 'busy') return undefined;
    if (performance.now() - started > BUSY_WAIT_MAX_MS) {
      throw new Error(`webhook delivery ${deliveryId} is still being sent by another worker`);
    }
    await pause(BUSY_POLL_MS);
  }
}

/**
 * The `webhook.deliver` job: claims the delivery, sends it, records the attempt; after a success or a
 * final failure goes on with the endpoint's next delivery while one is due (at most
 * CHAIN_MAX_DELIVERIES or CHAIN_MAX_MS, then kicks); after a failure to retry, kicks (the retry's job,
 * delayed) and stops; after the endpoint was disabled, stops. Once it stops, hands the account's turn
 * over to the account's endpoints set aside, if any. Returns how many it sent.
 */
export async function deliverWebhooks(deps: SendDeps, deliveryId: string): Promise<number> {
  const held = await claimOrWait(deps, deliveryId);
  if (!held) return 0;
  const { sent, last, atShare } = await sendFrom(deps, held);
  if (last && atShare) await handOver(deps, last);
  return sent;
}

/** An attempt recorded, in the metrics: by its result, and the delivery's delay when it was delivered. */
function countAttempt(deps: SendDeps, held: Claim, decision: AttemptDecision, at: Date): void {
  const metrics = deps.metrics;
  if (!metrics) return;
  const status = decision.delivery.status;
  const over = status === 'failed' || decision.endpoint.disable !== null;
  metrics.webhookAttempts.inc({ result: status === 'succeeded' ? 'delivered' : over ? 'failed' : 'retry' });
  if (decision.endpoint.disable !== null) {
    metrics.webhookEndpointsDisabled.inc({ reason: decision.endpoint.disable });
  }
  if (status === 'succeeded') {
    metrics.webhookDeliveryDelay.observe(Math.max(0, at.getTime() - held.created_at.getTime()) / 1000);
  }
}

/**
 * Sends the claimed delivery and goes on with its endpoint (see deliverWebhooks): how many it sent, the
 * last claim it recorded, and whether its account was at its share when one of its claims ended.
 */
async function sendFrom(
  deps: SendDeps,
  first: Claim,
): Promise<{ sent: number; last: Claim | undefined; atShare: boolean }> {
  const started = performance.now();
  let sent = 0;
  let held: Claim | undefined = first;
  let last: Claim | undefined;
  let atShare = false;
  while (held) {
    const claimed: Claim = held;
    const at = deps.now();
    const recorded = await inSpan(
      'deliver webhook',
      {
        // The edit (or other change) that made the message: its trace, from the event's metadata.
        links: linksTo(claimed.traceparent),
        attributes: () => ({
          'content_service.account.id': claimed.account_id,
          'content_service.webhook.endpoint.id': claimed.endpoint_id,
          'content_service.webhook.delivery.id': claimed.id,
          'content_service.webhook.attempt': claimed.attempts + 1,
          'content_service.event.id': claimed.event_id,
        }),
      },
      async (span) => {
        const outcome = await deps.send({
          url: claimed.url,
          secret: claimed.secret,
          id: claimed.event_id,
          timestamp: at,
          body: messageBody(claimed.payload),
        });
        if (outcome.statusCode !== null)
          span.setAttribute('content_service.webhook.status_code', outcome.statusCode);
        const result = await record(deps, claimed, outcome, at);
        span.setAttribute('content_service.webhook.delivery.status', result.decision.delivery.status);
        if (result.decision.delivery.status !== 'succeeded') {
          span.setAttribute(
            'error.type',
            outcome.statusCode === null ? 'no_answer' : String(outcome.statusCode),
          );
        }
        return result;
      },
    );
    const { decision } = recorded;
    sent++;
    if (!recorded.recorded) {
      deps.logger?.warn(
        { delivery_id: held.id },
        'webhook delivery: the claim lapsed while sending; the attempt was not recorded',
      );
      return { sent, last, atShare };
    }
    countAttempt(deps, claimed, decision, at);
    last = held;
    atShare ||= recorded.atShare;
    if (decision.endpoint.disable !== null) return { sent, last, atShare };
    const endpointId: string = held.endpoint_id;
    // Goes on with the endpoint's next delivery if it is due and the run is not over; else a job for it.
    held =
      decision.delivery.status === 'pending' ||
      sent >= CHAIN_MAX_DELIVERIES ||
      performance.now() - started >= CHAIN_MAX_MS
        ? undefined
        : await claim(deps, { endpointId });
    if (!held) await kickEndpoint(deps, endpointId);
  }
  return { sent, last, atShare };
}

/**
 * What the deliveries look like now, for the metrics: enabled endpoints whose last attempt failed
 * (failing since then), and deliveries waiting to be sent.
 */
export async function webhookBacklog(
  db: Db,
): Promise<{ failingEndpoints: number; pendingDeliveries: number }> {
  const [failing, pending] = await Promise.all([
    db
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('enabled', '=', true)
      .where('failing_since', 'is not', null)
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow(),
  ]);
  return { failingEndpoints: Number(failing.n), pendingDeliveries: Number(pending.n) };
}

// ---------------------------------------------------------------------------------------------------
// Replays

/**
 * Queues again, as `replay` deliveries after the endpoint's pending ones, every event of the
 * endpoint's types and account recorded at or after `from`; returns the replay's id and how many
 * deliveries it queued.
 */
export async function replayEndpoint(
  deps: DeliveryDeps,
  endpoint: { id: string; account_id: string; events: readonly string[] },
  from: Date,
): Promise<{ replayId: string; queued: number }> {
  const now = deps.now();
  const replayId = newId('rpl', now.getTime());
  const sources = sourceTypesOf(endpoint.events);
  let queued = 0;
  let after: LogPosition = START;
  while (sources.length > 0) {
    const rows = await deps.db
      .selectFrom('events')
      .select(storedColumns)
      .where('type', 'in', sources)
      .where('recorded_at', '>=', from)
      .where(
        sql<boolean>`(transaction_id, position) > (${String(after.transactionId)}::text::xid8, ${String(after.position)}::bigint)`,
      )
      .where(
        sql<boolean>`(data->>'accountId' = ${endpoint.account_id} or stream_id in (
          select 'article-' || id from articles where account_id = ${endpoint.account_id}))`,
      )
      .orderBy(sql`events.transaction_id`)
      .orderBy(sql`events.position`)
      .limit(REPLAY_BATCH)
      .execute();
    const events = rows.map((row) => toStoredEvent<WebhookSource>(row));
    const last = events.at(-1);
    if (!last) break;
    queued += await queueReplayed(deps, endpoint, events, { replayId, now });
    after = { transactionId: last.transactionId, position: last.position };
    if (events.length < REPLAY_BATCH) break;
  }
  await kickEndpoint(deps, endpoint.id);
  return { replayId, queued };
}

/** One step of a replay: the messages of `events` the endpoint subscribes to, inserted in log order. */
async function queueReplayed(
  deps: DeliveryDeps,
  endpoint: { id: string; account_id: string; events: readonly string[] },
  events: readonly Stored<WebhookSource>[],
  opts: { replayId: string; now: Date },
): Promise<number> {
  return deps.db.transaction().execute(async (trx) => {
    const publicUrl = deps.publicUrl;
    const maker = createMessageMaker(trx, publicUrl ?? '');
    const wanted = (await maker.locate(events)).filter(
      (l) => l.accountId === endpoint.account_id && endpoint.events.includes(l.type),
    );
    if (wanted.length === 0) return 0;
    if (publicUrl === undefined && wanted.some((l) => l.type === 'report.ready')) {
      throw new Error('replaying report.ready messages needs DeliveryDeps.publicUrl (their report_url)');
    }
    const messages = await maker.messages(wanted);
    const rows = wanted.map((l) =>
      deliveryRow(endpoint, l, messages, { source: 'replay', sourceId: opts.replayId, now: opts.now }),
    );
    for (let i = 0; i < rows.length; i += INSERT_ROWS) {
      await trx
        .insertInto('webhook_deliveries')
        .values(rows.slice(i, i + INSERT_ROWS))
        .execute();
    }
    return rows.length;
  });
}
