import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SendDeps } from '../../apps/application/webhook-delivery.ts';
import { deliverWebhooks } from '../../apps/application/webhook-sending.ts';
import { webhookSubscription } from '../../apps/application/webhook-subscription.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { createMetrics, type Metrics } from '../../infra/metrics.ts';
import { catchUp } from '../../infra/projection-runner.ts';
import { webhookBacklog } from '../../infra/webhooks/deliveries.ts';
import { backends } from '../support/db.ts';
import { sampleValue } from '../support/metrics.ts';
import { createTestRuntime } from '../support/runtime.ts';
import {
  addEndpoint,
  loopbackSender,
  newAccount,
  newArticle,
  type Receiver,
  startReceiver,
} from './helpers.ts';

/*
 * The webhook instruments: every attempt counted by its result (delivered, retry, failed), the delay of
 * each delivery made, endpoints disabled by reason, and the backlog read at scrape (endpoints failing,
 * deliveries pending). The deliveries are made by the subscription from real events and sent to a
 * real receiver on loopback.
 */

describe.each(backends)('webhook metrics on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let receiver: Receiver;
  let metrics: Metrics;
  let deps: SendDeps;
  const subscription = () =>
    webhookSubscription({ db: runtime.db, now: () => new Date(), publicUrl: 'https://content.example' });

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    receiver = await startReceiver();
    metrics = createMetrics({ defaultMetrics: false });
    // No queue: the test sends each delivery itself, as the deliver job would.
    deps = {
      db: runtime.db,
      now: () => new Date(),
      send: loopbackSender(),
      retrySchedule: [60],
      metrics,
    };
  });
  afterAll(async () => {
    await receiver?.close();
    await drop?.();
  });

  /** A new article of a new account with an endpoint at `path`; the subscription makes its delivery. */
  const deliveryTo = async (path: string): Promise<string> => {
    const { accountId, siteId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url(path),
      events: ['article.created'],
    });
    await newArticle(runtime, accountId, siteId);
    await catchUp(runtime.db, subscription());
    const row = await runtime.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('endpoint_id', '=', endpoint.id)
      .executeTakeFirstOrThrow();
    return row.id;
  };
  const value = async (name: string, labels: Record<string, string> = {}) =>
    sampleValue(await metrics.scrape(), name, labels);

  it('counts a delivered attempt and observes its delay', async () => {
    const id = await deliveryTo('/ok');
    const before = await value('content_service_webhook_delivery_delay_seconds_count');
    expect(await deliverWebhooks(deps, id)).toBe(1);
    expect(await value('content_service_webhook_attempts_total', { result: 'delivered' })).toBe(1);
    expect(await value('content_service_webhook_delivery_delay_seconds_count')).toBe(before + 1);
    expect(await value('content_service_webhook_delivery_delay_seconds_sum')).toBeGreaterThan(0);
  });

  it('counts a failed attempt to retry, and the endpoint failing and its delivery pending in the backlog', async () => {
    receiver.on('/down', () => 503);
    const before = await webhookBacklog(runtime.db);
    const id = await deliveryTo('/down');
    expect(await deliverWebhooks(deps, id)).toBe(1);
    expect(await value('content_service_webhook_attempts_total', { result: 'retry' })).toBe(1);
    expect(await value('content_service_webhook_attempts_total', { result: 'delivered' })).toBe(1);
    const after = await webhookBacklog(runtime.db);
    expect(after.failingEndpoints).toBe(before.failingEndpoints + 1);
    expect(after.pendingDeliveries).toBe(before.pendingDeliveries + 1);
  });

  it('counts an attempt answered 410 as failed and the endpoint disabled as gone', async () => {
    receiver.on('/gone', () => 410);
    const id = await deliveryTo('/gone');
    expect(await deliverWebhooks(deps, id)).toBe(1);
    expect(await value('content_service_webhook_attempts_total', { result: 'failed' })).toBe(1);
    expect(await value('content_service_webhook_endpoints_disabled_total', { reason: 'gone' })).toBe(1);
  });
});
