import { z } from 'zod';
import { ArticleStatus, REASON_MAX } from '../../domain/article/events.ts';
import { DomainError } from '../../domain/errors.ts';
import { Origin } from '../../domain/event.ts';
import { findArticleSite } from '../../projections/articles.ts';
import { findRevision, listRevisions, type RevisionRow } from '../../projections/revisions.ts';
import type { ArticleWrite, ArticleWriter } from './article-write.ts';
import { WireFeaturedImage } from './articles.ts';
import { type Call, type Idempotency, type Outcome, outcomeOf } from './call.ts';
import {
  idParam,
  reasonField,
  revisionNumber,
  rfc3339,
  toolFields,
  WireActor,
  writeOptions,
} from './contract.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { type Listed, type ListQuery, listed, pageOf } from './lists.ts';
import { inUseCase } from './use-case-span.ts';

/*
 * The revisions' contract: an article's history as it is asked for and answered; then the use cases.
 */

export const Revision = z
  .object({
    revision: z.number().int().min(1),
    origin: Origin,
    actor: WireActor,
    reason: z.string().nullable(),
    created_at: z.iso.datetime(),
    title: z.string(),
    word_count: z.number().int().min(0),
    restored_from: z.number().int().min(1).nullable(),
  })
  .meta({
    id: 'Revision',
    example: {
      revision: 3,
      origin: 'api',
      actor: { type: 'api_key', id: 'key_06h0...', name: 'Reporting key' },
      reason: 'Refreshed for the new year',
      created_at: '2026-11-05T14:00:00Z',
      title: 'How to choose a boiler in 2026',
      word_count: 812,
      restored_from: null,
    },
  });

export const RevisionContent = Revision.extend({
  body: z.string(),
  featured_image: WireFeaturedImage.nullable(),
  status: ArticleStatus,
  published_at: z.iso.datetime().nullable(),
}).meta({
  id: 'RevisionContent',
  description: 'The article as it was at this revision, obtained by replaying its history.',
});

/* What the revision use cases are asked with. */

export const RevisionParams = z.strictObject({
  id: idParam.meta({ description: 'Article id' }),
  n: revisionNumber.meta({ description: 'Revision number, from 1 (the creation)' }),
});
export const RestoreBody = z
  .strictObject({ reason: reasonField })
  .meta({ id: 'Restore', example: { reason: 'Back to the version before the rewrite' } });

/* The tools' inputs: the same fields, described for a model. */

export const ListRevisionsInput = z.strictObject({
  article_id: toolFields.articleId,
  page: toolFields.page,
  per_page: toolFields.perPage,
});

const revisionField = RevisionParams.shape.n.meta({
  description: 'The revision number, from 1 (the article’s creation); list_revisions gives them.',
});

export const GetRevisionInput = z.strictObject({ article_id: toolFields.articleId, revision: revisionField });

export const RestoreRevisionInput = z.strictObject({
  article_id: toolFields.articleId,
  revision: revisionField,
  reason: RestoreBody.shape.reason.meta({
    description: `Optional: why the earlier version comes back (at most ${REASON_MAX} characters).`,
  }),
  ...writeOptions,
});

export type RevisionOut = z.infer<typeof Revision>;
export type RevisionContentOut = z.infer<typeof RevisionContent>;

export function revisionOut(row: RevisionRow): RevisionOut {
  return {
    revision: row.revision,
    origin: row.origin,
    actor: row.actor,
    reason: row.reason,
    created_at: rfc3339(row.created_at),
    title: row.title,
    word_count: row.word_count,
    restored_from: row.restored_from,
  };
}

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
