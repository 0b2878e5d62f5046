import { performance } from 'node:perf_hooks';
import { inSpan, linksTo } from '../../infra/telemetry/spans.ts';
import type { ClaimedDelivery } from '../../infra/webhooks/claims.ts';
import { claim, claimOrWait } from './webhook-claiming.ts';
import type { SendDeps } from './webhook-delivery.ts';
import { inDocumentedOrder, type WebhookMessage } from './webhook-events.ts';
import { countAttempt, record } from './webhook-recording.ts';
import { handOver, kickEndpoint } from './webhook-scheduling.ts';

/*
 * The `webhook.deliver` job: sending an endpoint's claimed deliveries, one after the other
 * (webhook-delivery.ts has the whole engine's outline). The sender (infra/webhooks/send.ts) signs the
 * message and posts it through the SSRF guard; this says what is sent, when, and what follows.
 */

/** A job sends at most this many deliveries of its endpoint in a row, or for this long, then hands over. */
export const CHAIN_MAX_DELIVERIES = 100;
/** See CHAIN_MAX_DELIVERIES: a long run of one endpoint leaves the queue's other endpoints their turn. */
export const CHAIN_MAX_MS = 10_000;

/** The body as sent: the stored message with its fields in the documented order. */
export function messageBody(payload: unknown): string {
  const message = (typeof payload === 'string' ? JSON.parse(payload) : payload) as WebhookMessage;
  return JSON.stringify(inDocumentedOrder(message));
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

/**
 * Sends the claimed delivery and goes on with its endpoint (see deliverWebhooks): how many it sent, the
 * last claim it recorded, and whether its account was at its share when one of its claims ended.
 */
async function sendFrom(
  deps: SendDeps,
  first: ClaimedDelivery,
): Promise<{ sent: number; last: ClaimedDelivery | undefined; atShare: boolean }> {
  const started = performance.now();
  let sent = 0;
  let held: ClaimedDelivery | undefined = first;
  let last: ClaimedDelivery | undefined;
  let atShare = false;
  while (held) {
    const claimed: ClaimedDelivery = held;
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
