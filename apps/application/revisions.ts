import { z } from 'zod';
import { DomainError } from '../../domain/errors.ts';
import { findArticleSite } from '../../projections/articles.ts';
import { findRevision, listRevisions } from '../../projections/revisions.ts';
import type { ArticleWrite, ArticleWriter } from './article-write.ts';
import { type Call, type Idempotency, type Outcome, outcomeOf } from './call.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { type Listed, type ListQuery, listed, pageOf } from './lists.ts';
import { idParam, reasonField } from './requests.ts';
import { inUseCase } from './use-case-span.ts';
import { type RevisionContentOut, type RevisionOut, revisionOut, rfc3339 } from './wire.ts';

/* What the revision use cases are asked with. */

export const RevisionParams = z.strictObject({
  id: idParam.meta({ description: 'Article id' }),
  n: z.coerce
    .number({ message: 'must be a whole number' })
    .int('must be a whole number')
    .min(1, 'must be 1 or more')
    .max(1_000_000)
    .meta({ description: 'Revision number, from 1 (the creation)' }),
});
export const RestoreBody = z
  .strictObject({ reason: reasonField })
  .meta({ id: 'Restore', example: { reason: 'Back to the version before the rewrite' } });

export type Revisions = ReturnType<typeof createRevisions>;

/** An article's history: its revisions, the content at one of them (by replay), and restoring one. */
export function createRevisions(
  deps: Pick<ApplicationDeps, 'db' | 'reads' | 'commands'>,
  writer: ArticleWriter,
) {
  const { commands } = deps;
  const reads = readsOf(deps);
  return {
    /** A page of the article's revisions, newest first. */
    list(call: Call, articleId: string, query: ListQuery): Promise<Outcome<Listed<RevisionOut>>> {
      return outcomeOf({ articleId }, async (note) => {
        const { accountId, liveKey } = call.principal;
        note.article(articleId);
        const page = await reads.read(accountId, async (db) => {
          const siteId = await findArticleSite(db, accountId, articleId, liveKey);
          if (!siteId) throw new DomainError('not_found', `No article ${articleId}`);
          note.site(siteId);
          return listRevisions(db, articleId, pageOf(query));
        });
        return listed(page, query, revisionOut);
      });
    },

    /** The article as it was at revision n (by replaying its stream) with that revision's record. */
    get(call: Call, articleId: string, revision: number): Promise<Outcome<RevisionContentOut>> {
      return outcomeOf({ articleId }, async (note) => {
        const state = await commands.articleAt(call.principal.accountId, articleId, revision);
        const record = await reads.read(call.principal.accountId, (db) =>
          findRevision(db, articleId, revision),
        );
        if (!state.exists || !record)
          throw new DomainError('not_found', `Article ${articleId} has no revision ${revision}`);
        note.site(state.siteId);
        return {
          ...revisionOut(record),
          title: state.title,
          body: state.body,
          featured_image: state.featuredImage,
          status: state.status,
          published_at: state.publishedAt ? rfc3339(new Date(state.publishedAt)) : null,
        };
      });
    },

    /** Appends a new revision carrying revision n's content (`restored_from: n`); history stays. */
    restore(
      call: Call,
      input: {
        articleId: string;
        revision: number;
        reason?: string | null | undefined;
        expectedRevision?: number | undefined;
      },
      idempotency?: Idempotency,
    ): Promise<Outcome<ArticleWrite>> {
      const { articleId, revision, expectedRevision } = input;
      return inUseCase('revisions.restore', call, () =>
        outcomeOf({ articleId }, async (note) => {
          await writer.own(call, note, articleId);
          return writer.write(call, note, idempotency, (answerKey) =>
            commands.restoreRevision(
              call.principal.accountId,
              articleId,
              { revision, reason: input.reason ?? null, expectedRevision },
              { ...call.principal, answerKey },
            ),
          );
        }),
      );
    },
  };
}
