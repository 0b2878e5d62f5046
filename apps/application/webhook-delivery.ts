import { WEBHOOK_ENDPOINTS_MAX, WEBHOOK_TIMEOUT_SECONDS } from '../../domain/vocabulary.ts';
import type { Db } from '../../infra/db/schema.ts';
import { newId } from '../../infra/ids.ts';
import { type JobSink, jobIdOf, QUEUES } from '../../infra/jobs/queue.ts';
import type { Metrics } from '../../infra/metrics.ts';
import type { NewDelivery } from '../../infra/webhooks/deliveries.ts';
import type { SendWebhook } from '../../infra/webhooks/send.ts';
import type { Located, WebhookMessage } from './webhook-events.ts';

/*
 * Webhook deliveries (CONTRACT "Webhooks", docs/webhooks.md "Deliveries"): what the delivery engine's
 * parts share. Each part is a file of its own, its statements behind the webhook store (infra/webhooks/):
 *
 * - webhook-subscription.ts: the subscription (`webhooks@1`) follows the log like an async projector:
 *   per batch, one `live` delivery per (event, subscribed endpoint), written in the batch's transaction
 *   with its checkpoint (the unique index makes a second one impossible), then a kick of each endpoint
 *   that got some.
 * - webhook-scheduling.ts: kicking an endpoint (the job for its next delivery), setting it aside,
 *   handing an account's turn over, the sweep.
 * - webhook-claiming.ts: an endpoint's deliveries go out one at a time, in `seq` order (log order for
 *   live ones): a job claims the endpoint's oldest pending delivery with one conditional update
 *   (`claimed_until`), or finds out why it cannot.
 * - webhook-sending.ts: the job sends it (infra/webhooks/send.ts signs and posts), has the attempt
 *   recorded, and goes on with the next one while one is due, or plans the retry.
 * - webhook-recording.ts: what an attempt's outcome decides, and its record.
 * - webhook-replay.ts: a replay from a time, and a redelivery of one delivery.
 *
 * Every step can be lost (a process dies, a queue forgets its jobs): the sweep kicks every enabled
 * endpoint with pending deliveries, at start and every minute, and a claim lapses after 15 s. What a
 * receiver may see is a message twice (at least once), never out of order on one endpoint.
 *
 * Fairness between accounts: an account has at most ACCOUNT_SHARE deliveries claimed at once, over
 * every process (the claim counts them). A job whose delivery's account is at its share does not wait
 * for it, which would hold one of the queue's workers: it sets the endpoint aside (a job for a little
 * later) and ends, and the account's job that ends a send while the account was at its share kicks the
 * endpoints set aside. So one account's slow endpoints hold at most ACCOUNT_SHARE of the queue's
 * workers, and the other accounts' deliveries are taken by the others meanwhile.
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

/** A new pending delivery of an event's message to an endpoint, due `now`: live, or of a replay. */
export function deliveryRow(
  endpoint: { id: string; account_id: string },
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
