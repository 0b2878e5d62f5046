import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { type ClaimedDelivery, claimedOf } from './claims.ts';
import type { SendOutcome } from './send.ts';

/*
 * Where an attempt to send a webhook delivery is recorded: the delivery's new state, the attempt's row
 * (`webhook_attempts`) and its endpoint's state, in one statement under the claim it was sent on. What
 * an outcome decides is the delivery engine's (apps/application/webhook-recording.ts).
 */

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
 * Records attempt number `attempt`, made `at`, of a claimed delivery with its outcome and decision, in
 * one statement (its own transaction): the delivery (its claim let go), its attempt and its endpoint
 * (failing no more; or failing since `at` if not already, and turned off when the decision says so,
 * unless it is off already: a person's reason stays). Nothing when the claim lapsed meanwhile (another
 * worker took over): `recorded` false. `countClaimed`: also count the account's claims in the
 * statement's snapshot, before its own update (this claim among them); else `claimed` is 0.
 */
export async function recordAttempt(
  db: Db,
  held: Pick<ClaimedDelivery, 'id' | 'endpoint_id' | 'account_id' | 'claimed_until'>,
  attempt: {
    number: number;
    at: Date;
    outcome: SendOutcome;
    decision: AttemptDecision;
    countClaimed: boolean;
  },
): Promise<{ recorded: boolean; claimed: number }> {
  const { at, outcome, decision } = attempt;
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
  const claimed = attempt.countClaimed ? claimedOf(held.account_id, at) : sql<number>`0`;
  const { rows } = await sql<{ recorded: boolean; claimed: number }>`
    with d as (
      update webhook_deliveries set
        status = ${decision.delivery.status},
        attempts = ${attempt.number}::integer,
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
      select id, ${attempt.number}::integer, ${at}::timestamptz, ${outcome.statusCode}::integer,
        ${outcome.durationMs}::integer, ${outcome.error}::text
      from d
      on conflict (delivery_id, attempt) do nothing
    ), e as (
      update webhook_endpoints set ${endpoint} and exists (select from d)
    )
    select exists (select from d) as recorded, ${claimed} as claimed`.execute(db);
  return { recorded: rows[0]?.recorded === true, claimed: rows[0]?.claimed ?? 0 };
}
