import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DomainEvent } from '../../domain/events.ts';
import type { Db } from '../../infra/db/schema.ts';
import { createEventStore, type NewEvent, START } from '../../infra/event-store.ts';
import { type Projector, projectInTransaction, type Stored } from '../../infra/projection.ts';
import { catchUp } from '../../infra/projection-runner.ts';
import { activityProjector } from '../../projections/activity.ts';
import { articlesProjector } from '../../projections/articles.ts';
import { backlinksProjector } from '../../projections/backlinks.ts';
import { siteStatsProjector } from '../../projections/site-stats.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { snapshotTables } from '../support/runtime.ts';

const actor = { type: 'system' as const, id: 'pipeline', name: 'Pipeline' };
const SITES = ['site_a', 'site_b', 'site_c'];
/** Days on both sides of a month's end, so that daily and monthly buckets both collide and split. */
const DAYS = ['2026-09-30', '2026-10-01', '2026-10-31', '2026-11-01', '2026-11-15'];

const backlink = fc.record({
  kind: fc.constant('backlink' as const),
  id: fc.integer({ min: 0, max: 30 }),
  site: fc.constantFrom(...SITES),
  day: fc.constantFrom(...DAYS),
  category: fc.constantFrom('industry' as const, 'local' as const),
});
const created = fc.record({
  kind: fc.constant('created' as const),
  id: fc.integer({ min: 0, max: 8 }),
  site: fc.constantFrom(...SITES),
  status: fc.constantFrom('draft' as const, 'scheduled' as const, 'published' as const, 'archived' as const),
  day: fc.option(fc.constantFrom(...DAYS), { nil: null }),
});
const statusChanged = fc.record({
  kind: fc.constant('status' as const),
  id: fc.integer({ min: 0, max: 10 }),
  status: fc.constantFrom('draft' as const, 'published' as const, 'archived' as const),
  day: fc.option(fc.constantFrom(...DAYS), { nil: null }),
});
const call = fc.record({
  kind: fc.constant('call' as const),
  id: fc.integer({ min: 0, max: 20 }),
  site: fc.option(fc.constantFrom(...SITES), { nil: null }),
  status: fc.constantFrom(200, 404, 499),
});
/** A batch of one account's calls (`CallsRecorded`), ids possibly repeated across batches (a replay). */
const calls = fc.record({
  kind: fc.constant('calls' as const),
  calls: fc.array(
    fc.record({
      id: fc.integer({ min: 0, max: 20 }),
      site: fc.option(fc.constantFrom(...SITES), { nil: null }),
      status: fc.constantFrom(200, 404, 499),
      revision: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
      client: fc.option(fc.constantFrom('client-1', 'client-2'), { nil: null }),
    }),
    { minLength: 1, maxLength: 4 },
  ),
});
type StepOf<A> = A extends fc.Arbitrary<infer T> ? T : never;
type Step =
  | StepOf<typeof backlink>
  | StepOf<typeof created>
  | StepOf<typeof statusChanged>
  | StepOf<typeof call>
  | StepOf<typeof calls>;

/** Stored events as the runner hands them to a projector (duplicates included: replays and imports make them). */
function toEvents(steps: readonly Step[]): Stored[] {
  return steps.map((step, i): Stored => {
    const metadata = { at: `2026-11-20T10:00:${String(i % 60).padStart(2, '0')}Z` };
    let event: DomainEvent;
    switch (step.kind) {
      case 'backlink':
        event = {
          type: 'BacklinkAcquired',
          data: {
            backlinkId: `bl_${step.id}`,
            siteId: step.site,
            accountId: 'acc_1',
            acquiredOn: step.day,
            sourceDomain: 'news.example',
            sourceUrl: `https://news.example/${i}`,
            targetUrl: 'https://northside.example/',
            anchorText: `anchor ${i}`,
            anchorType: 'exact',
            category: step.category,
          },
          metadata,
        };
        break;
      case 'created':
        event = {
          type: 'ArticleCreated',
          data: {
            articleId: `art_${step.id}`,
            siteId: step.site,
            accountId: 'acc_1',
            revision: 1,
            origin: 'rewrite',
            actor,
            reason: null,
            title: `Article ${i}`,
            body: '<p>Text</p>',
            url: `https://northside.example/${i}`,
            status: step.status,
            publishedAt: step.day ? `${step.day}T23:30:00+00:00` : null,
            targetKeyword: null,
            featuredImage: null,
          },
          metadata,
        };
        break;
      case 'call':
        event = {
          type: 'CallRecorded',
          data: {
            activityId: `act_${step.id}`,
            accountId: 'acc_1',
            source: 'api',
            actor: { type: 'api_key', id: 'key_1', name: 'Key' },
            operation: 'list_articles',
            siteId: step.site,
            articleId: null,
            status: step.status,
            requestId: `req_${i}`,
            durationMs: i,
          },
          metadata,
        };
        break;
      case 'calls':
        event = {
          type: 'CallsRecorded',
          data: {
            accountId: 'acc_1',
            calls: step.calls.map((c, n) => ({
              activityId: `act_batch_${c.id}`,
              at: `2026-11-20T11:00:${String((i + n) % 60).padStart(2, '0')}Z`,
              source: 'mcp' as const,
              actor: { type: 'oauth_client' as const, id: 'client_1', name: 'Assistant' },
              operation: 'get_article',
              siteId: c.site,
              articleId: null,
              ...(c.revision === undefined ? {} : { revision: c.revision }),
              status: c.status,
              requestId: `req_${i}_${n}`,
              clientRequestId: c.client,
              durationMs: n,
            })),
          },
          metadata,
        };
        break;
      case 'status':
        event = {
          type: 'ArticleStatusChanged',
          data: {
            articleId: `art_${step.id}`,
            revision: 2,
            origin: 'rewrite',
            actor,
            reason: null,
            status: step.status,
            publishedAt: step.day ? `${step.day}T00:15:00Z` : null,
          },
          metadata,
        };
        break;
    }
    return {
      ...event,
      position: BigInt(i + 1),
      transactionId: 1000n,
      eventId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      streamId: `stream-${i}`,
      version: 1,
    } as Stored;
  });
}

/** Empties the projector's tables, applies `before` one by one, then `events` one by one or as one batch. */
async function project(
  db: Db,
  projector: Projector,
  before: readonly Stored[],
  events: readonly Stored[],
  batched: boolean,
): Promise<Record<string, string[]>> {
  await db.transaction().execute(async (trx) => {
    for (const table of projector.tables) await sql`delete from ${sql.table(table)}`.execute(trx);
    for (const event of before) await projectInTransaction(projector, [event], trx);
    if (batched) {
      await projectInTransaction(projector, events, trx);
    } else {
      for (const event of events) await projectInTransaction(projector, [event], trx);
    }
  });
  return snapshotTables(db, projector.tables);
}

describe.each(backends)('a batch projected at once on %s', (backend) => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase(backend);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  for (const projector of [backlinksProjector, siteStatsProjector, articlesProjector, activityProjector]) {
    it(`${projector.name}: a batch leaves exactly the rows its events leave one at a time`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.oneof(backlink, created, statusChanged, call, calls), { minLength: 1, maxLength: 60 }),
          fc.nat(),
          async (steps, cut) => {
            const events = toEvents(steps).filter((e) => (projector.handles as string[]).includes(e.type));
            const split = cut % (events.length + 1);
            const before = events.slice(0, split);
            const rest = events.slice(split);
            const oneByOne = await project(testDb.handle.db, projector, before, rest, false);
            const batched = await project(testDb.handle.db, projector, before, rest, true);
            expect(batched).toEqual(oneByOne);
          },
        ),
        { numRuns: backend === 'pglite' ? 25 : 60 },
      );
    }, 120_000);
  }

  it(`${siteStatsProjector.name}: large batches (more rows than one statement takes) match too`, async () => {
    const steps: Step[] = [];
    for (let i = 0; i < 2500; i++) {
      steps.push({
        kind: 'backlink',
        id: i,
        site: `site_${i % 700}`,
        day: DAYS[i % DAYS.length] as string,
        category: i % 3 ? 'industry' : 'local',
      });
      if (i % 2 === 0) {
        steps.push({
          kind: 'created',
          id: i,
          site: `site_${i % 700}`,
          status: 'published',
          day: '2026-10-01',
        });
      }
    }
    const events = toEvents(steps);
    for (const projector of [backlinksProjector, siteStatsProjector]) {
      const mine = events.filter((e) => (projector.handles as string[]).includes(e.type));
      const oneByOne = await project(testDb.handle.db, projector, [], mine, false);
      const batched = await project(testDb.handle.db, projector, [], mine, true);
      expect(batched).toEqual(oneByOne);
    }
  }, 120_000);

  it('the async runner hands a projector whole batches', async () => {
    const store = createEventStore<NewEvent>({
      db: testDb.handle.db,
      handle: testDb.handle,
      validate: () => {},
    });
    const metadata = { at: '2026-11-20T10:00:00Z' };
    for (let i = 0; i < 5; i++) {
      await store.append(`site-batch${i}`, [{ type: 'SiteAdded', data: { n: i }, metadata }], {
        expectedVersion: 'no_stream',
      });
    }
    // A transaction open elsewhere on the server holds fresh events back for a moment (readAllEvents):
    // the batches are counted once all five can be read.
    while ((await store.readAll(START, 100, { types: ['SiteAdded'] })).length < 5) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const project = vi.fn((_events: readonly Stored<NewEvent>[]) => []);
    const spy: Projector<NewEvent> = {
      name: 'spy@1',
      mode: 'async',
      handles: ['SiteAdded'],
      tables: [],
      project,
    };
    const applied = await catchUp(testDb.handle.db, spy, undefined, { batchSize: 3 });
    expect(applied).toBe(5);
    expect(project.mock.calls.map(([events]) => events.length)).toEqual([3, 2]);
  });
});
