import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNT_SHARE } from '../../apps/application/webhook-delivery.ts';
import { kickEndpoint } from '../../apps/application/webhook-scheduling.ts';
import { deliverWebhooks } from '../../apps/application/webhook-sending.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { articleStream } from '../../domain/article/events.ts';
import { WEBHOOK_ENDPOINTS_MAX } from '../../domain/vocabulary.ts';
import { catchUp } from '../../infra/projection-runner.ts';
import type { Backend } from '../support/db.ts';
import { apiKeyActor, createTestRuntime } from '../support/runtime.ts';
import {
  addEndpoint,
  type Engine,
  loopbackSender,
  newAccount,
  newArticle,
  type QueueKind,
  type Received,
  type Receiver,
  sleep,
  startEngine,
  startReceiver,
  until,
} from './helpers.ts';

/*
 * The delivery engine end to end: events appended by the command handlers, the `webhooks@1`
 * subscription making deliveries, the deliver job sending them to a real HTTP server on 127.0.0.1
 * through the SSRF guard, on BullMQ (real Redis, a prefix of its own) and on the in-process queue, and
 * on the embedded database (PGlite) with the in-process queue as the embedded default runs it. With
 * fairness between accounts (docs/webhooks.md "Fair share"): an account whose endpoints all hang holds
 * at most its share of the queue's workers, so another account's delivery goes out while they hang.
 */

const combinations: [Backend, QueueKind][] = [
  ['postgres', 'in-process'],
  ['postgres', 'bullmq'],
  ['pglite', 'in-process'],
];

const ids = (received: readonly Received[]): string[] => received.map((r) => String(r.headers['webhook-id']));

describe.each(combinations)('webhook delivery on %s with the %s queue', (backend, queue) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let receiver: Receiver;
  let engine: Engine | undefined;

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await engine?.stop();
    engine = undefined;
  });
  afterAll(async () => {
    await receiver?.close();
    await drop?.();
  });

  const at = (pathname: string): Received[] => receiver.received.filter((r) => r.path === pathname);
  const endpointRow = (id: string) =>
    runtime.db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const deliveriesOf = (endpointId: string) =>
    runtime.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('endpoint_id', '=', endpointId)
      .orderBy('seq')
      .execute();
  const attemptsOf = (deliveryId: string) =>
    runtime.db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('delivery_id', '=', deliveryId)
      .orderBy('attempt')
      .execute();
  const eventIdOf = async (articleId: string, version: number): Promise<string> => {
    const row = await runtime.db
      .selectFrom('events')
      .select('event_id')
      .where('stream_id', '=', articleStream(articleId))
      .where('version', '=', version)
      .executeTakeFirstOrThrow();
    return row.event_id;
  };

  it('signs each delivery so that the Standard Webhooks library verifies it; the id is the event id', async () => {
    engine = await startEngine(runtime, queue);
    const { accountId, siteId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/signed'),
      events: ['article.created'],
    });
    const articleId = await newArticle(runtime, accountId, siteId);
    await until(() => at('/signed').length === 1, 'the delivery');

    const [request] = at('/signed');
    if (!request) throw new Error('nothing received');
    expect(request.headers['content-type']).toBe('application/json');
    const verified = new Webhook(endpoint.secret).verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    }) as { id: string; type: string; data: { id: string; revision: number } };
    const eventId = await eventIdOf(articleId, 1);
    expect(verified.id).toBe(eventId);
    expect(request.headers['webhook-id']).toBe(eventId);
    expect(verified.type).toBe('article.created');
    expect(verified.data).toMatchObject({ id: articleId, revision: 1 });
    // The body's fields in the documented order.
    expect(Object.keys(JSON.parse(request.body))).toEqual(['id', 'type', 'created_at', 'data']);
    expect(Object.keys(JSON.parse(request.body).data)).toEqual([
      ...['id', 'site_id', 'title', 'url', 'status', 'published_at', 'target_keyword', 'word_count'],
      ...['featured_image', 'revision', 'updated_at', 'origin', 'actor'],
    ]);
    // Another secret does not verify it.
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`).verify(request.body, {
        'webhook-id': String(request.headers['webhook-id']),
        'webhook-timestamp': String(request.headers['webhook-timestamp']),
        'webhook-signature': String(request.headers['webhook-signature']),
      }),
    ).toThrow();

    await until(async () => (await deliveriesOf(endpoint.id))[0]?.status === 'succeeded', 'the record');
    const [delivery] = await deliveriesOf(endpoint.id);
    expect(delivery).toMatchObject({ source: 'live', attempts: 1, last_status_code: 204, last_error: null });
    expect(delivery?.delivered_at).toBeInstanceOf(Date);
    expect(delivery?.claimed_until).toBeNull();
    expect(await attemptsOf(delivery?.id ?? '')).toMatchObject([
      { attempt: 1, status_code: 204, error: null },
    ]);
  });

  it('retries a failing receiver on the schedule: it fails twice and takes the third attempt', async () => {
    engine = await startEngine(runtime, queue, { retrySchedule: [1, 1] });
    const { accountId, siteId } = await newAccount(runtime);
    receiver.on('/flaky', (before) => [500, 503][before] ?? 200);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/flaky'),
      events: ['article.created'],
    });
    await newArticle(runtime, accountId, siteId);
    await until(
      async () => (await deliveriesOf(endpoint.id))[0]?.status === 'succeeded',
      'the third attempt',
    );

    const requests = at('/flaky');
    expect(requests).toHaveLength(3);
    // The same message id on every attempt, each attempt signed anew.
    expect(new Set(ids(requests)).size).toBe(1);
    const [delivery] = await deliveriesOf(endpoint.id);
    expect(delivery).toMatchObject({ attempts: 3, last_status_code: 200 });
    const attempts = await attemptsOf(delivery?.id ?? '');
    expect(attempts.map((a) => a.status_code)).toEqual([500, 503, 200]);
    // Retries wait their delay (1 s, less at most 10 % of jitter).
    for (let i = 1; i < attempts.length; i++) {
      const gap = (attempts[i]?.at.getTime() ?? 0) - (attempts[i - 1]?.at.getTime() ?? 0);
      expect(gap).toBeGreaterThanOrEqual(850);
    }
    // It answered in the end: it is failing no more.
    expect((await endpointRow(endpoint.id)).failing_since).toBeNull();
  });

  it('keeps log order per endpoint while its oldest delivery retries', async () => {
    engine = await startEngine(runtime, queue, { retrySchedule: [1, 1] });
    const { accountId, siteId } = await newAccount(runtime);
    let failing: string | undefined;
    receiver.on('/ordered', (_before, request) => {
      const id = String(request.headers['webhook-id']);
      failing ??= id;
      return id === failing && at('/ordered').filter((r) => r.headers['webhook-id'] === id).length <= 2
        ? 500
        : 200;
    });
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/ordered'),
      events: ['article.created', 'article.updated'],
    });
    const articleId = await newArticle(runtime, accountId, siteId, 'First');
    const write = { origin: 'api' as const, actor: apiKeyActor };
    await runtime.commands.editArticle(accountId, articleId, { title: 'Second' }, write);
    await runtime.commands.editArticle(accountId, articleId, { title: 'Third' }, write);
    const other = await newArticle(runtime, accountId, siteId, 'Fourth');
    const logOrder = [
      await eventIdOf(articleId, 1),
      await eventIdOf(articleId, 2),
      await eventIdOf(articleId, 3),
      await eventIdOf(other, 1),
    ];
    await until(
      async () => (await deliveriesOf(endpoint.id)).every((d) => d.status === 'succeeded'),
      'all four',
    );
    await until(() => at('/ordered').length === 6, 'six requests');

    const [first, ...rest] = logOrder;
    expect(ids(at('/ordered'))).toEqual([first, first, first, ...rest]);
    expect((await deliveriesOf(endpoint.id)).map((d) => d.event_id)).toEqual(logOrder);
  });

  it('disables an endpoint that answers 410 at once, and sends it nothing more', async () => {
    const { accountId, siteId } = await newAccount(runtime);
    receiver.on('/gone', () => 410);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/gone'),
      events: ['article.created'],
    });
    await newArticle(runtime, accountId, siteId);
    await newArticle(runtime, accountId, siteId);
    // Started after both events: one batch makes both deliveries (an event the subscription reaches
    // after the endpoint is disabled makes none, as it should, and the test would not see it).
    engine = await startEngine(runtime, queue, { retrySchedule: [1, 1] });
    await until(async () => !(await endpointRow(endpoint.id)).enabled, 'the endpoint disabled');

    const row = await endpointRow(endpoint.id);
    expect(row).toMatchObject({ enabled: false, disabled_reason: 'gone' });
    expect(row.disabled_at).toBeInstanceOf(Date);
    // Past the retry's time, and swept: nothing more is sent; both messages wait for a re-enable.
    await sleep(1_500);
    await engine.sweep();
    await sleep(300);
    expect(at('/gone')).toHaveLength(1);
    const deliveries = await deliveriesOf(endpoint.id);
    expect(deliveries.map((d) => [d.status, d.attempts])).toEqual([
      ['pending', 1],
      ['pending', 0],
    ]);
  });

  it('disables an endpoint that has been failing for 3 days at its next failure', async () => {
    engine = await startEngine(runtime, queue, { retrySchedule: [1, 1, 1] });
    const { accountId, siteId } = await newAccount(runtime);
    receiver.on('/down', () => 500);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/down'),
      events: ['article.created'],
    });
    await newArticle(runtime, accountId, siteId);
    await until(async () => (await deliveriesOf(endpoint.id))[0]?.attempts === 1, 'the first failure');
    const failingSince = (await endpointRow(endpoint.id)).failing_since;
    expect(failingSince).toBeInstanceOf(Date);
    expect((await endpointRow(endpoint.id)).enabled).toBe(true);

    // Three days pass before the retry.
    engine.advance(3 * 86_400_000);
    await until(async () => !(await endpointRow(endpoint.id)).enabled, 'the endpoint disabled');
    const row = await endpointRow(endpoint.id);
    expect(row).toMatchObject({ disabled_reason: 'failing', failing_since: failingSince });
    const [delivery] = await deliveriesOf(endpoint.id);
    expect(delivery).toMatchObject({ status: 'pending', attempts: 2 });
    await sleep(1_500);
    expect(at('/down')).toHaveLength(2);
  });

  it('a failure before 3 days have passed does not disable', async () => {
    engine = await startEngine(runtime, queue, { retrySchedule: [1, 1] });
    const { accountId, siteId } = await newAccount(runtime);
    receiver.on('/wobbly', () => 500);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/wobbly'),
      events: ['article.created'],
    });
    await newArticle(runtime, accountId, siteId);
    await until(async () => (await deliveriesOf(endpoint.id))[0]?.attempts === 1, 'the first failure');
    engine.advance(3 * 86_400_000 - 60_000);
    await until(
      async () => (await deliveriesOf(endpoint.id))[0]?.status === 'failed',
      'the schedule used up',
    );
    expect(await deliveriesOf(endpoint.id)).toMatchObject([{ status: 'failed', attempts: 3 }]);
    expect(await endpointRow(endpoint.id)).toMatchObject({ enabled: true, disabled_reason: null });
  });

  it('goes on with the next delivery after one failed for good', async () => {
    engine = await startEngine(runtime, queue, { retrySchedule: [] });
    const { accountId, siteId } = await newAccount(runtime);
    receiver.on('/once', (before) => (before === 0 ? 500 : 204));
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/once'),
      events: ['article.created'],
    });
    await newArticle(runtime, accountId, siteId);
    await newArticle(runtime, accountId, siteId);
    await until(async () => (await deliveriesOf(endpoint.id))[1]?.status === 'succeeded', 'the second one');
    expect((await deliveriesOf(endpoint.id)).map((d) => [d.status, d.attempts])).toEqual([
      ['failed', 1],
      ['succeeded', 1],
    ]);
  });

  it('sends again at once when an endpoint is enabled again, though its job found it disabled', async () => {
    engine = await startEngine(runtime, queue, { retrySchedule: [1] });
    const { accountId, siteId } = await newAccount(runtime);
    receiver.on('/paused', (before) => (before === 0 ? 500 : 204));
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/paused'),
      events: ['article.created'],
    });
    await newArticle(runtime, accountId, siteId);
    await until(async () => (await deliveriesOf(endpoint.id))[0]?.attempts === 1, 'the first failure');
    // Turned off by the account before the retry: the retry's job runs and sends nothing.
    const setEnabled = (enabled: boolean) =>
      runtime.db
        .updateTable('webhook_endpoints')
        .set({ enabled, disabled_reason: enabled ? null : 'account', updated_at: new Date() })
        .where('id', '=', endpoint.id)
        .execute();
    await setEnabled(false);
    await sleep(1_500);
    expect(at('/paused')).toHaveLength(1);
    // On again: the kick the endpoint use case makes sends it now, not when the queue forgets the old job.
    await setEnabled(true);
    await kickEndpoint({ db: runtime.db, now: engine.now, jobs: engine.jobs }, endpoint.id);
    await until(
      async () => (await deliveriesOf(endpoint.id))[0]?.status === 'succeeded',
      'the delivery',
      5_000,
    );
    expect(at('/paused')).toHaveLength(2);
  });

  it('delivers, once, what a crash between the subscription and its kick left: the sweep kicks it', async () => {
    engine = await startEngine(runtime, queue, { subscription: false });
    const { accountId, siteId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/swept'),
      events: ['article.created'],
    });
    await newArticle(runtime, accountId, siteId);
    // The batch commits its deliveries, and the process dies before its after-commit kick.
    const { afterCommit: _, ...crashing } = engine.subscription;
    await catchUp(runtime.db, crashing);
    expect(await deliveriesOf(endpoint.id)).toMatchObject([{ status: 'pending', attempts: 0 }]);
    await sleep(300);
    expect(at('/swept')).toHaveLength(0);

    // The sweep (at start, every minute), twice at once, and a kick from elsewhere: one request.
    await Promise.all([
      engine.sweep(),
      engine.sweep(),
      kickEndpoint({ db: runtime.db, now: engine.now, jobs: engine.jobs }, endpoint.id),
    ]);
    await until(async () => (await deliveriesOf(endpoint.id))[0]?.status === 'succeeded', 'the delivery');
    await engine.sweep();
    await sleep(500);
    expect(at('/swept')).toHaveLength(1);
  });

  it('sends a delivery whose claim lapsed with its worker', async () => {
    engine = await startEngine(runtime, queue);
    const { accountId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/lapsed'),
      events: ['article.created'],
      enabled: false,
    });
    // A worker claimed it and died: its claim runs out 30 s after it was taken.
    await addEndpointDelivery(endpoint.id, accountId);
    await runtime.db
      .updateTable('webhook_deliveries')
      .set({ claimed_until: new Date(engine.now().getTime() + 30_000) })
      .where('endpoint_id', '=', endpoint.id)
      .execute();
    await runtime.db
      .updateTable('webhook_endpoints')
      .set({ enabled: true })
      .where('id', '=', endpoint.id)
      .execute();
    await engine.sweep();
    await sleep(300);
    expect(at('/lapsed')).toHaveLength(0);
    engine.advance(31_000);
    await engine.sweep();
    await until(() => at('/lapsed').length === 1, 'the delivery');
    await until(async () => (await deliveriesOf(endpoint.id))[0]?.status === 'succeeded', 'the record');
  });

  it('a job runs its delivery when due: it waits a moment for one about due, leaves one due later to its own job, takes over a lapsing claim', async () => {
    const { accountId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: receiver.url('/timely'),
      events: ['article.created'],
    });
    const deps = { db: runtime.db, now: () => new Date(), send: loopbackSender(), retrySchedule: [1] };
    const set = (values: { next_attempt_at?: Date; claimed_until?: Date | null }) =>
      runtime.db
        .updateTable('webhook_deliveries')
        .set(values)
        .where('endpoint_id', '=', endpoint.id)
        .execute();

    const id = await addEndpointDelivery(endpoint.id, accountId);
    // Due in an hour: this job is not its job (an attempt's retry has its own); nothing is sent.
    await set({ next_attempt_at: new Date(Date.now() + 3_600_000) });
    expect(await deliverWebhooks(deps, id)).toBe(0);
    expect(at('/timely')).toHaveLength(0);

    // Claimed by a worker that died a moment ago: the job waits for the claim to lapse, then sends.
    const started = Date.now();
    await set({ next_attempt_at: new Date(), claimed_until: new Date(Date.now() + 600) });
    expect(await deliverWebhooks(deps, id)).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
    expect(at('/timely')).toHaveLength(1);

    // Due in 400 ms (a timer a moment early): it waits, then sends.
    const again = await addEndpointDelivery(endpoint.id, accountId);
    const early = Date.now();
    await runtime.db
      .updateTable('webhook_deliveries')
      .set({ next_attempt_at: new Date(Date.now() + 400) })
      .where('id', '=', again)
      .execute();
    expect(await deliverWebhooks(deps, again)).toBe(1);
    expect(Date.now() - early).toBeGreaterThanOrEqual(350);
    expect(at('/timely')).toHaveLength(2);
  });

  /** Attempts recorded (ended: answered or timed out) of an account's deliveries. */
  const attemptsOfAccount = async (accountId: string): Promise<number> => {
    const row = await runtime.db
      .selectFrom('webhook_attempts as a')
      .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('d.account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  };

  it("another account's delivery goes out while one account's endpoints hang, which hold at most its share of the workers", async () => {
    // The sender's own 10 s timeout: the hanging endpoints are answered by the test, long before it.
    engine = await startEngine(runtime, queue);
    const slow = await newAccount(runtime);
    const other = await newAccount(runtime);

    // The slow account: every endpoint it may have, each holding its request until the test lets go.
    let letGo: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    let hanging = 0;
    let mostHanging = 0;
    const slowPaths = Array.from(
      { length: WEBHOOK_ENDPOINTS_MAX },
      (_, i) => `/fair-${queue}-${backend}-slow-${i}`,
    );
    for (const pathname of slowPaths) {
      receiver.on(pathname, async () => {
        hanging++;
        mostHanging = Math.max(mostHanging, hanging);
        await gate;
        hanging--;
        return 204;
      });
      await addEndpoint(runtime.db, {
        accountId: slow.accountId,
        url: receiver.url(pathname),
        events: ['article.created'],
      });
    }
    // The other account: one endpoint that answers at once, noting how many of the slow account's
    // attempts had ended when its message arrived.
    const otherPath = `/fair-${queue}-${backend}-other`;
    let slowAttemptsEndedAtArrival: number | undefined;
    receiver.on(otherPath, async () => {
      slowAttemptsEndedAtArrival = await attemptsOfAccount(slow.accountId);
      return 204;
    });
    await addEndpoint(runtime.db, {
      accountId: other.accountId,
      url: receiver.url(otherPath),
      events: ['article.created'],
    });

    // The slow account's message to its 10 endpoints first: their jobs are queued before the other's.
    await newArticle(runtime, slow.accountId, slow.siteId);
    await until(() => hanging >= ACCOUNT_SHARE, "the slow account's first sends");
    await newArticle(runtime, other.accountId, other.siteId);
    await until(() => slowAttemptsEndedAtArrival !== undefined, "the other account's delivery", 30_000);

    // It arrived while the slow account's sends were all still hanging: none of them had ended.
    expect(slowAttemptsEndedAtArrival).toBe(0);
    expect(hanging).toBeGreaterThan(0);
    expect(mostHanging).toBeLessThanOrEqual(ACCOUNT_SHARE);

    // Let go: the endpoints set aside get their turn, never more than the share at once; each
    // receives its message once.
    letGo();
    await until(
      () => slowPaths.every((p) => receiver.received.some((r) => r.path === p)),
      "every slow endpoint's message",
      30_000,
    );
    await until(
      async () => (await attemptsOfAccount(slow.accountId)) === WEBHOOK_ENDPOINTS_MAX,
      'the records',
    );
    expect(mostHanging).toBe(ACCOUNT_SHARE);
    for (const pathname of slowPaths) {
      expect(receiver.received.filter((r) => r.path === pathname)).toHaveLength(1);
    }
  });

  /** A pending delivery inserted by hand, as a replay or a redelivery would leave one; returns its id. */
  async function addEndpointDelivery(endpointId: string, accountId: string): Promise<string> {
    const now = engine?.now() ?? new Date();
    const id = `dlv_test${Math.random().toString(36).slice(2)}`;
    await runtime.db
      .insertInto('webhook_deliveries')
      .values({
        id,
        endpoint_id: endpointId,
        account_id: accountId,
        event_id: crypto.randomUUID(),
        event_type: 'article.created',
        payload: JSON.stringify({
          id: 'x',
          type: 'article.created',
          created_at: '2026-11-02T09:30:00Z',
          data: {},
        }),
        source: 'redelivery',
        source_id: null,
        status: 'pending',
        attempts: 0,
        next_attempt_at: now,
        created_at: now,
      })
      .execute();
    return id;
  }
});
