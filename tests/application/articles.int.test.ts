import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Call, callOf, type EditLimit, type Principal, unwrap } from '../../apps/application/call.ts';
import { type Application, createApplication } from '../../apps/application/index.ts';
import type { Runtime } from '../../apps/runtime.ts';
import type { DomainError } from '../../domain/errors.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { refusal } from '../support/errors.ts';
import { mediaFiles } from '../support/media.ts';
import { apiKeyActor, createTestRuntime, protectedBody, setUpAccount } from '../support/runtime.ts';

/*
 * The use cases on their own, as every face calls them: a principal and plain inputs in, wire objects
 * or typed refusals out as outcomes, with the subject touched and the edit limit's decision.
 */

/** An edit limit of `quota` a day for every account, counted here. */
function quotaOf(quota: number): EditLimit & { taken: number } {
  const limit = {
    taken: 0,
    async take() {
      limit.taken++;
      const allowed = limit.taken <= quota;
      return {
        policy: { name: 'edits', quota, window: 'utc-day' as const },
        allowed,
        remaining: Math.max(0, quota - limit.taken),
        resetSeconds: 3600,
      };
    },
  };
  return limit;
}

describe('the application layer', () => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let mediaDir: string;
  let mine: { accountId: string; siteId: string };
  let theirs: { accountId: string; siteId: string };
  let articleId: string;
  let png: Uint8Array;
  const limit = quotaOf(1000);

  const app = (): Application =>
    createApplication({
      db: runtime.db,
      commands: runtime.commands,
      publicUrl: 'https://content.example',
      now: () => new Date('2026-11-05T12:00:00Z'),
      editLimit: limit,
      media: createDirectoryMediaStore(mediaDir),
      fetchImage: async () => png,
    });
  /** The application with an edit limit of none a day. */
  const withNoEdits = (): Application =>
    createApplication({
      db: runtime.db,
      commands: runtime.commands,
      publicUrl: 'https://content.example',
      now: () => new Date(),
      editLimit: quotaOf(0),
      media: createDirectoryMediaStore(mediaDir),
      fetchImage: async () => png,
    });
  const principal = (accountId: string, scope: 'read' | 'write' = 'write'): Principal => ({
    accountId,
    actor: apiKeyActor,
    origin: 'editor',
    scope,
  });

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime('postgres'));
    mediaDir = await mkdtemp(join(tmpdir(), 'cs-app-'));
    mine = await setUpAccount(runtime);
    theirs = await setUpAccount(runtime, 'Rival Ltd');
    ({ articleId } = await runtime.commands.createArticle(
      mine.accountId,
      {
        siteId: mine.siteId,
        title: 'Boilers',
        body: protectedBody(1),
        url: 'https://northside.example/boilers',
        status: 'published',
        publishedAt: '2026-11-01T09:00:00.000Z',
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: apiKeyActor },
    ));
    png = new Uint8Array(
      await sharp({ create: { width: 40, height: 30, channels: 3, background: '#336699' } })
        .png()
        .toBuffer(),
    );
  });

  afterAll(async () => {
    await drop?.();
    if (mediaDir) await rm(mediaDir, { recursive: true, force: true });
  });

  it("answers another account's article exactly as a missing one, and says what the call touched", async () => {
    const foreign = app().articles.get(callOf(principal(theirs.accountId)), articleId);
    expect(await refusal(foreign)).toBe('not_found');
    expect(await refusal(app().articles.get(callOf(principal(mine.accountId)), 'art_missing'))).toBe(
      'not_found',
    );
    expect((await foreign).subject).toEqual({ siteId: null, articleId, revision: null });

    const own = await app().articles.get(callOf(principal(mine.accountId)), articleId);
    expect(unwrap(own)).toMatchObject({ id: articleId, site_id: mine.siteId, title: 'Boilers' });
    expect(own.subject).toEqual({ siteId: mine.siteId, articleId, revision: null });
  });

  it('reads an article unless the caller holds its current revision, with the same refusals', async () => {
    const call = callOf(principal(mine.accountId));
    const article = unwrap(await app().articles.get(call, articleId));
    const { revision } = article;
    const held = await app().articles.getUnlessHeld(call, articleId, revision);
    expect(unwrap(held)).toEqual({ revision, article: null });
    expect(held.subject).toEqual({ siteId: mine.siteId, articleId, revision: null });
    for (const other of [undefined, revision + 1]) {
      const read = unwrap(await app().articles.getUnlessHeld(call, articleId, other));
      expect(read.revision).toBe(revision);
      // The article as JSON text (its body as escaped when stored): the same JSON as `get` gives, written.
      expect(read.article).toBe(JSON.stringify(article));
    }
    const foreign = app().articles.getUnlessHeld(callOf(principal(theirs.accountId)), articleId, revision);
    expect(await refusal(foreign)).toBe('not_found');
    expect((await foreign).subject).toEqual({ siteId: null, articleId, revision: null });
  });

  it("makes an edit a revision of the principal's origin, with the edit limit's decision in its outcome", async () => {
    const call = callOf(principal(mine.accountId));
    const outcome = await app().articles.edit(call, { articleId, title: 'Boilers in winter' });
    const write = unwrap(outcome);
    expect(write.replayed).toBe(false);
    expect(write.change).toMatchObject({ title: 'Boilers in winter', changed: true, revision: 2 });
    expect(outcome.edits).toMatchObject({ allowed: true, policy: { name: 'edits' } });
    expect(outcome.subject).toEqual({ siteId: mine.siteId, articleId, revision: 2 });
    const revisions = unwrap(await app().revisions.list(call, articleId, { page: 1, per_page: 10 }));
    expect(revisions.data[0]).toMatchObject({ revision: 2, origin: 'editor' });
    expect(revisions.meta).toEqual({ page: 1, per_page: 10, total: 2, total_pages: 1 });
  });

  it('refuses a write past the edit limit with the decision in its outcome, and changes nothing', async () => {
    const strict = withNoEdits();
    const call = callOf(principal(mine.accountId));
    const before = unwrap(await strict.articles.get(callOf(principal(mine.accountId)), articleId));
    const refused = strict.articles.edit(call, { articleId, title: 'Never saved' });
    expect(await refusal(refused)).toBe('edit_limit_reached');
    expect((await refused).edits).toMatchObject({ allowed: false, remaining: 0, resetSeconds: 3600 });
    expect(unwrap(await strict.articles.get(callOf(principal(mine.accountId)), articleId)).revision).toBe(
      before.revision,
    );
  });

  it("checks a key no statement has confirmed in the edit's own append: live, the edit is made; revoked, refused first, saying nothing more", async () => {
    const { keyId } = await runtime.commands.createApiKey(mine.accountId, { name: 'Edits', scope: 'write' });
    // The article is one this runtime remembers (its own commands created and edited it): no owner's read.
    expect(runtime.commands.knownArticle(articleId)).toEqual({
      accountId: mine.accountId,
      siteId: mine.siteId,
    });
    const keyed = (): Principal => ({ ...principal(mine.accountId), liveKey: keyId });
    const live = await app().articles.edit(callOf(keyed()), { articleId, title: 'Keyed edit' });
    expect(unwrap(live).change).toMatchObject({ title: 'Keyed edit', changed: true });
    expect(live.subject.siteId).toBe(mine.siteId);
    // Nothing to change: the key is still checked.
    expect(
      unwrap(await app().articles.edit(callOf(keyed()), { articleId, title: 'Keyed edit' })).change.changed,
    ).toBe(false);

    await runtime.commands.revokeApiKey(mine.accountId, keyId);
    const before = unwrap(await app().articles.get(callOf(principal(mine.accountId)), articleId)).revision;
    const strict = withNoEdits();
    for (const [application, title] of [
      [app(), 'After revocation'],
      [app(), 'Keyed edit'],
      [strict, 'Past the limit too'],
    ] as const) {
      const refused = await application.articles.edit(callOf(keyed()), { articleId, title });
      expect(await refusal(Promise.resolve(refused))).toBe('unauthenticated');
      // As an owner's read would have refused it: neither the site nor an edit-limit decision is said.
      expect(refused.subject).toEqual({ siteId: null, articleId, revision: null });
      expect(refused.edits).toBeNull();
    }
    expect(unwrap(await app().articles.get(callOf(principal(mine.accountId)), articleId)).revision).toBe(
      before,
    );
  });

  it('refuses a write to a read-only principal, whichever face forgot to', async () => {
    const call = callOf(principal(mine.accountId, 'read'));
    expect(await refusal(app().articles.edit(call, { articleId, title: 'Read only' }))).toBe(
      'insufficient_scope',
    );
  });

  it('replays an idempotent retry without a second revision or a second counted edit', async () => {
    const idempotency = { key: `retry-${Date.now()}`, request: ['PUT', articleId, { title: 'Once' }] };
    const first = unwrap(
      await app().articles.edit(callOf(principal(mine.accountId)), { articleId, title: 'Once' }, idempotency),
    );
    const counted = limit.taken;
    const again = unwrap(
      await app().articles.edit(callOf(principal(mine.accountId)), { articleId, title: 'Once' }, idempotency),
    );
    expect(again).toEqual({ replayed: true, change: first.change });
    expect(limit.taken).toBe(counted);
  });

  it('stores no image for a write refused as stale, and stores one for an accepted replacement', async () => {
    const call: Call = callOf(principal(mine.accountId));
    const current = unwrap(await app().articles.get(call, articleId)).revision;
    const stale = app().articles.replaceFeaturedImage(call, {
      articleId,
      image: { url: 'https://images.example/a.png', alt: 'A boiler' },
      expectedRevision: current - 1,
    });
    expect(await refusal(stale)).toBe('revision_mismatch');
    expect(await mediaFiles(mediaDir)).toEqual([]);

    const write = unwrap(
      await app().articles.replaceFeaturedImage(call, {
        articleId,
        image: { upload: async () => ({ bytes: png, alt: 'A boiler' }) },
        expectedRevision: current,
      }),
    );
    expect(write.change.featured_image).toMatchObject({ alt: 'A boiler', width: 40, height: 30 });
    expect(write.change.featured_image?.url).toMatch(/^https:\/\/content\.example\/media\//);
    expect(await mediaFiles(mediaDir)).toHaveLength(1);
  });

  it('compares two revisions by replay; over the diff budget, or with no worker free in time, refuses with links to both', async () => {
    const call: Call = callOf(principal(mine.accountId, 'read'));
    const latest = unwrap(await app().articles.get(call, articleId)).revision;
    const compared = await app().revisions.compare(call, articleId, { from: 1, to: latest });
    expect(compared.subject).toMatchObject({ articleId, siteId: mine.siteId, revision: null });
    expect(unwrap(compared)).toMatchObject({ article_id: articleId, from: 1, to: latest });
    for (const answer of ['busy', null] as const) {
      const refused = await createApplication({
        db: runtime.db,
        commands: runtime.commands,
        publicUrl: 'https://content.example',
        now: () => new Date(),
        editLimit: limit,
        media: createDirectoryMediaStore(mediaDir),
        fetchImage: async () => png,
        diff: async () => answer,
      }).revisions.compare(call, articleId, { from: 1, to: latest });
      expect(refused.ok).toBe(false);
      const error = refused.ok ? null : (refused.error as DomainError);
      expect(error?.code).toBe('diff_too_large');
      expect(error?.links).toEqual({
        from: `/api/v1/articles/${articleId}/revisions/1`,
        to: `/api/v1/articles/${articleId}/revisions/${latest}`,
      });
    }
    expect(await refusal(app().revisions.compare(call, articleId, { from: 1, to: latest + 1 }))).toBe(
      'not_found',
    );
    const other: Call = callOf(principal(theirs.accountId, 'read'));
    expect(await refusal(app().revisions.compare(other, articleId, { from: 1, to: 1 }))).toBe('not_found');
  });
});
