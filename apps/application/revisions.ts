import { DomainError } from '../../domain/errors.ts';
import { findRevision, listRevisions } from '../../projections/revisions.ts';
import type { ArticleWrite, ArticleWriter } from './article-write.ts';
import type { Call, Idempotency } from './call.ts';
import type { ApplicationDeps } from './deps.ts';
import { type Listed, type ListQuery, listed, pageOf } from './lists.ts';
import { type RevisionContentOut, type RevisionOut, revisionOut, rfc3339 } from './wire.ts';

export type Revisions = ReturnType<typeof createRevisions>;

/** An article's history: its revisions, the content at one of them (by replay), and restoring one. */
export function createRevisions(deps: Pick<ApplicationDeps, 'db' | 'commands'>, writer: ArticleWriter) {
  const { db, commands } = deps;
  return {
    /** A page of the article's revisions, newest first. */
    async list(call: Call, articleId: string, query: ListQuery): Promise<Listed<RevisionOut>> {
      await writer.own(call, articleId);
      return listed(await listRevisions(db, articleId, pageOf(query)), query, revisionOut);
    },

    /** The article as it was at revision n (by replaying its stream) with that revision's record. */
    async get(call: Call, articleId: string, revision: number): Promise<RevisionContentOut> {
      call.touched.articleId = articleId;
      const state = await commands.articleAt(call.principal.accountId, articleId, revision);
      const record = await findRevision(db, articleId, revision);
      if (!state.exists || !record)
        throw new DomainError('not_found', `Article ${articleId} has no revision ${revision}`);
      call.touched.siteId = state.siteId;
      return {
        ...revisionOut(record),
        title: state.title,
        body: state.body,
        featured_image: state.featuredImage,
        status: state.status,
        published_at: state.publishedAt ? rfc3339(new Date(state.publishedAt)) : null,
      };
    },

    /** Appends a new revision carrying revision n's content (`restored_from: n`); history stays. */
    async restore(
      call: Call,
      input: {
        articleId: string;
        revision: number;
        reason?: string | null | undefined;
        expectedRevision?: number | undefined;
      },
      idempotency?: Idempotency,
    ): Promise<ArticleWrite> {
      const { articleId, revision, expectedRevision } = input;
      await writer.own(call, articleId);
      return writer.write(call, idempotency, (keep) =>
        commands.restoreRevision(
          call.principal.accountId,
          articleId,
          { revision, reason: input.reason ?? null, expectedRevision },
          { ...call.principal, keep },
        ),
      );
    },
  };
}
