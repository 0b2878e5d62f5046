import { jobIdOf } from '../../infra/jobs/queue.ts';
import { type ClaimedDelivery, waitingEndpointsOf } from '../../infra/webhooks/claims.ts';
import { endpointsWithPending, headOf } from '../../infra/webhooks/deliveries.ts';
import { DELIVER_JOB, type DeliverJobData, type DeliveryDeps, deliverJobId } from './webhook-delivery.ts';

/*
 * When an endpoint's next delivery is sent: the job that sends it (a kick), a job for later while its
 * account is at its share (set aside), the account's turn handed over to the endpoints set aside, and
 * the sweep that plans again what a lost job left (webhook-delivery.ts has the whole engine's outline).
 */

/**
 * An endpoint set aside while its account is at its share is tried again by a job at the next multiple
 * of this (one job per window, however often it is set aside meanwhile), should no kick of the
 * account's come first: the safety net for a kick lost with its worker.
 */
export const SHARE_RETRY_MS = 5_000;
/** How long after a claim lapses its take-over job runs: clocks of processes differ a little. */
const CLAIM_LAPSE_MARGIN_MS = 500;

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
export async function setAside(deps: DeliveryDeps, endpointId: string): Promise<void> {
  const after = Math.ceil((deps.now().getTime() + SHARE_RETRY_MS) / SHARE_RETRY_MS) * SHARE_RETRY_MS;
  await kickEndpoint(deps, endpointId, { idParts: ['share', after], after });
}

/**
 * After a job's last send, when its account was at its share as one of the job's claims ended (some of
 * its endpoints may have been set aside meanwhile): kicks the account's other endpoints that wait, due
 * and unclaimed, oldest first, each with a job of its own. Those that find the account at its share
 * again are set aside again. Of the claims that filled the share when an endpoint was set aside, the
 * first to end sees it full: so an endpoint set aside is kicked when a turn is free (or, should that
 * kick be lost, by its own job SHARE_RETRY_MS later).
 */
export async function handOver(deps: DeliveryDeps, ended: ClaimedDelivery): Promise<void> {
  if (!deps.jobs) return;
  const waiting = await waitingEndpointsOf(deps.db, ended.account_id, ended.endpoint_id, deps.now());
  for (const endpointId of waiting) {
    await kickEndpoint(deps, endpointId, { idParts: ['turn', ended.id, ended.attempts + 1] });
  }
}

/**
 * Kicks every enabled endpoint with a pending delivery: what a lost kick, a lost job or a claim lost
 * with its worker left waiting is planned again. Returns how many endpoints it kicked.
 */
export async function sweepWebhooks(deps: DeliveryDeps): Promise<number> {
  const endpoints = await endpointsWithPending(deps.db);
  for (const endpointId of endpoints) await kickEndpoint(deps, endpointId);
  return endpoints.length;
}
