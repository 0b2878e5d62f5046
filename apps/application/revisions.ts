import { z } from 'zod';
import { ArticleStatus, REASON_MAX } from '../../domain/article/events.ts';
import { DomainError } from '../../domain/errors.ts';
import { Origin } from '../../domain/event.ts';
import { ALL_WORDS, diffChanges } from '../../domain/html/word-diff.ts';
import { diffInThread } from '../../infra/sanitize-pool.ts';
import { findArticleSite } from '../../projections/articles.ts';
import { findRevision, listRevisions, type RevisionRow } from '../../projections/revisions.ts';
import type { ArticleWrite, ArticleWriter } from './article-write.ts';
import { WireFeaturedImage } from './articles.ts';
import { type Call, type Idempotency, type Note, type Outcome, outcomeOf } from './call.ts';
import {
  DiffChange,
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

/** Two revisions of an article compared: their titles and the whole word diff of their text. */
export const RevisionComparison = z
  .object({
    article_id: z.string(),
    from: z.number().int().min(1),
    to: z.number().int().min(1),
    title: z.object({ before: z.string(), after: z.string() }),
    granularity: z.enum(['word', 'line']).meta({
      description:
        '`word`, or `line` when the texts were too long or too far apart to compare word by word: then each ' +
        'change is whole lines.',
    }),
    changes: z.array(DiffChange).meta({
      description:
        'The whole text, in order: the `equal` and `delete` texts make the text at `from`, the `equal` and ' +
        '`insert` texts the text at `to` (but for the spaces between words, which a change may carry on one side).',
    }),
  })
  .meta({
    id: 'RevisionComparison',
    description:
      'What changed from revision `from` to revision `to` (either may be the later one; the same twice gives ' +
      'one `equal` change): the titles and a word diff of the visible text, each revision obtained by replay.',
    example: {
      article_id: 'art_06h014k2g711vw3tv0g528qpw8',
      from: 2,
      to: 3,
      title: { before: 'How to choose a boiler', after: 'How to choose a boiler in 2026' },
      granularity: 'word',
      changes: [
        { op: 'equal', text: 'A ' },
        { op: 'delete', text: 'gas ' },
        { op: 'insert', text: 'condensing ' },
        { op: 'equal', text: 'boiler lasts fifteen years. Read the boiler buying guide first.' },
      ],
    },
  });

/* What the revision use cases are asked with. */

export const RevisionParams = z.strictObject({
  id: idParam.meta({ description: 'Article id' }),
  n: revisionNumber.meta({ description: 'Revision number, from 1 (the creation)' }),
});
export const RestoreBody = z
  .strictObject({ reason: reasonField })
  .meta({ id: 'Restore', example: { reason: 'Back to the version before the rewrite' } });

/** The two revisions a comparison is between: `from` (before) and `to` (after), in either order. */
export const CompareQuery = z.strictObject({
  from: revisionNumber.meta({ description: 'The revision to compare from (the text before), from 1' }),
  to: revisionNumber.meta({ description: 'The revision to compare to (the text after), from 1' }),
});
export type CompareRevisionsQuery = z.output<typeof CompareQuery>;

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

export const CompareRevisionsInput = z.strictObject({
  article_id: toolFields.articleId,
  from: CompareQuery.shape.from.meta({
    description: 'The revision to compare from (the text before); list_revisions gives the numbers.',
  }),
  to: CompareQuery.shape.to.meta({
    description: 'The revision to compare to (the text after); it may be earlier than from, or the same.',
  }),
});

export type RevisionOut = z.infer<typeof Revision>;
export type RevisionComparisonOut = z.infer<typeof RevisionComparison>;

/** Where the API gives revision n of an article whole: the links of a comparison refused as too large. */
export function revisionPath(articleId: string, revision: number): string {
  return `/api/v1/articles/${encodeURIComponent(articleId)}/revisions/${revision}`;
}
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

/**
 * An article's history: its revisions, the content at one of them (by replay), two of them compared,
 * and restoring one.
 */
export function createRevisions(
  deps: Pick<ApplicationDeps, 'db' | 'reads' | 'commands' | 'diff'>,
  writer: ArticleWriter,
) {
  const { commands } = deps;
  const reads = readsOf(deps);
  const diff = deps.diff ?? diffInThread;

  /** The article as it was at revision n (by replaying its stream) with that revision's record. */
  async function contentAt(
    call: Call,
    articleId: string,
    revision: number,
    note: Note,
  ): Promise<RevisionContentOut> {
    const state = await commands.articleAt(call.principal.accountId, articleId, revision);
    const record = await reads.read(call.principal.accountId, (db) => findRevision(db, articleId, revision));
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
  }

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
      return outcomeOf({ articleId }, (note) => contentAt(call, articleId, revision, note));
    },

    /**
     * What changed from revision `from` to revision `to` (either may be the later; the same twice is all
     * `equal`): the titles, and the whole word diff of the texts, each protected link one unit, computed
     * within the diff budget (Runtime.diff). Over it (too long, too different, or no worker free in
     * time): `diff_too_large`, with links to both revisions whole.
     */
    compare(
      call: Call,
      articleId: string,
      query: CompareRevisionsQuery,
    ): Promise<Outcome<RevisionComparisonOut>> {
      const { from, to } = query;
      return inUseCase('revisions.compare', call, () =>
        outcomeOf({ articleId }, async (note) => {
          const [before, after] =
            to === from
              ? await contentAt(call, articleId, from, note).then((at) => [at, at] as const)
              : await Promise.all([
                  contentAt(call, articleId, from, note),
                  contentAt(call, articleId, to, note),
                ]);
          const changes = await diff(before.body, after.body, ALL_WORDS);
          if (changes === null || changes === 'busy') {
            const why =
              changes === 'busy'
                ? 'could not be compared in time: the service is comparing other texts just now'
                : 'are too long or too different to compare';
            throw new DomainError(
              'diff_too_large',
              `Revisions ${from} and ${to} of article ${articleId} ${why}`,
              undefined,
              { from: revisionPath(articleId, from), to: revisionPath(articleId, to) },
            );
          }
          return {
            article_id: articleId,
            from,
            to,
            title: { before: before.title, after: after.title },
            granularity: changes.byLine ? 'line' : 'word',
            changes: diffChanges(changes),
          };
        }),
      );
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
