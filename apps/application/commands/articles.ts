import {
  type Article,
  type ArticleCommand,
  type ArticleState,
  type CreateArticle,
  decide,
  type EditVerdict,
  editVerdict,
  evolve,
  initialState,
} from '../../../domain/article/decider.ts';
import {
  type ArticleEvent,
  type ArticleStatus,
  articleStream,
  type FeaturedImage,
} from '../../../domain/article/events.ts';
import { DomainError } from '../../../domain/errors.ts';
import type { Actor, Origin } from '../../../domain/event.ts';
import { wordCount } from '../../../domain/html/facts.ts';
import type { SanitizedItem } from '../../../domain/html/sanitized-item.ts';
import { type AnswerKey, keepAnswer } from '../../../infra/idempotency.ts';
import { newId } from '../../../infra/ids.ts';
import { keyStillLive } from '../../../projections/accounts.ts';
import { readArticleSnapshot, readSnapshotAtOrBefore } from '../../../projections/article-snapshots.ts';
import { type ArticleDetailRow, detailOf } from '../../../projections/articles.ts';
import { changeOut } from '../articles.ts';
import type { CommandContext } from './handler.ts';
import { requireSite } from './sites.ts';

/*
 * Articles: creating one, and the changes that make a revision (edit, featured image, restore,
 * status). A change starts from the article's snapshot and answers with the article as it left it;
 * `articleAt` replays a stream up to a revision.
 */

/**
 * Who asks, from which face: every revision carries it. `answerKey`, for an article change made under
 * an idempotency key: the change's answer is kept under it by the transaction that appends its events
 * (apps/application/idempotency.ts).
 */
type Caller = {
  origin: Origin;
  actor: Actor;
  requestId?: string | undefined;
  answerKey?: AnswerKey | undefined;
  /** An API key no statement of this call has yet found unrevoked: the change's append checks it. */
  confirmKey?: string | undefined;
};

export type EditResult = {
  article: ArticleDetailRow;
  changed: boolean;
  revision: number;
  sanitized: SanitizedItem[];
};

const articleFold = { initial: initialState, evolve };

/** What every change of an article says besides its own data: who, why, on which revision. */
type ChangeInput = { reason?: string | null | undefined; expectedRevision?: number | undefined };
const changeOf = (articleId: string, input: ChangeInput, caller: Caller) => ({
  articleId,
  reason: input.reason ?? null,
  expectedRevision: input.expectedRevision,
  origin: caller.origin,
  actor: caller.actor,
});

/** The kind of change each article event is, for the edits counter. */
const CHANGE: Record<ArticleEvent['type'], string> = {
  ArticleCreated: 'create',
  ArticleEdited: 'edit',
  FeaturedImageReplaced: 'featured_image',
  ArticleRestored: 'restore',
  ArticleStatusChanged: 'status',
};

export function articleCommands(deps: CommandContext) {
  const { db, store, meta } = deps;
  const edits = deps.metrics?.edits;
  /** The one handler, on an article's stream: each revision it appended is counted by origin and change. */
  const run: typeof deps.run = async (streamId, fold, decide, opts) => {
    const result = await deps.run(streamId, fold, decide, opts);
    if (edits) {
      for (const event of result.events as readonly ArticleEvent[]) {
        edits.inc({ origin: event.data.origin, change: CHANGE[event.type] });
      }
    }
    return result;
  };

  async function articleCommand(
    accountId: string,
    articleId: string,
    build: (state: Article) => ArticleCommand,
    caller?: Caller,
  ): Promise<EditResult> {
    let sanitized: SanitizedItem[] = [];
    /** The answer the decided events will give once appended: what is kept under `answerKey` with them. */
    let answer: EditResult | undefined;
    const answerKey = caller?.answerKey;
    const result = await run(
      articleStream(articleId),
      articleFold,
      (state) => {
        // Another account's article is answered exactly like one that does not exist.
        if (!state.exists || state.accountId !== accountId)
          throw new DomainError('not_found', `No article ${articleId}`);
        const events = decide(build(state), state, deps.html);
        const edited = events.find((e) => e.type === 'ArticleEdited');
        sanitized = edited?.type === 'ArticleEdited' ? edited.data.sanitized : [];
        if (answerKey)
          answer = editResult(
            articleId,
            events.reduce(articleFold.evolve, state),
            events.length > 0,
            sanitized,
          );
        return events;
      },
      {
        snapshot: ({ fresh }) => startOf(articleId, fresh),
        precondition: caller?.confirmKey ? keyStillLive(caller.confirmKey) : undefined,
        remember: (state, version) => deps.snapshots.remember(articleId, { version, state }),
        alongside: answerKey
          ? async (trx) => {
              if (!answer) throw new Error('an article change is appended before it is decided');
              await keepAnswer(trx, answerKey, changeOut(answer));
            }
          : undefined,
      },
    );
    // The answer is the article as this command left it (what a read of its row gives once projected,
    // which happened in the append's transaction), not whatever a later edit made of it meanwhile.
    return editResult(articleId, result.state, result.events.length > 0, sanitized);
  }

  /**
   * Where a change of the article starts: the state this runtime remembers it at (what its last read
   * or its last change left), taken for the head; otherwise, or `fresh`, its snapshot read.
   */
  function startOf(articleId: string, fresh: boolean) {
    const known = fresh ? undefined : deps.snapshots.recall(articleId);
    if (known === undefined) return readArticleSnapshot(db, articleId, deps.snapshots);
    const state = known.state as ArticleState;
    return Promise.resolve({ state, version: known.version, streamVersion: known.version, remembered: true });
  }

  function editResult(
    articleId: string,
    state: ArticleState,
    changed: boolean,
    sanitized: SanitizedItem[],
  ): EditResult {
    if (!state.exists) throw new DomainError('not_found', `No article ${articleId}`);
    const article = detailOf(state, deps.html);
    return { article, changed, revision: article.revision, sanitized };
  }

  /** The article of the account as it is now: its snapshot read (not remembered), the events after it folded. */
  async function currentArticle(accountId: string, articleId: string): Promise<Article> {
    const start = await readArticleSnapshot(db, articleId, deps.snapshots);
    const history =
      start !== undefined && start.streamVersion === start.version
        ? []
        : await store.readStream<ArticleEvent>(articleStream(articleId), { from: (start?.version ?? 0) + 1 });
    const state = history.reduce((s, e) => evolve(s, e), start?.state ?? initialState);
    if (!state.exists || state.accountId !== accountId)
      throw new DomainError('not_found', `No article ${articleId}`);
    return state;
  }

  /**
   * The article as it was at revision n: the newest state kept at or before n (every
   * SNAPSHOT_HISTORY_EVERY revisions) with the events after it folded, or the whole stream up to n.
   */
  async function articleAt(accountId: string, articleId: string, revision: number): Promise<ArticleState> {
    const missing = new DomainError('not_found', `Article ${articleId} has no revision ${revision}`);
    if (!Number.isInteger(revision) || revision < 1) throw missing;
    const stream = articleStream(articleId);
    const kept = await readSnapshotAtOrBefore(db, articleId, revision);
    // Each body-carrying event replaces the body whole: only the last one's is read.
    const events = await store.readStream<ArticleEvent>(stream, {
      from: (kept?.version ?? 0) + 1,
      to: revision,
      onlyLast: 'body',
    });
    let start = initialState;
    if (kept !== undefined) {
      // A kept state has no body: it is the last one written at or before it, unless a later event brings one.
      const bodyFollows = events.some((e) => typeof (e.data as { body?: unknown }).body === 'string');
      const body = bodyFollows ? '' : ((await store.lastValue(stream, 'body', kept.version)) ?? '');
      const stored = kept.state as ArticleState;
      start = stored.exists ? { ...stored, body } : stored;
    }
    const state = events.reduce((s, e) => evolve(s, e), start);
    if (!state.exists || state.accountId !== accountId)
      throw new DomainError('not_found', `No article ${articleId}`);
    if (state.revision !== revision) {
      throw missing;
    }
    return state;
  }

  return {
    async createArticle(
      accountId: string,
      input: Omit<CreateArticle['data'], 'articleId' | 'accountId' | 'origin' | 'actor' | 'reason'> & {
        articleId?: string;
        reason?: string | null;
      },
      caller: Caller,
    ): Promise<{ articleId: string }> {
      await Promise.all([requireSite(store, accountId, input.siteId), deps.sanitizeAhead?.(input.body)]);
      const articleId = input.articleId ?? newId('art');
      const remember = (state: ArticleState, version: number) =>
        deps.snapshots.remember(articleId, { version, state });
      await run(
        articleStream(articleId),
        articleFold,
        (state) =>
          decide(
            {
              type: 'CreateArticle',
              data: {
                articleId,
                siteId: input.siteId,
                accountId,
                title: input.title,
                body: input.body,
                url: input.url,
                status: input.status,
                publishedAt: input.publishedAt,
                targetKeyword: input.targetKeyword,
                featuredImage: input.featuredImage,
                origin: caller.origin,
                actor: caller.actor,
                reason: input.reason ?? null,
              },
              metadata: meta(caller),
            },
            state,
            deps.html,
          ),
        { remember },
      );
      return { articleId };
    },

    async editArticle(
      accountId: string,
      articleId: string,
      input: ChangeInput & { title?: string | undefined; body?: string | undefined },
      caller: Caller,
    ): Promise<EditResult> {
      if (input.body !== undefined) await deps.sanitizeAhead?.(input.body);
      return articleCommand(
        accountId,
        articleId,
        () => ({
          type: 'EditArticle',
          data: { ...changeOf(articleId, input, caller), title: input.title, body: input.body },
          metadata: meta(caller),
        }),
        caller,
      );
    },

    replaceFeaturedImage(
      accountId: string,
      articleId: string,
      input: ChangeInput & { featuredImage: FeaturedImage },
      caller: Caller,
    ): Promise<EditResult> {
      return articleCommand(
        accountId,
        articleId,
        () => ({
          type: 'ReplaceFeaturedImage',
          data: { ...changeOf(articleId, input, caller), featuredImage: input.featuredImage },
          metadata: meta(caller),
        }),
        caller,
      );
    },

    async restoreRevision(
      accountId: string,
      articleId: string,
      input: ChangeInput & { revision: number },
      caller: Caller,
    ): Promise<EditResult> {
      const snapshot = await articleAt(accountId, articleId, input.revision);
      return articleCommand(
        accountId,
        articleId,
        () => ({
          type: 'RestoreRevision',
          data: { ...changeOf(articleId, input, caller), revision: input.revision, snapshot },
          metadata: meta(caller),
        }),
        caller,
      );
    },

    changeArticleStatus(
      accountId: string,
      articleId: string,
      /** `publishedAt` left out keeps the article's current one. */
      input: ChangeInput & { status: ArticleStatus; publishedAt?: string | null | undefined },
      caller: Caller,
    ): Promise<EditResult> {
      return articleCommand(accountId, articleId, (state) => ({
        type: 'ChangeArticleStatus',
        data: {
          ...changeOf(articleId, input, caller),
          status: input.status,
          publishedAt: input.publishedAt !== undefined ? input.publishedAt : state.publishedAt,
        },
        metadata: meta(caller),
      }));
    },

    /**
     * What `editArticle` would decide, without deciding it: the article as a change would start from
     * it (its snapshot read, the events after it folded), and the edit's verdict on it for the caller's
     * origin (`editVerdict`, the decider's own judgement). Appends nothing; throws what the edit throws
     * before its protected check (`not_found`, a stale expected revision, the title and body rules).
     */
    async previewEdit(
      accountId: string,
      articleId: string,
      input: ChangeInput & { title?: string | undefined; body?: string | undefined },
      caller: Pick<Caller, 'origin' | 'actor'>,
    ): Promise<{ article: Article; verdict: EditVerdict; wordCount: number }> {
      const [article] = await Promise.all([
        currentArticle(accountId, articleId),
        input.body !== undefined ? deps.sanitizeAhead?.(input.body) : undefined,
      ]);
      const data = { ...changeOf(articleId, input, { ...caller }), title: input.title, body: input.body };
      const verdict = editVerdict(article, data, deps.html);
      return { article, verdict, wordCount: wordCount(verdict.body, deps.html) };
    },

    articleAt,

    /**
     * Whose an article is and on which site, when this runtime remembers it (both are fixed when it is
     * created): an owner's check that needs no read.
     */
    knownArticle(articleId: string): { accountId: string; siteId: string } | undefined {
      const state = deps.snapshots.recall(articleId)?.state as ArticleState | undefined;
      return state?.exists ? { accountId: state.accountId, siteId: state.siteId } : undefined;
    },
  };
}
