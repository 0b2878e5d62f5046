import fc from 'fast-check';
import { type SqlBool, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import {
  type ArticleCommand,
  type ArticleState,
  decide,
  evolve,
  initialState,
} from '../../domain/article/decider.ts';
import { type ArticleEvent, articleStream } from '../../domain/article/events.ts';
import {
  handles,
  IN_TRANSACTION,
  type InlineProjector,
  inStatement,
  type Pending,
  projectInTransaction,
  runTogether,
} from '../../infra/projection.ts';
import { readArticleSnapshot, SNAPSHOT_HISTORY_EVERY } from '../../projections/article-snapshots.ts';
import { createProjectors } from '../../projections/index.ts';
import { backends } from '../support/db.ts';
import {
  apiKeyActor,
  createTestRuntime,
  pipelineActor,
  protectedBody,
  setUpAccount,
  snapshotReadModels,
} from '../support/runtime.ts';

/** Thrown to roll a transaction back once its rows are read. */
class Rollback extends Error {}

/** A projector's statements of one stream's events within an append's statement, guarded by `appended`. */
function statementsOf(p: InlineProjector, events: readonly Pending[], appended: SqlBool) {
  return inStatement(p.project(events, { appended: () => sql<SqlBool>`${sql.lit(appended)}` }));
}

/**
 * `Projector.project` within an append's statement: the statements it runs within its own statement
 * must change nothing unless the event was appended (the guard), and exactly what `project` in a
 * transaction changes when it was.
 */
describe.each(backends)('inline projectors as statements, on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  });
  afterAll(async () => drop());

  const who = { origin: 'api' as const, actor: apiKeyActor, reason: 'test' };
  const next: [string, (articleId: string) => ArticleCommand][] = [
    [
      'an edit of the title and body',
      (articleId) => edit(articleId, { title: 'New title', body: `${protectedBody(1)}<p>more</p>` }),
    ],
    ['an edit of the title alone', (articleId) => edit(articleId, { title: 'Only the title' })],
    [
      'an edit of the body alone',
      (articleId) => edit(articleId, { body: `${protectedBody(1)}<p>other</p>` }),
    ],
    [
      'a new featured image',
      (articleId) => ({
        type: 'ReplaceFeaturedImage',
        data: {
          articleId,
          featuredImage: { url: 'https://cdn.example/a.png', alt: 'A', width: 10, height: 20 },
          ...who,
        },
        metadata: { at: '2026-11-22T12:00:00.000Z' },
      }),
    ],
    [
      'a restore',
      (articleId) => ({
        type: 'RestoreRevision',
        data: { articleId, revision: 1, snapshot: atRevision1, ...who },
        metadata: { at: '2026-11-22T12:00:00.000Z' },
      }),
    ],
  ];
  /** The article at revision 1, for the restore (as the command replays it). */
  let atRevision1: ArticleState = initialState;
  function edit(articleId: string, change: { title?: string; body?: string }): ArticleCommand {
    return {
      type: 'EditArticle',
      data: { articleId, title: change.title, body: change.body, ...who },
      metadata: { at: '2026-11-22T12:00:00.000Z' },
    };
  }

  it.each(next)('%s: nothing when not appended, what apply does when appended', async (_, command) => {
    const { accountId, siteId } = await setUpAccount(runtime);
    const { articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: 'First title',
        body: protectedBody(1),
        url: `https://northside.example/statements/${crypto.randomUUID()}`,
        status: 'published',
        publishedAt: '2026-11-01T08:00:00Z',
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    );
    await runtime.commands.editArticle(
      accountId,
      articleId,
      { title: 'Second title' },
      { origin: 'api', actor: apiKeyActor },
    );

    // The next event, as a command decides it, and as the append hands it over (JSON as stored).
    atRevision1 = await runtime.commands.articleAt(accountId, articleId, 1);
    const history = await runtime.store.readStream<ArticleEvent>(articleStream(articleId));
    const state = history.reduce((s, e) => evolve(s, e), initialState);
    const [event] = decide(command(articleId), state);
    if (event === undefined) throw new Error('the command must decide an event');
    const pending = {
      ...JSON.parse(JSON.stringify(event)),
      eventId: crypto.randomUUID(),
      streamId: articleStream(articleId),
      version: history.length + 1,
    } as Pending;
    // The snapshot the command reads before it appends (the snapshot projector starts from it).
    await readArticleSnapshot(runtime.db, articleId, runtime.snapshots);

    const inline = createProjectors({ snapshots: runtime.snapshots }).filter(
      (p): p is InlineProjector => p.mode === 'inline' && handles(p, pending.type),
    );
    const statementsWhen = (appended: SqlBool) =>
      inline.flatMap((p) => {
        const own = statementsOf(p, [pending], appended);
        if (own === IN_TRANSACTION) throw new Error(`${p.name} gives no statements for ${pending.type}`);
        return own;
      });

    const before = await snapshotReadModels(runtime.db);
    await runtime.db.transaction().execute((trx) => runTogether(trx, statementsWhen(false)));
    expect(await snapshotReadModels(runtime.db)).toEqual(before);

    const byStatements = await rowsAfter((trx) => runTogether(trx, statementsWhen(true)));
    const byApply = await rowsAfter(async (trx) => {
      for (const p of inline)
        await projectInTransaction(p, [{ ...pending, position: 0n, transactionId: 0n }], trx);
    });
    expect(byStatements).toEqual(byApply);
    expect(byStatements).not.toEqual(before);
  });

  /** The rows after `change`, read in its transaction, which is then rolled back. */
  async function rowsAfter(change: (trx: Parameters<typeof runTogether>[0]) => Promise<void>) {
    let rows: Record<string, string[]> = {};
    await runtime.db
      .transaction()
      .execute(async (trx) => {
        await change(trx);
        rows = await snapshotReadModels(trx);
        throw new Rollback();
      })
      .catch((error) => {
        if (!(error instanceof Rollback)) throw error;
      });
    return rows;
  }

  it('a run of changes appended together: nothing when not appended, what apply of each in turn does when appended', async () => {
    const { accountId, siteId } = await setUpAccount(runtime);
    const kinds = ['title', 'body', 'both', 'image', 'restore', 'status'] as const;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...kinds), { minLength: 2, maxLength: 5 }), async (run) => {
        const pending = await pendingRun(accountId, siteId, run);
        fc.pre(pending.length >= 2);

        // Each projector's statements for the run; one that has none (the articles projector, for a run
        // with a status change, which it must read first) applies the run in turn on both sides.
        const inline = createProjectors({ snapshots: runtime.snapshots }).filter(
          (p): p is InlineProjector => p.mode === 'inline' && pending.some((e) => handles(p, e.type)),
        );
        const byRun = (appended: SqlBool) =>
          inline.map((p) => {
            const mine = pending.filter((e) => handles(p, e.type));
            const own = statementsOf(p, mine, appended);
            if (own === IN_TRANSACTION) {
              expect(p.name).toBe('articles@1');
              expect(run).toContain('status');
              return { p, mine, own: undefined };
            }
            return { p, mine, own };
          });
        const applyInTurn = async (
          p: InlineProjector,
          mine: Pending[],
          trx: Parameters<typeof runTogether>[0],
        ) => {
          for (const event of mine)
            await projectInTransaction(p, [{ ...event, position: 0n, transactionId: 0n }], trx);
        };

        const before = await snapshotReadModels(runtime.db);
        const refused = await rowsAfter((trx) =>
          runTogether(
            trx,
            byRun(false).flatMap((r) => r.own ?? []),
          ),
        );
        expect(refused).toEqual(before);

        const byStatements = await rowsAfter(async (trx) => {
          const parts = byRun(true);
          await runTogether(
            trx,
            parts.flatMap((r) => r.own ?? []),
          );
          for (const r of parts) if (r.own === undefined) await applyInTurn(r.p, r.mine, trx);
        });
        const byApply = await rowsAfter(async (trx) => {
          for (const p of inline)
            await applyInTurn(
              p,
              pending.filter((e) => handles(p, e.type)),
              trx,
            );
        });
        expect(byStatements).toEqual(byApply);
      }),
      { numRuns: 20 },
    );
  });

  it("runs of several articles appended together (group commit): what the runs' own statements do, for the streams appended only", async () => {
    const { accountId, siteId } = await setUpAccount(runtime);
    const kinds = ['title', 'body', 'both', 'image', 'restore', 'status'] as const;
    const runOf = fc.array(fc.constantFrom(...kinds), { minLength: 1, maxLength: 3 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ run: runOf, appended: fc.boolean() }), { minLength: 2, maxLength: 4 }),
        async (group) => {
          const runs: { pending: Pending[]; appended: boolean }[] = [];
          for (const { run, appended } of group) {
            const pending = await pendingRun(accountId, siteId, run);
            if (pending.length > 0) runs.push({ pending, appended });
          }
          fc.pre(runs.length >= 2);

          const inline = createProjectors({ snapshots: runtime.snapshots }).filter(
            (p): p is InlineProjector => p.mode === 'inline',
          );
          const appendedStreams = sql`(select unnest(${runs.filter((r) => r.appended).map((r) => r.pending[0]?.streamId ?? '')}::text[]))`;
          const grouped = inline.map((p) => {
            const mine = runs
              .map((r) => r.pending.filter((e) => handles(p, e.type)))
              .filter((m) => m.length > 0);
            return mine.length === 0
              ? []
              : inStatement(
                  p.project(mine.flat(), {
                    appended: (stream) => sql<SqlBool>`${stream} in ${appendedStreams}`,
                  }),
                );
          });
          // A run with a status change is read first by the articles projector: no group form.
          const withStatus = runs.some((r) => r.pending.some((e) => e.type === 'ArticleStatusChanged'));
          expect(grouped.includes(IN_TRANSACTION)).toBe(withStatus);
          fc.pre(!withStatus);

          const byGroup = await rowsAfter((trx) =>
            runTogether(
              trx,
              grouped.flatMap((own) => (own === IN_TRANSACTION ? [] : own)),
            ),
          );
          const byRuns = await rowsAfter((trx) =>
            runTogether(
              trx,
              runs.flatMap(({ pending, appended }) =>
                inline.flatMap((p) => {
                  const mine = pending.filter((e) => handles(p, e.type));
                  if (mine.length === 0) return [];
                  const own = statementsOf(p, mine, appended);
                  if (own === IN_TRANSACTION) throw new Error(`${p.name}: no statements`);
                  return own;
                }),
              ),
            ),
          );
          expect(byGroup).toEqual(byRuns);
        },
      ),
      { numRuns: 20 },
    );
  });

  it('a group whose run reaches a kept version keeps the state there, as the run alone does, when appended', async () => {
    const { accountId, siteId } = await setUpAccount(runtime);
    // Versions SNAPSHOT_HISTORY_EVERY - 1 to + 1 on one article, 3 on another.
    const crossing = await pendingRun(
      accountId,
      siteId,
      ['title', 'body', 'title'],
      SNAPSHOT_HISTORY_EVERY - 4,
    );
    const other = await pendingRun(accountId, siteId, ['title']);
    expect(crossing.map((e) => e.version)).toEqual([
      SNAPSHOT_HISTORY_EVERY - 1,
      SNAPSHOT_HISTORY_EVERY,
      SNAPSHOT_HISTORY_EVERY + 1,
    ]);
    const snapshots = createProjectors({ snapshots: runtime.snapshots }).find((p) =>
      p.name.startsWith('article_snapshots'),
    );
    if (snapshots?.mode !== 'inline') throw new Error('no inline snapshots projector');
    for (const appended of [true, false]) {
      const stream = crossing[0]?.streamId ?? '';
      const grouped = inStatement(
        snapshots.project([...crossing, ...other], {
          appended: (s) => sql<SqlBool>`${s} in (select unnest(${appended ? [stream] : []}::text[]))`,
        }),
      );
      if (grouped === IN_TRANSACTION) throw new Error('no group form');
      const byGroup = await rowsAfter((trx) => runTogether(trx, grouped));
      const byRun = await rowsAfter((trx) => {
        const own = statementsOf(snapshots, crossing, appended);
        if (own === IN_TRANSACTION) throw new Error('no statements');
        return runTogether(trx, own);
      });
      expect(byGroup.article_snapshot_history).toEqual(byRun.article_snapshot_history);
      const articleId = (crossing[0]?.streamId ?? '?').replace(/^article-/, '');
      const kept = (byRun.article_snapshot_history ?? []).filter((row) => row.includes(articleId));
      expect(kept).toHaveLength(appended ? 1 : 0);
    }
  });

  /**
   * A new article at revision 2 and the events of `run` on it, each decided on the state the ones
   * before made, as the append hands them over (JSON as stored, versions on from the stream's); the
   * snapshot read as the command reads it before it appends (the snapshot projector starts from it).
   */
  async function pendingRun(
    accountId: string,
    siteId: string,
    run: readonly Kind[],
    /** Title edits made before the run, after the second revision. */
    editsFirst = 0,
  ): Promise<Pending[]> {
    const { articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: 'First title',
        body: protectedBody(1),
        url: `https://northside.example/runs/${crypto.randomUUID()}`,
        status: 'published',
        publishedAt: '2026-11-01T08:00:00Z',
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    );
    await runtime.commands.editArticle(accountId, articleId, { title: 'Second title' }, who);
    for (let n = 0; n < editsFirst; n++) {
      await runtime.commands.editArticle(accountId, articleId, { title: `Title before ${n}` }, who);
    }
    const atFirst = await runtime.commands.articleAt(accountId, articleId, 1);
    const history = await runtime.store.readStream<ArticleEvent>(articleStream(articleId));
    await readArticleSnapshot(runtime.db, articleId, runtime.snapshots);
    let state = history.reduce((s, e) => evolve(s, e), initialState);
    const pending: Pending[] = [];
    run.forEach((kind, index) => {
      for (const event of decide(commandOf(articleId, kind, index, atFirst), state)) {
        state = evolve(state, event);
        pending.push({
          ...JSON.parse(JSON.stringify(event)),
          eventId: crypto.randomUUID(),
          streamId: articleStream(articleId),
          version: history.length + pending.length + 1,
        } as Pending);
      }
    });
    return pending;
  }

  type Kind = 'title' | 'body' | 'both' | 'image' | 'restore' | 'status';

  function commandOf(articleId: string, kind: Kind, index: number, atFirst: ArticleState): ArticleCommand {
    const base = { articleId, ...who };
    const metadata = { at: `2026-11-22T12:0${index}:00.000Z` };
    switch (kind) {
      case 'title':
        return { type: 'EditArticle', data: { ...base, title: `Title ${index}` }, metadata };
      case 'body':
        return {
          type: 'EditArticle',
          data: { ...base, body: `${protectedBody(1)}<p>${'word '.repeat(index + 1)}</p>` },
          metadata,
        };
      case 'both':
        return {
          type: 'EditArticle',
          data: { ...base, title: `Both ${index}`, body: `${protectedBody(1)}<p>both ${index}</p>` },
          metadata,
        };
      case 'image':
        return {
          type: 'ReplaceFeaturedImage',
          data: {
            ...base,
            featuredImage: { url: `https://cdn.example/${index}.png`, alt: 'A', width: 10, height: 20 },
          },
          metadata,
        };
      case 'restore':
        return { type: 'RestoreRevision', data: { ...base, revision: 1, snapshot: atFirst }, metadata };
      case 'status':
        return {
          type: 'ChangeArticleStatus',
          data: {
            ...base,
            status: index % 2 === 0 ? 'draft' : 'published',
            publishedAt: '2026-11-01T08:00:00Z',
          },
          metadata,
        };
    }
  }
});
