import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, type Runtime } from '../../apps/runtime.ts';
import { fold } from '../../domain/article/decider.ts';
import { type ArticleEvent, articleStream } from '../../domain/article/events.ts';
import { DomainError } from '../../domain/errors.ts';
import { readArticleSnapshot } from '../../projections/article-snapshots.ts';
import { findArticle } from '../../projections/articles.ts';
import { listRevisions } from '../../projections/revisions.ts';
import { backends } from '../support/db.ts';
import {
  apiKeyActor,
  createTestRuntime,
  pipelineActor,
  protectedBody,
  setUpAccount,
} from '../support/runtime.ts';

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
  return 'resolved';
}

describe.each(backends)('command handlers on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let accountId: string;
  let siteId: string;
  let otherAccount: { accountId: string; siteId: string };
  const api = { origin: 'api' as const, actor: apiKeyActor };

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    ({ accountId, siteId } = await setUpAccount(runtime));
    otherAccount = await setUpAccount(runtime, 'Rival Ltd');
  });
  afterAll(async () => drop());

  async function newArticle(n: number): Promise<string> {
    const { articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: `Title ${n}`,
        body: protectedBody(n),
        url: `https://northside.example/${n}`,
        status: 'published',
        publishedAt: '2026-11-01T09:00:00Z',
        targetKeyword: 'boilers',
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    );
    return articleId;
  }

  it('an edit is a revision with origin, actor and reason, visible to the next read', async () => {
    const id = await newArticle(1);
    const result = await runtime.commands.editArticle(
      accountId,
      id,
      { title: 'New title', reason: 'SEO' },
      api,
    );
    expect(result).toMatchObject({ changed: true, revision: 2, sanitized: [] });
    expect(result.article.title).toBe('New title');
    const revisions = await listRevisions(runtime.db, id, { page: 1, perPage: 10 });
    expect(revisions.total).toBe(2);
    expect(revisions.rows[0]).toMatchObject({
      revision: 2,
      origin: 'api',
      actor: apiKeyActor,
      reason: 'SEO',
      title: 'New title',
    });
    expect(revisions.rows[1]).toMatchObject({ revision: 1, origin: 'rewrite', title: 'Title 1' });
  });

  it('an edit that drops a protected link is refused and nothing changes', async () => {
    const id = await newArticle(2);
    expect(
      await codeOf(runtime.commands.editArticle(accountId, id, { title: 'x', body: '<p>gone</p>' }, api)),
    ).toBe('protected_links_modified');
    const article = await findArticle(runtime.db, accountId, id);
    expect(article).toMatchObject({ revision: 1, title: 'Title 2', body: protectedBody(2) });
    expect((await runtime.store.readStream(`article-${id}`)).length).toBe(1);
  });

  it('an edit that changes nothing creates no revision', async () => {
    const id = await newArticle(3);
    const result = await runtime.commands.editArticle(
      accountId,
      id,
      { title: 'Title 3', body: protectedBody(3) },
      api,
    );
    expect(result).toMatchObject({ changed: false, revision: 1 });
  });

  it("another account's article is not found, for every command", async () => {
    const id = await newArticle(4);
    const other = otherAccount.accountId;
    expect(await codeOf(runtime.commands.editArticle(other, id, { title: 'x' }, api))).toBe('not_found');
    expect(await codeOf(runtime.commands.restoreRevision(other, id, { revision: 1 }, api))).toBe('not_found');
    expect(await codeOf(runtime.commands.articleAt(other, id, 1))).toBe('not_found');
    expect(
      await codeOf(
        runtime.commands.replaceFeaturedImage(
          other,
          id,
          { featuredImage: { url: 'https://x.example/a.png', alt: '', width: null, height: null } },
          api,
        ),
      ),
    ).toBe('not_found');
    expect(await codeOf(runtime.commands.changeArticleStatus(other, id, { status: 'archived' }, api))).toBe(
      'not_found',
    );
    expect(
      await codeOf(runtime.commands.editArticle(accountId, 'art_does_not_exist', { title: 'x' }, api)),
    ).toBe('not_found');
    expect(
      await codeOf(
        runtime.commands.createArticle(
          other,
          {
            siteId,
            title: 't',
            body: '',
            url: 'https://x.example/',
            status: 'draft',
            publishedAt: null,
            targetKeyword: null,
            featuredImage: null,
          },
          api,
        ),
      ),
    ).toBe('not_found');
  });

  it('an article snapshot holds no body; loaded, it is the state the whole stream folds to', async () => {
    const id = await newArticle(7);
    await runtime.commands.editArticle(accountId, id, { title: 'Only the title' }, api);
    await runtime.commands.editArticle(accountId, id, { body: `${protectedBody(7)}<p>More.</p>` }, api);
    await runtime.commands.editArticle(accountId, id, { title: 'And the title again' }, api);
    const stored = await runtime.db
      .selectFrom('article_snapshots')
      .select(['version', 'state'])
      .where('article_id', '=', id)
      .executeTakeFirstOrThrow();
    expect(stored.version).toBe(4);
    expect(stored.state).not.toHaveProperty('body');
    const events = await runtime.store.readStream<ArticleEvent>(articleStream(id));
    const folded = fold(events);
    expect(await readArticleSnapshot(runtime.db, id)).toEqual({
      version: 4,
      state: folded,
      streamVersion: 4,
    });
    expect(folded).toMatchObject({ title: 'And the title again', body: `${protectedBody(7)}<p>More.</p>` });
  });

  it('a snapshot out of step with the article row is not used: the command folds the stream', async () => {
    const id = await newArticle(8);
    await runtime.commands.editArticle(accountId, id, { title: 'Second' }, api);
    // As if the snapshot were behind the body row (it never is: both are written in one transaction),
    // and this runtime remembered nothing of the article.
    runtime.snapshots.forget(id);
    await runtime.db
      .updateTable('article_snapshots')
      .set({ version: 1 })
      .where('article_id', '=', id)
      .execute();
    expect(await readArticleSnapshot(runtime.db, id)).toBeUndefined();
    const edited = await runtime.commands.editArticle(
      accountId,
      id,
      { body: `${protectedBody(8)}<p>Third.</p>` },
      api,
    );
    expect(edited).toMatchObject({ changed: true, revision: 3 });
    expect(edited.article).toMatchObject({ title: 'Second', body: `${protectedBody(8)}<p>Third.</p>` });
    expect((await readArticleSnapshot(runtime.db, id))?.version).toBe(3);
  });

  it('a change starts from the state the last one left, and from a read when another process wrote since', async () => {
    const id = await newArticle(9);
    const edited = await runtime.commands.editArticle(accountId, id, { title: 'Second' }, api);
    expect(runtime.snapshots.recall(id)).toEqual({
      version: 2,
      state: expect.objectContaining({ title: 'Second' }),
    });
    // Another process on the same database (its own runtime, its own memory) edits the article: this
    // runtime's remembered version 2 is no longer the head.
    const other = createRuntime(runtime.handle);
    await other.commands.editArticle(accountId, id, { body: `${protectedBody(9)}<p>Elsewhere.</p>` }, api);
    expect(runtime.snapshots.recall(id)?.version).toBe(2);
    // Its append at version 2 conflicts; it reads the article and applies on top of the other's edit.
    const third = await runtime.commands.editArticle(accountId, id, { title: 'Fourth' }, api);
    expect(edited.revision).toBe(2);
    expect(third).toMatchObject({ changed: true, revision: 4 });
    expect(third.article).toMatchObject({ title: 'Fourth', body: `${protectedBody(9)}<p>Elsewhere.</p>` });
    expect(runtime.snapshots.recall(id)?.version).toBe(4);
    const events = await runtime.store.readStream<ArticleEvent>(articleStream(id));
    expect(runtime.snapshots.recall(id)?.state).toEqual(fold(events));
    // With an expectation of the revision it remembered, the stale memory is a refusal, as a read would be.
    await other.commands.editArticle(accountId, id, { title: 'Fifth' }, api);
    expect(
      await codeOf(runtime.commands.editArticle(accountId, id, { title: 'Late', expectedRevision: 4 }, api)),
    ).toBe('revision_mismatch');
    expect((await findArticle(runtime.db, accountId, id))?.title).toBe('Fifth');
  });

  it('two concurrent edits at the same expected revision: exactly one wins', async () => {
    const id = await newArticle(5);
    const results = await Promise.allSettled([
      runtime.commands.editArticle(accountId, id, { title: 'A', expectedRevision: 1 }, api),
      runtime.commands.editArticle(accountId, id, { title: 'B', expectedRevision: 1 }, api),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect((lost[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'revision_mismatch' });
    expect((await findArticle(runtime.db, accountId, id))?.revision).toBe(2);
  });

  it('concurrent edits without an expectation both apply, one after the other (retry on conflict)', async () => {
    const id = await newArticle(6);
    await Promise.all([
      runtime.commands.editArticle(accountId, id, { title: 'First' }, api),
      runtime.commands.editArticle(accountId, id, { title: 'Second' }, api),
    ]);
    const article = await findArticle(runtime.db, accountId, id);
    expect(article?.revision).toBe(3);
  });

  describe('edits queued behind one another on an article', () => {
    /** The transaction each revision's event was appended in, by revision. */
    async function transactions(id: string): Promise<bigint[]> {
      const events = await runtime.store.readStream<ArticleEvent>(articleStream(id));
      return events.map((event) => event.transactionId);
    }

    it('are appended together: one append for those that waited, each answered with its own revision', async () => {
      const id = await newArticle(20);
      const results = await Promise.all(
        ['A', 'B', 'C', 'D', 'E', 'F'].map((title) =>
          runtime.commands.editArticle(accountId, id, { title }, api),
        ),
      );
      expect(results.map((r) => [r.revision, r.article.title])).toEqual([
        [2, 'A'],
        [3, 'B'],
        [4, 'C'],
        [5, 'D'],
        [6, 'E'],
        [7, 'F'],
      ]);
      // The first went alone; the five queued behind it went in one append (one transaction).
      const [created, first, ...rest] = await transactions(id);
      expect(new Set(rest).size).toBe(1);
      expect(new Set([created, first, rest[0]]).size).toBe(3);
      // The read models are what the edits one by one would leave.
      const article = await findArticle(runtime.db, accountId, id);
      expect(article).toMatchObject({ title: 'F', revision: 7 });
      const revisions = await listRevisions(runtime.db, id, { page: 1, perPage: 10 });
      expect(revisions.rows.map((r) => [r.revision, r.title])).toEqual([
        [7, 'F'],
        [6, 'E'],
        [5, 'D'],
        [4, 'C'],
        [3, 'B'],
        [2, 'A'],
        [1, 'Title 20'],
      ]);
      expect(new Set(revisions.rows.map((r) => r.word_count)).size).toBe(1);
      const events = await runtime.store.readStream<ArticleEvent>(articleStream(id));
      expect((await readArticleSnapshot(runtime.db, id))?.state).toEqual(
        expect.objectContaining({ ...fold(events), body: protectedBody(20) }),
      );
      expect(runtime.snapshots.recall(id)).toEqual({ version: 7, state: fold(events) });
    });

    it('each decide on the state the ones before made: a refusal answers its caller alone', async () => {
      const id = await newArticle(21);
      // Title edits only: a body is sanitised before its command queues, which would change the order.
      const results = await Promise.allSettled([
        runtime.commands.editArticle(accountId, id, { title: 'First' }, api),
        runtime.commands.editArticle(accountId, id, { title: 'Second', expectedRevision: 2 }, api),
        runtime.commands.editArticle(accountId, id, { title: 'Stale', expectedRevision: 2 }, api),
        runtime.commands.editArticle(accountId, id, { title: 'Second' }, api),
        runtime.commands.editArticle(accountId, id, { title: 'Third', expectedRevision: 3 }, api),
      ]);
      expect(
        results.map((r) => (r.status === 'fulfilled' ? [r.value.changed, r.value.revision] : r.reason.code)),
      ).toEqual([[true, 2], [true, 3], 'revision_mismatch', [false, 3], [true, 4]]);
      const article = await findArticle(runtime.db, accountId, id);
      expect(article).toMatchObject({ title: 'Third', revision: 4 });
      const [, , ...together] = await transactions(id);
      expect(together).toHaveLength(2);
      expect(new Set(together).size).toBe(1);
    });

    it("each meet only their own key's refusal: a revoked key fails its edit, the others are made", async () => {
      const { keyId: live } = await runtime.commands.createApiKey(accountId, {
        name: 'Live',
        scope: 'write',
      });
      const { keyId: revoked } = await runtime.commands.createApiKey(accountId, {
        name: 'Gone',
        scope: 'write',
      });
      await runtime.commands.revokeApiKey(accountId, revoked);
      const id = await newArticle(22);
      const keyed = (confirmKey: string) => ({ ...api, confirmKey });
      const results = await Promise.allSettled([
        runtime.commands.editArticle(accountId, id, { title: 'Alone' }, keyed(live)),
        runtime.commands.editArticle(accountId, id, { title: 'Kept' }, keyed(live)),
        runtime.commands.editArticle(accountId, id, { title: 'Refused' }, keyed(revoked)),
        runtime.commands.editArticle(accountId, id, { title: 'Also kept' }, keyed(live)),
      ]);
      expect(
        results.map((r) =>
          r.status === 'fulfilled' ? [r.value.article.title, r.value.revision] : r.reason.code,
        ),
      ).toEqual([['Alone', 2], ['Kept', 3], 'unauthenticated', ['Also kept', 4]]);
      expect(await findArticle(runtime.db, accountId, id)).toMatchObject({ title: 'Also kept', revision: 4 });
    });

    it('decide again, together, when another process appended first', async () => {
      const id = await newArticle(23);
      await runtime.commands.editArticle(accountId, id, { title: 'Remembered' }, api);
      const other = createRuntime(runtime.handle);
      await other.commands.editArticle(accountId, id, { body: `${protectedBody(23)}<p>Elsewhere.</p>` }, api);
      const results = await Promise.all(
        ['One', 'Two', 'Three'].map((title) => runtime.commands.editArticle(accountId, id, { title }, api)),
      );
      expect(results.map((r) => [r.revision, r.article.title, r.article.body])).toEqual([
        [4, 'One', `${protectedBody(23)}<p>Elsewhere.</p>`],
        [5, 'Two', `${protectedBody(23)}<p>Elsewhere.</p>`],
        [6, 'Three', `${protectedBody(23)}<p>Elsewhere.</p>`],
      ]);
      const events = await runtime.store.readStream<ArticleEvent>(articleStream(id));
      expect(runtime.snapshots.recall(id)).toEqual({ version: 6, state: fold(events) });
    });
  });

  it('restore replays to revision n and appends it as a new revision', async () => {
    const id = await newArticle(7);
    await runtime.commands.editArticle(
      accountId,
      id,
      { title: 'Changed', body: `${protectedBody(7)}<p>extra</p>` },
      api,
    );
    const at1 = await runtime.commands.articleAt(accountId, id, 1);
    expect(at1.exists && at1.title).toBe('Title 7');
    const result = await runtime.commands.restoreRevision(
      accountId,
      id,
      { revision: 1, reason: 'back' },
      { origin: 'editor', actor: apiKeyActor },
    );
    expect(result).toMatchObject({ changed: true, revision: 3 });
    expect(result.article).toMatchObject({ title: 'Title 7', body: protectedBody(7) });
    const revisions = await listRevisions(runtime.db, id, { page: 1, perPage: 10 });
    expect(revisions.rows[0]).toMatchObject({
      revision: 3,
      origin: 'editor',
      restored_from: 1,
      reason: 'back',
    });
    expect(await codeOf(runtime.commands.articleAt(accountId, id, 9))).toBe('not_found');
  });

  it('the event store refuses an event that does not match its schema', async () => {
    await expect(
      runtime.store.append(
        'site-bad',
        // @ts-expect-error: the store's type refuses the event too; its validation is what is tested
        [{ type: 'SiteAdded', data: { siteId: 'x' }, metadata: { at: new Date().toISOString() } }],
        {
          expectedVersion: 'no_stream',
        },
      ),
    ).rejects.toThrow(/SiteAdded/);
    expect(await runtime.store.readStream('site-bad')).toEqual([]);
  });
});
