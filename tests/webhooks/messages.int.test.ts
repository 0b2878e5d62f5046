import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { articleListItemOut } from '../../apps/application/articles.ts';
import { replayEndpoint } from '../../apps/application/webhook-replay.ts';
import { webhookSubscription } from '../../apps/application/webhook-subscription.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { articleStream } from '../../domain/article/events.ts';
import type { Actor } from '../../domain/event.ts';
import { reportStream } from '../../domain/report/events.ts';
import { type DbHandle, openDatabase } from '../../infra/db/open.ts';
import type { Db } from '../../infra/db/schema.ts';
import { readAllEvents, START } from '../../infra/event-store.ts';
import { projectInTransaction } from '../../infra/projection.ts';
import { catchUp } from '../../infra/projection-runner.ts';
import { detailOf } from '../../projections/articles.ts';
import { backends, onPostgres } from '../support/db.ts';
import { apiKeyActor, createTestRuntime } from '../support/runtime.ts';
import { addEndpoint, newAccount, newArticle, sleep } from './helpers.ts';

/*
 * What the `webhooks@1` subscription and replays write: which deliveries, with which bodies. Run by
 * hand (`catchUp`), without queues: the bodies of every event type, an article's data as it was at the
 * event's revision, who gets what (types, accounts, enabled, created before the event), once per
 * (event, endpoint) however many runners race, and replays from a time in log order.
 */

const PUBLIC_URL = 'https://content.example';
const editor: Actor = { type: 'user', id: 'usr_1', name: 'Dana Editor' };

type Message = { id: string; type: string; created_at: string; data: Record<string, unknown> };

describe.each(backends)('webhook messages on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let databaseUrl: string | undefined;
  const subscription = () =>
    webhookSubscription({ db: runtime.db, now: () => new Date(), publicUrl: PUBLIC_URL });

  beforeAll(async () => {
    ({ runtime, drop, databaseUrl } = await createTestRuntime(backend));
  });
  afterAll(async () => drop?.());

  const run = (db: Db = runtime.db) => catchUp(db, subscription());
  const deliveriesOf = (endpointId: string) =>
    runtime.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('endpoint_id', '=', endpointId)
      .orderBy('seq')
      .execute();
  const messagesOf = async (endpointId: string): Promise<Message[]> =>
    (await deliveriesOf(endpointId)).map((d) => d.payload as Message);
  const eventIds = async (streamId: string): Promise<string[]> =>
    (
      await runtime.db
        .selectFrom('events')
        .select('event_id')
        .where('stream_id', '=', streamId)
        .orderBy('version')
        .execute()
    ).map((r) => r.event_id);

  it("makes each article event's message with the article as it was at that revision", async () => {
    const { accountId, siteId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/articles',
      events: ['article.created', 'article.updated', 'article.published', 'article.featured_image_replaced'],
    });
    const articleId = await newArticle(runtime, accountId, siteId, 'First');
    const api = { origin: 'api' as const, actor: apiKeyActor };
    const web = { origin: 'editor' as const, actor: editor };
    await runtime.commands.editArticle(
      accountId,
      articleId,
      { title: 'Second', body: '<p>Turn off the water first, then open the tap.</p>' },
      web,
    );
    await runtime.commands.editArticle(accountId, articleId, { title: 'Third' }, api);
    await runtime.commands.changeArticleStatus(
      accountId,
      articleId,
      { status: 'published', publishedAt: '2026-11-03T08:00:00.000Z' },
      api,
    );
    const image = { url: 'https://cdn.example/tap.jpg', alt: 'A tap', width: 800, height: 600 };
    await runtime.commands.replaceFeaturedImage(accountId, articleId, { featuredImage: image }, api);
    await runtime.commands.restoreRevision(accountId, articleId, { revision: 2 }, web);
    await runtime.commands.changeArticleStatus(accountId, articleId, { status: 'archived' }, api);
    await run();

    const messages = await messagesOf(endpoint.id);
    const ids = await eventIds(articleStream(articleId));
    expect(messages.map((m) => m.id)).toEqual(ids);
    expect(messages.map((m) => m.type)).toEqual([
      'article.created',
      'article.updated',
      'article.updated',
      'article.published',
      'article.featured_image_replaced',
      'article.updated',
      'article.updated',
    ]);
    expect(messages.map((m) => [m.data.revision, m.data.title, m.data.status])).toEqual([
      [1, 'First', 'draft'],
      [2, 'Second', 'draft'],
      [3, 'Third', 'draft'],
      [4, 'Third', 'published'],
      [5, 'Third', 'published'],
      [6, 'Second', 'published'],
      [7, 'Second', 'archived'],
    ]);
    expect(messages.map((m) => m.data.word_count)).toEqual([5, 9, 9, 9, 9, 9, 9]);
    expect(messages.map((m) => m.data.featured_image)).toEqual([null, null, null, null, image, null, null]);
    expect(messages[3]?.data.published_at).toBe('2026-11-03T08:00:00Z');
    expect(messages.map((m) => m.data.origin)).toEqual([
      'api',
      'editor',
      'api',
      'api',
      'api',
      'editor',
      'api',
    ]);
    expect(messages[1]?.data.actor).toEqual(editor);
    // Each is exactly the list item of the revision as the API shows it, plus its origin and actor.
    for (const [index, message] of messages.entries()) {
      const state = await runtime.commands.articleAt(accountId, articleId, index + 1);
      if (!state.exists) throw new Error('no such revision');
      const { origin, actor, ...item } = message.data;
      expect(item).toEqual(articleListItemOut(detailOf(state)));
      expect(message.created_at).toBe(item.updated_at);
    }
    expect(Object.keys(messages[0] ?? {})).toEqual(
      expect.arrayContaining(['id', 'type', 'created_at', 'data']),
    );
  });

  it('follows an article across batches from where the last batch folded it, with the same messages', async () => {
    const { accountId, siteId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/batches',
      events: ['article.created', 'article.updated', 'article.published'],
    });
    const articleId = await newArticle(runtime, accountId, siteId, 'One');
    const api = { origin: 'api' as const, actor: apiKeyActor };
    // One subscription for every batch, as a worker runs it: its fold memory carries over.
    const following = subscription();
    const edits: Array<() => Promise<unknown>> = [
      () => runtime.commands.editArticle(accountId, articleId, { title: 'Two' }, api),
      () =>
        runtime.commands.editArticle(
          accountId,
          articleId,
          { body: '<p>Close the valve under the sink before you start.</p>' },
          api,
        ),
      () => runtime.commands.editArticle(accountId, articleId, { title: 'Four' }, api),
      () =>
        runtime.commands.changeArticleStatus(
          accountId,
          articleId,
          { status: 'published', publishedAt: '2026-11-04T08:00:00.000Z' },
          api,
        ),
      () => runtime.commands.restoreRevision(accountId, articleId, { revision: 1 }, api),
      () => runtime.commands.editArticle(accountId, articleId, { title: 'Seven' }, api),
      () => runtime.commands.editArticle(accountId, articleId, { body: '<p>Dry the joint.</p>' }, api),
    ];
    // Batches of two and three revisions: the row is past most of them, so they are folded.
    for (const group of [
      [0, 1],
      [2, 3, 4],
      [5, 6],
    ]) {
      for (const i of group) await edits[i]?.();
      await catchUp(runtime.db, following);
    }
    const messages = await messagesOf(endpoint.id);
    expect(messages.map((m) => m.data.revision)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    for (const [index, message] of messages.entries()) {
      const state = await runtime.commands.articleAt(accountId, articleId, index + 1);
      if (!state.exists) throw new Error('no such revision');
      const { origin: _o, actor: _a, ...item } = message.data;
      expect(item).toEqual(articleListItemOut(detailOf(state)));
    }
    expect(messages.map((m) => m.data.word_count)).toEqual([5, 5, 9, 9, 9, 5, 5, 3]);
  });

  it("makes backlink.acquired with the backlink, and report.ready with the month's stats and the report's address", async () => {
    const { accountId, siteId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/site',
      events: ['backlink.acquired', 'report.ready'],
    });
    const { backlinkId } = await runtime.commands.acquireBacklink(accountId, {
      siteId,
      acquiredOn: '2026-10-14',
      sourceDomain: 'citylocalnews.example',
      sourceUrl: 'https://citylocalnews.example/business',
      targetUrl: 'https://northside.example/',
      anchorText: 'Northside Plumbing',
      anchorType: 'branded',
      category: 'local',
    });
    await runtime.store.append(
      reportStream(siteId, '2026-10'),
      [
        {
          type: 'MonthlyReportReady',
          data: {
            siteId,
            accountId,
            period: '2026-10',
            from: '2026-10-01',
            to: '2026-10-31',
            articlesPublished: 3,
            backlinksIndustry: 0,
            backlinksLocal: 1,
          },
          metadata: { at: '2026-11-01T00:00:05.000Z' },
        },
      ],
      { expectedVersion: 'no_stream' },
    );
    await run();

    const [acquired, ready] = await messagesOf(endpoint.id);
    expect(acquired).toMatchObject({
      type: 'backlink.acquired',
      data: {
        id: backlinkId,
        site_id: siteId,
        acquired_on: '2026-10-14',
        source_domain: 'citylocalnews.example',
        source_url: 'https://citylocalnews.example/business',
        target_url: 'https://northside.example/',
        anchor_text: 'Northside Plumbing',
        anchor_type: 'branded',
        category: 'local',
      },
    });
    expect(Object.keys(acquired?.data ?? {})).not.toContain('account_id');
    expect(ready).toEqual({
      id: (await eventIds(reportStream(siteId, '2026-10')))[0],
      type: 'report.ready',
      created_at: '2026-11-01T00:00:05Z',
      data: {
        site_id: siteId,
        period: { key: '2026-10', from: '2026-10-01', to: '2026-10-31' },
        articles: { published: 3 },
        backlinks: { total: 1, industry: 0, local: 1 },
        report_url: `${PUBLIC_URL}/sites/${siteId}/report?period=2026-10`,
      },
    });
  });

  it('makes nothing for a type no endpoint subscribes to, another account, a disabled endpoint, or an endpoint younger than the event', async () => {
    const { accountId, siteId } = await newAccount(runtime);
    const other = await newAccount(runtime);
    const backlinksOnly = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/backlinks',
      events: ['backlink.acquired'],
    });
    const disabled = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/off',
      events: ['article.created'],
      enabled: false,
    });
    const othersEndpoint = await addEndpoint(runtime.db, {
      accountId: other.accountId,
      url: 'https://hooks.example/other',
      events: ['article.created'],
    });
    const first = await newArticle(runtime, accountId, siteId);
    await sleep(20);
    // Registered after the first article was created, before the subscription got to it.
    const late = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/late',
      events: ['article.created'],
      createdAt: new Date(),
    });
    await sleep(20);
    const second = await newArticle(runtime, accountId, siteId);
    await run();

    expect(await deliveriesOf(backlinksOnly.id)).toEqual([]);
    expect(await deliveriesOf(disabled.id)).toEqual([]);
    expect(await deliveriesOf(othersEndpoint.id)).toEqual([]);
    const lateOnes = await messagesOf(late.id);
    expect(lateOnes.map((m) => m.data.id)).toEqual([second]);
    expect(lateOnes.map((m) => m.data.id)).not.toContain(first);
  });

  it('writes each live delivery with its checkpoint, pending and due now, one per (event, endpoint)', async () => {
    const { accountId, siteId } = await newAccount(runtime);
    const a = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/a',
      events: ['article.created'],
    });
    const b = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/b',
      events: ['article.created'],
    });
    const articleId = await newArticle(runtime, accountId, siteId);
    await run();
    await run();
    for (const endpoint of [a, b]) {
      const [delivery, ...more] = await deliveriesOf(endpoint.id);
      expect(more).toEqual([]);
      expect(delivery).toMatchObject({
        account_id: accountId,
        event_id: (await eventIds(articleStream(articleId)))[0],
        event_type: 'article.created',
        source: 'live',
        source_id: null,
        status: 'pending',
        attempts: 0,
        claimed_until: null,
      });
      expect(delivery?.id).toMatch(/^dlv_/);
      expect(delivery?.next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now());
    }
  });

  onPostgres(backend)('makes a live delivery once per (event, endpoint) when two runners race', async () => {
    const { accountId, siteId } = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/race',
      events: ['article.created', 'article.updated'],
    });
    for (let i = 0; i < 5; i++) {
      const id = await newArticle(runtime, accountId, siteId, `Race ${i}`);
      await runtime.commands.editArticle(
        accountId,
        id,
        { title: `Race ${i}b` },
        { origin: 'api', actor: apiKeyActor },
      );
    }
    const second: DbHandle = await openDatabase({ databaseUrl, dataDir: 'memory://' });
    try {
      // Two runners (two processes) on one subscription: they take turns per batch.
      await Promise.all([run(), run(second.db), run(), run(second.db)]);
      expect(await deliveriesOf(endpoint.id)).toHaveLength(10);

      // And should two apply the same events anyway (a checkpoint lost with its batch's commit): still once.
      const all = await readAllEvents(runtime.db, START, 100_000, {
        types: ['ArticleCreated', 'ArticleEdited'],
      });
      const again = subscription();
      await Promise.all([
        runtime.db.transaction().execute((trx) => projectInTransaction(again, all as never, trx)),
        second.db.transaction().execute((trx) => projectInTransaction(again, all as never, trx)),
      ]);
      const deliveries = await deliveriesOf(endpoint.id);
      expect(deliveries).toHaveLength(10);
      expect(new Set(deliveries.map((d) => d.event_id)).size).toBe(10);
    } finally {
      await second.close();
    }
  });

  it('replays the events of the endpoint types and account recorded from a time, in log order, after what is pending', async () => {
    const { accountId, siteId } = await newAccount(runtime);
    const other = await newAccount(runtime);
    const endpoint = await addEndpoint(runtime.db, {
      accountId,
      url: 'https://hooks.example/replayed',
      events: ['article.created', 'article.updated'],
    });
    const api = { origin: 'api' as const, actor: apiKeyActor };
    const before = await newArticle(runtime, accountId, siteId, 'Before');
    await sleep(100);
    const from = new Date();
    await sleep(100);
    await runtime.commands.editArticle(accountId, before, { title: 'Before, edited' }, api);
    const after = await newArticle(runtime, accountId, siteId, 'After');
    await runtime.commands.acquireBacklink(accountId, {
      siteId,
      acquiredOn: '2026-10-14',
      sourceDomain: 'citylocalnews.example',
      sourceUrl: 'https://citylocalnews.example/business',
      targetUrl: 'https://northside.example/',
      anchorText: 'Northside Plumbing',
      anchorType: 'branded',
      category: 'local',
    });
    await newArticle(runtime, other.accountId, other.siteId, "Someone else's");
    await runtime.commands.editArticle(accountId, after, { title: 'After, edited' }, api);
    await run();
    const live = await deliveriesOf(endpoint.id);
    expect(live).toHaveLength(4);

    const replay = await replayEndpoint(
      { db: runtime.db, now: () => new Date(), publicUrl: PUBLIC_URL },
      { id: endpoint.id, account_id: accountId, events: ['article.created', 'article.updated'] },
      from,
    );
    expect(replay.replayId).toMatch(/^rpl_/);
    expect(replay.queued).toBe(3);
    const all = await deliveriesOf(endpoint.id);
    const replayed = all.slice(live.length);
    const [beforeEdit] = (await eventIds(articleStream(before))).slice(1);
    const [afterCreated, afterEdit] = await eventIds(articleStream(after));
    expect(replayed.map((d) => d.event_id)).toEqual([beforeEdit, afterCreated, afterEdit]);
    for (const delivery of replayed) {
      expect(delivery).toMatchObject({
        source: 'replay',
        source_id: replay.replayId,
        status: 'pending',
        attempts: 0,
      });
      // The same message as the live delivery of that event.
      expect(delivery.payload).toEqual(live.find((d) => d.event_id === delivery.event_id)?.payload);
    }
    expect(new Set(all.map((d) => d.id)).size).toBe(all.length);
  });

  it('replays report.ready only with the public URL its report_url is made from', async () => {
    const { accountId, siteId } = await newAccount(runtime);
    const from = new Date(Date.now() - 1_000);
    await runtime.store.append(
      reportStream(siteId, '2026-09'),
      [
        {
          type: 'MonthlyReportReady',
          data: {
            siteId,
            accountId,
            period: '2026-09',
            from: '2026-09-01',
            to: '2026-09-30',
            articlesPublished: 0,
            backlinksIndustry: 0,
            backlinksLocal: 0,
          },
          metadata: { at: new Date().toISOString() },
        },
      ],
      { expectedVersion: 'no_stream' },
    );
    const endpoint = { id: '', account_id: accountId, events: ['report.ready'] };
    endpoint.id = (
      await addEndpoint(runtime.db, {
        accountId,
        url: 'https://hooks.example/reports',
        events: ['report.ready'],
      })
    ).id;
    await expect(replayEndpoint({ db: runtime.db, now: () => new Date() }, endpoint, from)).rejects.toThrow(
      /publicUrl/,
    );
    const { queued } = await replayEndpoint(
      { db: runtime.db, now: () => new Date(), publicUrl: PUBLIC_URL },
      endpoint,
      from,
    );
    expect(queued).toBe(1);
    const [delivery] = await deliveriesOf(endpoint.id);
    expect((delivery?.payload as Message | undefined)?.data.report_url).toBe(
      `${PUBLIC_URL}/sites/${siteId}/report?period=2026-09`,
    );
  });
});
