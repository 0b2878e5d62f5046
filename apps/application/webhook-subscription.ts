import type { Stored, Trx } from '../../infra/projection.ts';
import { inTransactionOnly } from '../../infra/projection.ts';
import {
  enabledEndpointsOf,
  endpointsWithLivePending,
  insertDeliveries,
  type SubscribedEndpoint,
} from '../../infra/webhooks/deliveries.ts';
import { createSnapshotMemory, type SnapshotMemory } from '../../projections/article-snapshots.ts';
import { asyncProjector } from '../../projections/projector.ts';
import { type DeliveryDeps, deliveryRow } from './webhook-delivery.ts';
import {
  createMessageMaker,
  type Located,
  WEBHOOK_SOURCE_TYPES,
  type WebhookSource,
} from './webhook-events.ts';
import { kickEndpoint } from './webhook-scheduling.ts';

/*
 * The subscription that makes live webhook deliveries from the log (webhook-delivery.ts has the
 * whole engine's outline).
 */

/** Articles whose folded state (without body, about a kilobyte) the subscription keeps for its next batch. */
const FOLDS_REMEMBERED = 10_000;

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
  const endpoints = await enabledEndpointsOf(trx, accounts);
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
  await insertDeliveries(trx, rows, { live: true });
}

/** Whether an endpoint gets a live message of an event: its type, and the event no older than the endpoint. */
function receives(endpoint: SubscribedEndpoint, l: Located): boolean {
  return endpoint.events.includes(l.type) && Date.parse(l.event.metadata.at) >= endpoint.created_at.getTime();
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
    project: inTransactionOnly((events, trx) => makeLiveDeliveries(deps, events, trx, folds)),
    async afterCommit(events) {
      if (!deps.jobs) return;
      const endpoints = await endpointsWithLivePending(
        deps.db,
        events.map((e) => e.eventId),
      );
      for (const endpointId of endpoints) await kickEndpoint(deps, endpointId);
    },
  });
}
