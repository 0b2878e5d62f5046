import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendNew, type BulkAppendDeps, type NewStream } from '../../bench/bulk-append.ts';
import type { ArticleCreated, ArticleStatusChanged } from '../../domain/article/events.ts';
import type { BacklinkAcquired } from '../../domain/backlink/events.ts';
import type { EventMetadata } from '../../domain/event.ts';
import { validateEvent } from '../../domain/events.ts';
import type { SiteAdded } from '../../domain/site/events.ts';
import {
  ConcurrencyError,
  createEventStore,
  type EventStore,
  EventValidationError,
  type LogPosition,
  type StoredEvent,
} from '../../infra/event-store.ts';
import { catchUp, inlineProjection, rebuild } from '../../infra/projection-runner.ts';
import { asyncProjectors, projectors } from '../../projections/index.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { snapshotReadModels } from '../support/runtime.ts';

const metadata: EventMetadata = { at: '2026-11-21T10:00:00.000Z' };
const actor = { type: 'system' as const, id: 'import', name: 'Import' };

let counter = 0;
const unique = (prefix: string): string => `${prefix}_${Date.now().toString(36)}${(counter++).toString(36)}`;

function siteAdded(accountId: string, siteId: string): SiteAdded {
  return {
    type: 'SiteAdded',
    data: {
      siteId,
      accountId,
      name: 'Northside',
      domain: 'northside.example',
      url: 'https://northside.example/',
    },
    metadata,
  };
}

function articleCreated(accountId: string, siteId: string, articleId: string, n: number): ArticleCreated {
  return {
    type: 'ArticleCreated',
    data: {
      articleId,
      siteId,
      accountId,
      revision: 1,
      origin: 'rewrite',
      actor,
      reason: null,
      title: `Article ${n}`,
      body: `<p>Words number ${n} here.</p>`,
      url: `https://northside.example/blog/${n}`,
      status: n % 3 === 0 ? 'draft' : 'published',
      publishedAt: n % 3 === 0 ? null : `2026-10-${String(1 + (n % 28)).padStart(2, '0')}T08:00:00Z`,
      targetKeyword: null,
      featuredImage: null,
    },
    metadata,
  };
}

function statusChanged(articleId: string): ArticleStatusChanged {
  return {
    type: 'ArticleStatusChanged',
    data: {
      articleId,
      revision: 2,
      origin: 'rewrite',
      actor,
      reason: 'launch',
      status: 'published',
      publishedAt: '2026-11-01T09:00:00Z',
    },
    metadata,
  };
}

function backlinkAcquired(
  accountId: string,
  siteId: string,
  backlinkId: string,
  n: number,
): BacklinkAcquired {
  return {
    type: 'BacklinkAcquired',
    data: {
      backlinkId,
      siteId,
      accountId,
      acquiredOn: `2026-${n % 2 ? '10' : '11'}-${String(1 + (n % 28)).padStart(2, '0')}`,
      sourceDomain: 'news.example',
      sourceUrl: `https://news.example/${n}`,
      targetUrl: 'https://northside.example/',
      anchorText: 'plumbers',
      anchorType: 'exact',
      category: n % 3 ? 'industry' : 'local',
    },
    metadata,
  };
}

describe.each(backends)('appendNew on %s', (backend) => {
  let testDb: TestDatabase;
  let deps: BulkAppendDeps;
  let store: EventStore;

  beforeAll(async () => {
    testDb = await createTestDatabase(backend);
    deps = {
      db: testDb.handle.db,
      handle: testDb.handle,
      validate: validateEvent,
      inline: inlineProjection(projectors),
    };
    store = createEventStore(deps);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  async function count(table: 'events' | 'streams' | 'sites' | 'articles' | 'revisions'): Promise<number> {
    const row = await testDb.handle.db
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** readAll after `after`, polled: other transactions on the server hold fresh events back for a moment. */
  async function readable(
    after: LogPosition,
    streams: ReadonlySet<string>,
    n: number,
  ): Promise<StoredEvent[]> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const events = (await store.readAll(after, 100_000)).filter((e) => streams.has(e.streamId));
      if (events.length >= n || Date.now() > deadline) return events;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it('writes many new streams that readStream and readAll read back, in order, in one transaction', async () => {
    const accountId = unique('acc');
    const siteId = unique('site');
    const articleIds = Array.from({ length: 30 }, () => unique('art'));
    const streams: NewStream[] = [
      { streamId: `site-${siteId}`, events: [siteAdded(accountId, siteId)] },
      ...articleIds.map((id, n) => ({
        streamId: `article-${id}`,
        events:
          n === 0
            ? [articleCreated(accountId, siteId, id, n), statusChanged(id)]
            : [articleCreated(accountId, siteId, id, n)],
      })),
    ];
    const head = await store.headPosition();
    let woken = 0;
    const unsubscribe = testDb.handle.onAppended(() => woken++);
    const result = await appendNew(deps, streams);
    unsubscribe();

    expect(woken).toBeGreaterThan(0);
    expect(result.events).toHaveLength(32);
    expect(new Set(result.events.map((e) => e.transactionId)).size).toBe(1);
    const positions = result.events.map((e) => e.position);
    expect(positions.every((p, i) => i === 0 || (positions[i - 1] as bigint) < p)).toBe(true);

    const first = await store.readStream(`article-${articleIds[0]}`);
    expect(first.map((e) => [e.version, e.type])).toEqual([
      [1, 'ArticleCreated'],
      [2, 'ArticleStatusChanged'],
    ]);
    expect(first).toEqual(result.events.filter((e) => e.streamId === `article-${articleIds[0]}`));
    const stream = await testDb.handle.db
      .selectFrom('streams')
      .select(['version', 'stream_type'])
      .where('stream_id', '=', `article-${articleIds[0]}`)
      .executeTakeFirstOrThrow();
    expect(stream).toEqual({ version: 2, stream_type: 'article' });

    const ids = new Set(streams.map((s) => s.streamId));
    const log = await readable(head, ids, 32);
    expect(log).toEqual(result.events);
  });

  it('updates the inline read models in the same transaction, as a replay makes them', async () => {
    const accountId = unique('acc');
    const siteId = unique('site');
    const articleIds = Array.from({ length: 12 }, () => unique('art'));
    await appendNew(deps, [
      { streamId: `site-${siteId}`, events: [siteAdded(accountId, siteId)] },
      ...articleIds.map((id, n) => ({
        streamId: `article-${id}`,
        events: [articleCreated(accountId, siteId, id, n)],
      })),
      ...Array.from({ length: 20 }, (_, n) => {
        const id = unique('bl');
        return { streamId: `backlink-${id}`, events: [backlinkAcquired(accountId, siteId, id, n)] };
      }),
    ]);
    // Inline: readable at once, no catch-up.
    const articles = await testDb.handle.db
      .selectFrom('articles')
      .select(['id', 'word_count', 'revision'])
      .where('site_id', '=', siteId)
      .execute();
    expect(articles).toHaveLength(12);
    expect(articles.every((a) => a.revision === 1 && a.word_count === 4)).toBe(true);
    const site = await testDb.handle.db.selectFrom('sites').select('id').where('id', '=', siteId).execute();
    expect(site).toHaveLength(1);
    const revisions = await testDb.handle.db
      .selectFrom('revisions')
      .select('article_id')
      .where('article_id', 'in', articleIds)
      .execute();
    expect(revisions).toHaveLength(12);

    // Async: the runners catch up as after any append; then everything equals a rebuild from the log.
    for (const p of asyncProjectors) await catchUp(testDb.handle.db, p);
    const backlinks = await testDb.handle.db
      .selectFrom('backlinks')
      .select('id')
      .where('site_id', '=', siteId)
      .execute();
    expect(backlinks).toHaveLength(20);
    const live = await snapshotReadModels(testDb.handle.db);
    for (const p of projectors) await rebuild(testDb.handle.db, p);
    expect(await snapshotReadModels(testDb.handle.db)).toEqual(live);
  });

  it('lets imports into one site run side by side: the per-site counts do not deadlock', async () => {
    const accountId = unique('acc');
    const siteId = unique('site');
    await store.append(`site-${siteId}`, [siteAdded(accountId, siteId)], { expectedVersion: 'no_stream' });
    // Half the batches start with a draft, half with a published article: counted event by event,
    // two of them would lock the site's two count rows in opposite orders.
    const batches = Array.from({ length: 8 }, (_, b) =>
      Array.from({ length: 30 }, (_, n) => {
        const id = unique('art');
        return { streamId: `article-${id}`, events: [articleCreated(accountId, siteId, id, n + (b % 2))] };
      }),
    );
    await Promise.all(batches.map((batch) => appendNew(deps, batch)));
    const counts = await testDb.handle.db
      .selectFrom('article_counts')
      .select(['status', 'n'])
      .where('site_id', '=', siteId)
      .orderBy('status')
      .execute();
    const drafts = batches
      .flat()
      .filter((s) => JSON.stringify(s.events[0]?.data).includes('"status":"draft"')).length;
    expect(counts).toEqual([
      { status: 'draft', n: drafts },
      { status: 'published', n: 240 - drafts },
    ]);
  });

  it('writes nothing of the batch when one stream exists already', async () => {
    const accountId = unique('acc');
    const existing = unique('site');
    await store.append(`site-${existing}`, [siteAdded(accountId, existing)], {
      expectedVersion: 'no_stream',
    });
    const before = {
      events: await count('events'),
      streams: await count('streams'),
      sites: await count('sites'),
    };
    const fresh = [unique('site'), unique('site')];
    const error = await appendNew(deps, [
      { streamId: `site-${fresh[0]}`, events: [siteAdded(accountId, fresh[0] as string)] },
      { streamId: `site-${existing}`, events: [siteAdded(accountId, existing)] },
      { streamId: `site-${fresh[1]}`, events: [siteAdded(accountId, fresh[1] as string)] },
    ]).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConcurrencyError);
    expect(error).toMatchObject({ streamId: `site-${existing}`, expected: 'no_stream', actual: 1 });
    expect(await store.readStream(`site-${fresh[0]}`)).toEqual([]);
    expect(await store.readStream(`site-${fresh[1]}`)).toEqual([]);
    expect(await store.readStream(`site-${existing}`)).toHaveLength(1);
    expect({
      events: await count('events'),
      streams: await count('streams'),
      sites: await count('sites'),
    }).toEqual(before);
  });

  it('validates every event before writing anything', async () => {
    const accountId = unique('acc');
    const siteId = unique('site');
    const articleId = unique('art');
    const before = {
      events: await count('events'),
      streams: await count('streams'),
      articles: await count('articles'),
    };
    const bad = articleCreated(accountId, siteId, articleId, 1);
    const error = await appendNew(deps, [
      { streamId: `site-${siteId}`, events: [siteAdded(accountId, siteId)] },
      {
        streamId: `article-${articleId}`,
        events: [{ ...bad, data: { ...bad.data, url: 'not a url' } }],
      },
    ]).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(EventValidationError);
    expect(error).toMatchObject({ type: 'ArticleCreated' });
    expect(await store.readStream(`site-${siteId}`)).toEqual([]);
    expect({
      events: await count('events'),
      streams: await count('streams'),
      articles: await count('articles'),
    }).toEqual(before);
  });

  it('refuses a stream given twice or without events, before writing anything', async () => {
    const accountId = unique('acc');
    const siteId = unique('site');
    const before = await count('events');
    await expect(
      appendNew(deps, [
        { streamId: `site-${siteId}`, events: [siteAdded(accountId, siteId)] },
        { streamId: `site-${siteId}`, events: [siteAdded(accountId, siteId)] },
      ]),
    ).rejects.toThrow(TypeError);
    await expect(appendNew(deps, [{ streamId: `site-${siteId}`, events: [] }])).rejects.toThrow(TypeError);
    await expect(appendNew(deps, [{ streamId: '', events: [siteAdded(accountId, siteId)] }])).rejects.toThrow(
      TypeError,
    );
    expect(await count('events')).toBe(before);
    expect(await appendNew(deps, [])).toEqual({ events: [] });
  });

  it('rolls the batch back when an inline projector fails', async () => {
    const accountId = unique('acc');
    const siteId = unique('site');
    const failing: BulkAppendDeps = {
      ...deps,
      inline: async () => {
        throw new Error('projector failed');
      },
    };
    await expect(
      appendNew(failing, [{ streamId: `site-${siteId}`, events: [siteAdded(accountId, siteId)] }]),
    ).rejects.toThrow('projector failed');
    expect(await store.readStream(`site-${siteId}`)).toEqual([]);
    const streams = await testDb.handle.db
      .selectFrom('streams')
      .select('stream_id')
      .where('stream_id', '=', `site-${siteId}`)
      .execute();
    expect(streams).toEqual([]);
  });
});
