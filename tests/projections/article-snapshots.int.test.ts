import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, SNAPSHOT_MEMORY } from '../../apps/runtime.ts';
import { type ArticleState, evolve, initialState } from '../../domain/article/decider.ts';
import { type ArticleEvent, articleStream } from '../../domain/article/events.ts';
import type { StoredEvent } from '../../infra/event-store.ts';
import { rebuild } from '../../infra/projection-runner.ts';
import {
  createArticleSnapshotsProjector,
  createSnapshotMemory,
  readArticleSnapshot,
  SNAPSHOT_HISTORY_EVERY,
} from '../../projections/article-snapshots.ts';
import { backends } from '../support/db.ts';
import {
  apiKeyActor,
  createTestRuntime,
  pipelineActor,
  protectedBody,
  setUpAccount,
} from '../support/runtime.ts';

describe('the snapshot memory', () => {
  it('keeps the snapshots of the articles read last, up to its capacity', () => {
    const memory = createSnapshotMemory(2);
    memory.remember('a', { version: 1, state: 'a1' });
    memory.remember('b', { version: 1, state: 'b1' });
    memory.remember('a', { version: 2, state: 'a2' });
    memory.remember('c', { version: 1, state: 'c1' });
    // b was read least recently: it goes; a's newer read replaced its older one.
    expect(memory.recall('b')).toBeUndefined();
    expect(memory.recall('a')).toEqual({ version: 2, state: 'a2' });
    expect(memory.recall('c')).toEqual({ version: 1, state: 'c1' });
    expect(memory.size).toBe(2);
  });

  it('forgets the oldest while the bodies it holds are over its budget, and never keeps a body over it', () => {
    const memory = createSnapshotMemory(10, 10);
    memory.remember('a', { version: 1, state: { body: 'aaaa' } });
    memory.remember('b', { version: 1, state: { body: 'bbbb' } });
    memory.remember('c', { version: 1, state: { exists: false } });
    memory.remember('d', { version: 1, state: { body: 'dddd' } });
    expect(memory.recall('a')).toBeUndefined();
    expect([memory.recall('b'), memory.recall('c'), memory.recall('d')].map((s) => s?.version)).toEqual([
      1, 1, 1,
    ]);
    memory.remember('b', { version: 2, state: { body: 'x'.repeat(11) } });
    expect(memory.recall('b')).toBeUndefined();
    memory.forget('d');
    expect(memory.recall('d')).toBeUndefined();
    memory.remember('e', { version: 1, state: { body: 'e'.repeat(10) } });
    expect(memory.size).toBe(2);
    expect(memory.recall('e')?.version).toBe(1);
  });

  it('refuses a capacity that would keep nothing', () => {
    expect(() => createSnapshotMemory(0)).toThrow(RangeError);
    expect(() => createSnapshotMemory(Number.NaN)).toThrow(RangeError);
  });
});

/** The new events of `stored`, as another database's store would take them. */
function asNew(stored: StoredEvent<ArticleEvent>, data: Record<string, unknown>): ArticleEvent {
  return { type: stored.type, data: { ...stored.data, ...data }, metadata: stored.metadata } as ArticleEvent;
}

function fold(events: readonly StoredEvent<ArticleEvent>[]): ArticleState {
  return events.reduce((s, e) => evolve(s, e), initialState);
}

/**
 * Every runtime has its own memory of the snapshots its commands read (apps/runtime.ts). Two
 * runtimes in one process (the server's and a test's, or two databases) must not see each other's:
 * a snapshot read in one database would otherwise stand in for the same article's in the other.
 */
describe.each(backends)('snapshot memories of two runtimes in one process, on %s', (backend) => {
  let one: Runtime;
  let other: Runtime;
  const drops: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    for (const target of ['one', 'other'] as const) {
      const { runtime, drop } = await createTestRuntime(backend);
      drops.push(drop);
      if (target === 'one') one = runtime;
      else other = runtime;
    }
  });
  afterAll(async () => {
    for (const drop of drops) await drop();
  });

  it('each runtime is given its own, of the configured size', () => {
    expect(one.snapshots).not.toBe(other.snapshots);
    expect(one.snapshots.capacity).toBe(SNAPSHOT_MEMORY);
  });

  it("one runtime's reads never stand in for the other's snapshots", async () => {
    // The same article id in two databases, with different content.
    const a = await setUpAccount(one);
    const b = await setUpAccount(other);
    const { articleId } = await one.commands.createArticle(
      a.accountId,
      {
        siteId: a.siteId,
        title: 'Written in the first database',
        body: protectedBody(1),
        url: `https://northside.example/memory/${crypto.randomUUID()}`,
        status: 'published',
        publishedAt: '2026-11-01T08:00:00Z',
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    );
    const stream = articleStream(articleId);
    const [created] = await one.store.readStream<ArticleEvent>(stream);
    if (created === undefined) throw new Error('the article must have been created');
    await other.store.append(
      stream,
      [
        asNew(created, {
          accountId: b.accountId,
          siteId: b.siteId,
          title: 'Written in the second database',
          url: `https://southside.example/memory/${crypto.randomUUID()}`,
        }),
      ],
      { expectedVersion: 'no_stream' },
    );

    // The first runtime remembers the state its create made (version 1); its edit starts there and
    // appends 2, which it remembers.
    expect(one.snapshots.recall(articleId)?.version).toBe(1);
    await one.commands.editArticle(
      a.accountId,
      articleId,
      { title: 'Edited in the first' },
      { origin: 'api', actor: apiKeyActor },
    );
    expect(one.snapshots.recall(articleId)?.version).toBe(2);
    expect(other.snapshots.recall(articleId)).toBeUndefined();

    // The second database's version 2, appended without a command (nothing read there first).
    const [, edited] = await one.store.readStream<ArticleEvent>(stream);
    if (edited === undefined) throw new Error('the article must have been edited');
    await other.store.append(stream, [asNew(edited, { title: 'Edited in the second' })], {
      expectedVersion: 1,
    });

    // Each database's snapshot is its own stream folded, not the other's.
    for (const runtime of [one, other]) {
      const snapshot = await readArticleSnapshot(runtime.db, articleId);
      expect(snapshot?.version).toBe(2);
      expect(snapshot?.state).toEqual(fold(await runtime.store.readStream<ArticleEvent>(stream)));
    }
    const theOther = await readArticleSnapshot(other.db, articleId);
    expect(theOther?.state).toMatchObject({ accountId: b.accountId, title: 'Edited in the second' });
  });
});

describe.each(backends)('the kept states of an article, on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let accountId: string;
  let articleId: string;
  const REVISIONS = 2 * SNAPSHOT_HISTORY_EVERY + 30;
  const caller = { origin: 'api' as const, actor: apiKeyActor };
  const history = async () =>
    runtime.db
      .selectFrom('article_snapshot_history')
      .select(['version', 'state'])
      .where('article_id', '=', articleId)
      .orderBy('version')
      .execute();

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    const account = await setUpAccount(runtime);
    accountId = account.accountId;
    ({ articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId: account.siteId,
        title: 'Revision 1',
        body: protectedBody(1),
        url: 'https://northside.example/blog/kept',
        status: 'draft',
        publishedAt: null,
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    ));
    // Every kind of change, with stretches of title-only edits across the kept versions (100, 200):
    // the body at a kept version then comes from an event before it.
    for (let n = 2; n <= REVISIONS; n++) {
      if (n === 57) {
        await runtime.commands.changeArticleStatus(
          accountId,
          articleId,
          { status: 'published', publishedAt: '2026-11-01T09:00:00Z' },
          caller,
        );
      } else if (n === 143) {
        await runtime.commands.replaceFeaturedImage(
          accountId,
          articleId,
          { featuredImage: { url: 'https://content.example/media/a.png', alt: 'A', width: 10, height: 10 } },
          caller,
        );
      } else if (n === 170) {
        await runtime.commands.restoreRevision(accountId, articleId, { revision: 12 }, caller);
      } else {
        const body = n % 7 === 0 ? `${protectedBody(1)}<p>Change ${n}.</p>` : undefined;
        await runtime.commands.editArticle(accountId, articleId, { title: `Revision ${n}`, body }, caller);
      }
    }
  });

  afterAll(async () => {
    await drop?.();
  });

  it('keeps the state every SNAPSHOT_HISTORY_EVERY versions, without its body, as a rebuild does', async () => {
    const kept = await history();
    expect(kept.map((k) => k.version)).toEqual([SNAPSHOT_HISTORY_EVERY, 2 * SNAPSHOT_HISTORY_EVERY]);
    for (const k of kept) {
      expect(k.state).toMatchObject({ exists: true, revision: k.version, title: `Revision ${k.version}` });
      expect(k.state).not.toHaveProperty('body');
    }
    await rebuild(runtime.db, createArticleSnapshotsProjector());
    expect(await history()).toEqual(kept);
  });

  it('folds an article to any revision from the kept state before it as from its first event', async () => {
    const all = await runtime.store.readStream<ArticleEvent>(articleStream(articleId));
    expect(all).toHaveLength(REVISIONS);
    let state: ArticleState = initialState;
    for (const event of all) {
      state = evolve(state, event);
      expect(await runtime.commands.articleAt(accountId, articleId, event.version)).toEqual(state);
    }
  });
});
