import { WEBHOOK_DISABLE_AFTER_DAYS } from '../../domain/vocabulary.ts';
import { type AttemptDecision, recordAttempt } from '../../infra/webhooks/attempts.ts';
import type { ClaimedDelivery } from '../../infra/webhooks/claims.ts';
import type { SendOutcome } from '../../infra/webhooks/send.ts';
import { ACCOUNT_SHARE, type SendDeps } from './webhook-delivery.ts';

/*
 * What an attempt's outcome does to its delivery and its endpoint, and its record (webhook-delivery.ts
 * has the whole engine's outline).
 */

export type { AttemptDecision } from '../../infra/webhooks/attempts.ts';

/** Share of a retry's delay taken off at random, so that deliveries failed together do not retry together. */
export const RETRY_JITTER = 0.1;

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

/**
 * Records an attempt and its decision, in one statement under the claim it was sent on; false when the
 * claim had lapsed and another worker took over. `atShare`: the account had its share claimed, this
 * claim included, as it ended (counted only for an account with more endpoints than its share): some
 * of its endpoints may have been set aside.
 */
export async function record(
  deps: SendDeps,
  held: ClaimedDelivery,
  outcome: SendOutcome,
  at: Date,
): Promise<{ recorded: boolean; decision: AttemptDecision; atShare: boolean }> {
  const decision = decideAttempt({
    statusCode: outcome.statusCode,
    attemptsBefore: held.attempts,
    retrySchedule: deps.retrySchedule,
    failingSince: held.failing_since,
    now: at,
    random: deps.random ?? Math.random,
  });
  const { recorded, claimed } = await recordAttempt(deps.db, held, {
    number: held.attempts + 1,
    at,
    outcome,
    decision,
    countClaimed: held.endpoints > ACCOUNT_SHARE,
  });
  return { recorded, decision, atShare: claimed >= ACCOUNT_SHARE };
}

/** An attempt recorded, in the metrics: by its result, and the delivery's delay when it was delivered. */
export function countAttempt(
  deps: SendDeps,
  held: ClaimedDelivery,
  decision: AttemptDecision,
  at: Date,
): void {
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
