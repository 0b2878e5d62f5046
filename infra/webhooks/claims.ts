import { type RawBuilder, sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { spansOn } from '../telemetry/spans.ts';

/*
 * The claim on a webhook delivery (`webhook_deliveries.claimed_until`): the statements that take one,
 * give one back, say why one could not be taken, and count an account's claims. A claim is only ever
 * its endpoint's head (its oldest pending delivery, by `seq`). How long a claim lasts and how many an
 * account may hold (its share) are the delivery engine's (apps/application/webhook-claiming.ts).
 */

/**
 * How many deliveries of an account are claimed now (being sent), but for those of endpoint `except`.
 * A claim is only ever its endpoint's head, so each endpoint's head is looked at (one index probe each,
 * an account has at most WEBHOOK_ENDPOINTS_MAX endpoints), not its pending deliveries.
 */
export function claimedOf(
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

/** A delivery claimed for sending, with what sending it needs. */
export type ClaimedDelivery = {
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
 * Claims a delivery until `until` with one conditional update: it is pending and due at `now`, its
 * endpoint enabled, it is the endpoint's head, no one holds it (or their claim lapsed), and its account
 * has fewer than `share` deliveries claimed. Either a given delivery or an endpoint's head. The head is
 * found by `min(seq)` on the partial index of pending deliveries: one index probe, however many are
 * pending. Claims of one account made at the same moment do not see each other's.
 */
export async function claimDelivery(
  db: Db,
  which: { deliveryId: string } | { endpointId: string },
  at: { now: Date; until: Date; share: number },
): Promise<ClaimedDelivery | undefined> {
  const { now, until, share } = at;
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
  const { rows } = await sql<ClaimedDelivery>`
    update webhook_deliveries d set claimed_until = ${until}
    from webhook_endpoints e
    where ${target}
      and e.id = d.endpoint_id and e.enabled
      and d.status = 'pending'
      and d.next_attempt_at <= ${now}
      and (d.claimed_until is null or d.claimed_until <= ${now})
      and ${claimedOf(sql.ref('d.account_id'), now, sql.ref('d.endpoint_id'))} < ${share}
    returning d.id, d.endpoint_id, d.account_id, d.event_id, d.payload, d.attempts, e.url, e.secret,
      e.failing_since, d.claimed_until, d.created_at, ${traceparentOf(sql.ref('d.event_id'))} as traceparent,
      (select count(*)::integer from webhook_endpoints n where n.account_id = d.account_id) as endpoints`.execute(
    db,
  );
  return rows[0];
}

/**
 * Gives a claim back when its account has more than `share` deliveries claimed at `now`, counted now
 * that the claim is committed: true when it did. Of claims of one account made together, the last to
 * commit sees all the others.
 */
export async function releaseOverShare(
  db: Db,
  held: Pick<ClaimedDelivery, 'id' | 'account_id' | 'claimed_until'>,
  now: Date,
  share: number,
): Promise<boolean> {
  const over = await sql`
    update webhook_deliveries set claimed_until = null
    where id = ${held.id} and claimed_until = ${held.claimed_until}::timestamptz
      and ${claimedOf(held.account_id, now)} > ${share}
    returning id`.execute(db);
  return over.rows.length > 0;
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

/** A delivery's state as far as claiming it goes, read at `now`. */
export type ClaimState = {
  endpoint_id: string;
  status: 'pending' | 'succeeded' | 'failed';
  claimed_until: Date | null;
  next_attempt_at: Date;
  /** Whether its endpoint is enabled. */
  enabled: boolean;
  /** Whether an older delivery of its endpoint is pending (it is not the head). */
  behind: boolean;
  /** How many deliveries of its account are claimed, but for its endpoint's. */
  claimed: number;
};

/** What stands between a delivery and its claim, or undefined when there is no such delivery. */
export function claimStateOf(db: Db, deliveryId: string, now: Date): Promise<ClaimState | undefined> {
  return db
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
}

/**
 * The account's other enabled endpoints (all but `except`) whose head is due at `now` and unclaimed,
 * the longest due first (ties by id).
 */
export async function waitingEndpointsOf(
  db: Db,
  accountId: string,
  except: string,
  now: Date,
): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    select o.id
    from webhook_endpoints o
    join lateral (
      select h.next_attempt_at, h.claimed_until from webhook_deliveries h
      where h.endpoint_id = o.id and h.status = 'pending'
      order by h.seq limit 1
    ) h on true
    where o.account_id = ${accountId} and o.enabled and o.id <> ${except}
      and h.next_attempt_at <= ${now}::timestamptz
      and (h.claimed_until is null or h.claimed_until <= ${now}::timestamptz)
    order by h.next_attempt_at, o.id`.execute(db);
  return rows.map((row) => row.id);
}
