import { performance } from 'node:perf_hooks';
import {
  type ClaimedDelivery,
  claimDelivery,
  claimStateOf,
  releaseOverShare,
} from '../../infra/webhooks/claims.ts';
import { ACCOUNT_SHARE, CLAIM_SECONDS, type DeliveryDeps } from './webhook-delivery.ts';
import { kickEndpoint, setAside } from './webhook-scheduling.ts';

/*
 * Claiming a due delivery for sending (webhook-delivery.ts has the whole engine's outline): one
 * delivery of an endpoint at a time, its head, and at most ACCOUNT_SHARE of an account's at once.
 */

/**
 * Claims a delivery with one conditional update: it is pending and due, its endpoint enabled, it is
 * the endpoint's head (its oldest pending delivery), no one holds it (or their claim lapsed), and its
 * account has fewer than ACCOUNT_SHARE deliveries claimed. Either a given delivery or an endpoint's
 * head.
 *
 * Claims of one account made at the same moment do not see each other, so for an account with more
 * endpoints than its share a second statement counts again, now that this claim is committed, and
 * lets it go if the account is over its share: of claims made together, the last to commit sees all
 * the others, so the account is never over its share while sending.
 */
export async function claim(
  deps: DeliveryDeps,
  which: { deliveryId: string } | { endpointId: string },
): Promise<ClaimedDelivery | undefined> {
  const now = deps.now();
  const until = new Date(now.getTime() + CLAIM_SECONDS * 1000);
  const held = await claimDelivery(deps.db, which, { now, until, share: ACCOUNT_SHARE });
  if (!held || held.endpoints <= ACCOUNT_SHARE) return held;
  return (await releaseOverShare(deps.db, held, now, ACCOUNT_SHARE)) ? undefined : held;
}

/** Why a delivery could not be claimed. */
type Unclaimed = 'done' | 'endpoint_off' | 'not_head' | 'busy' | 'not_due' | 'share';

async function whyUnclaimed(
  deps: DeliveryDeps,
  deliveryId: string,
): Promise<{ why: Unclaimed; endpointId?: string; until?: Date }> {
  const now = deps.now();
  const row = await claimStateOf(deps.db, deliveryId, now);
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
export async function claimOrWait(
  deps: DeliveryDeps,
  deliveryId: string,
): Promise<ClaimedDelivery | undefined> {
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
