import type { Db } from '../../infra/db/schema.ts';
import type { JobSink } from '../../infra/jobs/queue.ts';

/*
 * Webhook deliveries: the subscription that makes them from the log, the job that sends them, the
 * sweep, and replays. (Signatures fixed here for the endpoint use cases; the bodies are being built.)
 */

export type DeliveryDeps = { db: Db; jobs?: JobSink | undefined; now: () => Date };

/** Adds the job that sends the endpoint's next pending delivery, if it has one and is enabled. */
export async function kickEndpoint(_deps: DeliveryDeps, _endpointId: string): Promise<void> {
  throw new Error('not built yet');
}

/**
 * Queues again, as `replay` deliveries after the endpoint's pending ones, every event of the
 * endpoint's types and account recorded at or after `from`; returns the replay's id and how many
 * deliveries it queued.
 */
export async function replayEndpoint(
  _deps: DeliveryDeps,
  _endpoint: { id: string; account_id: string; events: readonly string[] },
  _from: Date,
): Promise<{ replayId: string; queued: number }> {
  throw new Error('not built yet');
}
