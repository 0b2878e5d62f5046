import { type LogPosition, START } from '../../infra/event-store.ts';
import { newId } from '../../infra/ids.ts';
import type { Stored } from '../../infra/projection.ts';
import { type DeliveryRow, insertDeliveries, insertRedelivery } from '../../infra/webhooks/deliveries.ts';
import { readAccountEvents } from '../../infra/webhooks/sources.ts';
import { type DeliveryDeps, deliveryRow } from './webhook-delivery.ts';
import { createMessageMaker, sourceTypesOf, type WebhookSource } from './webhook-events.ts';
import { kickEndpoint } from './webhook-scheduling.ts';

/*
 * Sending messages again (webhook-delivery.ts has the whole engine's outline): a replay queues every
 * event of an endpoint's types from a time, a redelivery one delivery; both after the endpoint's
 * pending ones, with the messages' own event ids.
 */

/** Events read per step of a replay. */
const REPLAY_BATCH = 500;

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
    const events = await readAccountEvents<WebhookSource>(deps.db, {
      accountId: endpoint.account_id,
      types: sources,
      from,
      after,
      limit: REPLAY_BATCH,
    });
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
    await insertDeliveries(trx, rows, { live: false });
    return rows.length;
  });
}

/**
 * Queues a delivery of the account's endpoint again: a new delivery (`source: redelivery`, `source_id`
 * the original) with the same message (event id, type and body), after the endpoint's pending ones.
 * The new delivery, or undefined when the endpoint has no such delivery. The caller kicks the endpoint.
 */
export function queueRedelivery(
  deps: DeliveryDeps,
  accountId: string,
  endpointId: string,
  deliveryId: string,
): Promise<DeliveryRow | undefined> {
  const now = deps.now();
  return insertRedelivery(deps.db, {
    id: newId('dlv', now.getTime()),
    accountId,
    endpointId,
    deliveryId,
    now,
  });
}
