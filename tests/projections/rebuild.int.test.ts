import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { rebuild } from '../../infra/projection-runner.ts';
import { projectors } from '../../projections/index.ts';
import { backends } from '../support/db.ts';
import {
  apiKeyActor,
  catchUpAll,
  createTestRuntime,
  pipelineActor,
  protectedBody,
  setUpAccount,
  snapshotReadModels,
} from '../support/runtime.ts';

async function rebuildAll(runtime: Runtime): Promise<void> {
  for (const p of projectors) await rebuild(runtime.db, p);
}

describe.each(backends)('projections on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  });
  afterAll(async () => drop());

  it('a rebuild of every read model gives identical rows', async () => {
    const { commands } = runtime;
    const { accountId, siteId, otherSiteId } = await setUpAccount(runtime);
    await commands.createApiKey(accountId, { name: 'Reports', scope: 'read' });
    const { keyId } = await commands.createApiKey(accountId, { name: 'Old', scope: 'write' });
    await commands.revokeApiKey(accountId, keyId);
    await commands.addStaffMember({ name: 'Sam Support', email: `sam.${backend}@support.example` });

    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const { articleId } = await commands.createArticle(
        accountId,
        {
          siteId: i % 2 ? siteId : otherSiteId,
          title: `Article ${i}`,
          body: protectedBody(i),
          url: `https://northside.example/blog/${i}`,
          status: i === 5 ? 'draft' : 'published',
          publishedAt: i === 5 ? null : `2026-10-${String(10 + i).padStart(2, '0')}T08:00:00Z`,
          targetKeyword: 'boilers',
          featuredImage: null,
        },
        { origin: 'rewrite', actor: pipelineActor },
      );
      ids.push(articleId);
    }
    const [a0, a1, a2, , , a5] = ids as [string, string, string, string, string, string];
    await commands.editArticle(
      accountId,
      a0,
      { title: 'Article zero', reason: 'clearer' },
      { origin: 'api', actor: apiKeyActor },
    );
    await commands.editArticle(
      accountId,
      a0,
      { body: `${protectedBody(0)}<p>More words here.</p>` },
      { origin: 'mcp', actor: apiKeyActor },
    );
    await commands.replaceFeaturedImage(
      accountId,
      a1,
      { featuredImage: { url: 'https://cdn.example.com/1.webp', alt: 'One', width: 800, height: 600 } },
      { origin: 'api', actor: apiKeyActor },
    );
    await commands.restoreRevision(
      accountId,
      a0,
      { revision: 1, reason: 'undo' },
      { origin: 'editor', actor: apiKeyActor },
    );
    await commands.changeArticleStatus(
      accountId,
      a2,
      { status: 'archived' },
      { origin: 'rewrite', actor: pipelineActor },
    );
    await commands.changeArticleStatus(
      accountId,
      a5,
      { status: 'published', publishedAt: '2026-11-01T10:00:00Z' },
      { origin: 'rewrite', actor: pipelineActor },
    );
    for (let b = 0; b < 8; b++) {
      await commands.acquireBacklink(accountId, {
        siteId,
        acquiredOn: `2026-${b % 2 ? '10' : '11'}-0${1 + b}`,
        sourceDomain: 'news.example',
        sourceUrl: `https://news.example/${b}`,
        targetUrl: 'https://northside.example/',
        anchorText: 'plumbers',
        anchorType: 'exact',
        category: b % 3 ? 'industry' : 'local',
      });
    }
    await commands.recordCall({
      accountId,
      source: 'api',
      actor: apiKeyActor,
      operation: 'list_sites',
      siteId: null,
      articleId: null,
      status: 200,
      requestId: 'req_1',
      durationMs: 12,
    });
    await catchUpAll(runtime.db);

    const live = await snapshotReadModels(runtime.db);
    expect(live.articles).toHaveLength(6);
    expect(live.revisions?.length).toBe(6 + 6);
    expect(live.backlinks).toHaveLength(8);
    expect(live.activity?.length).toBeGreaterThan(1);
    expect(live.stats_buckets?.length).toBeGreaterThan(0);

    await rebuildAll(runtime);
    expect(await snapshotReadModels(runtime.db)).toEqual(live);
  });

  it('replay equals the read model, for any sequence of changes (property)', async () => {
    const { commands } = runtime;
    const { accountId, siteId } = await setUpAccount(runtime, 'Property Ltd');
    const articleIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { articleId } = await commands.createArticle(
        accountId,
        {
          siteId,
          title: `P${i}`,
          body: protectedBody(100 + i),
          url: `https://northside.example/p/${i}`,
          status: 'published',
          publishedAt: '2026-09-01T00:00:00Z',
          targetKeyword: null,
          featuredImage: null,
        },
        { origin: 'rewrite', actor: pipelineActor },
      );
      articleIds.push(articleId);
    }
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('title' as const),
        i: fc.nat(2),
        title: fc.string({ minLength: 1, maxLength: 20 }),
      }),
      fc.record({ kind: fc.constant('body' as const), i: fc.nat(2), words: fc.nat(30) }),
      fc.record({
        kind: fc.constant('status' as const),
        i: fc.nat(2),
        status: fc.constantFrom('draft', 'published', 'archived', 'scheduled'),
        day: fc.integer({ min: 1, max: 28 }),
      }),
      fc.record({ kind: fc.constant('restore' as const), i: fc.nat(2), n: fc.integer({ min: 1, max: 6 }) }),
      fc.record({
        kind: fc.constant('backlink' as const),
        day: fc.integer({ min: 1, max: 28 }),
        category: fc.constantFrom('industry', 'local'),
      }),
    );
    const caller = { origin: 'api' as const, actor: apiKeyActor };
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 12 }), async (ops) => {
        for (const o of ops) {
          const articleId = 'i' in o ? (articleIds[o.i] as string) : '';
          try {
            if (o.kind === 'title')
              await commands.editArticle(accountId, articleId, { title: o.title }, caller);
            if (o.kind === 'body') {
              const body = `${protectedBody(100 + (o as { i: number }).i)}<p>${'word '.repeat(o.words)}</p>`;
              await commands.editArticle(accountId, articleId, { body }, caller);
            }
            if (o.kind === 'status') {
              const publishedAt =
                o.status === 'draft' ? null : `2026-10-${String(o.day).padStart(2, '0')}T12:00:00Z`;
              await commands.changeArticleStatus(
                accountId,
                articleId,
                { status: o.status, publishedAt },
                caller,
              );
            }
            if (o.kind === 'restore')
              await commands.restoreRevision(accountId, articleId, { revision: o.n }, caller);
            if (o.kind === 'backlink') {
              await commands.acquireBacklink(accountId, {
                siteId,
                acquiredOn: `2026-10-${String(o.day).padStart(2, '0')}`,
                sourceDomain: 'p.example',
                sourceUrl: 'https://p.example/x',
                targetUrl: 'https://northside.example/',
                anchorText: 'x',
                anchorType: 'generic',
                category: o.category,
              });
            }
          } catch (error) {
            // Refusals (a revision that does not exist yet, a blank title) are part of the sequence.
            const code = error instanceof Error && 'code' in error ? error.code : null;
            if (code !== 'not_found' && code !== 'invalid_request') throw error;
          }
        }
        await catchUpAll(runtime.db);
        const live = await snapshotReadModels(runtime.db);
        await rebuildAll(runtime);
        expect(await snapshotReadModels(runtime.db)).toEqual(live);
      }),
      { numRuns: backend === 'pglite' ? 6 : 12 },
    );
  });
});
