import { z } from 'zod';
import { checkExpectedRevision } from '../../domain/article/decider.ts';
import type { FeaturedImage } from '../../domain/article/events.ts';
import { ALT_MAX, ArticleStatus, BODY_MAX_MIB, TITLE_MAX } from '../../domain/article/events.ts';
import { DomainError } from '../../domain/errors.ts';
import type { Db } from '../../infra/db/schema.ts';
import { requestHash } from '../../infra/idempotency.ts';
import { inspectImage } from '../../infra/media/image.ts';
import {
  findArticle,
  findArticleHead,
  findArticleJson,
  findArticleRevision,
  listArticles,
} from '../../projections/articles.ts';
import { ofOwnSite } from '../../projections/sites.ts';
import type { ArticleWrite, ArticleWriter } from './article-write.ts';
import { type Call, type Idempotency, type Note, type Outcome, outcomeOf } from './call.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { type Listed, listed, pageOf } from './lists.ts';
import {
  atMost,
  cleanText,
  dateRange,
  fromParam,
  pageParam,
  perPageParam,
  reasonField,
  toParam,
} from './requests.ts';
import { inUseCase } from './use-case-span.ts';
import {
  type ArticleListItemOut,
  type ArticleOut,
  articleJson,
  articleListItemOut,
  articleOut,
  type JsonOf,
} from './wire.ts';

/* What the article use cases are asked with: every face's parameters and bodies derive from these. */

export const ArticleQuery = z
  .strictObject({
    from: fromParam,
    to: toParam,
    status: ArticleStatus.optional().meta({ description: 'Only articles with this status.' }),
    page: pageParam,
    per_page: perPageParam,
  })
  .superRefine(dateRange);
export const EditArticleBody = z
  .strictObject({
    title: cleanText(z.string().min(1, 'must not be empty').max(TITLE_MAX, atMost(TITLE_MAX)), {
      lines: false,
    }).optional(),
    // Its text rule (no control characters but tab and line breaks, no lone surrogates) is the
    // decider's, with the same 400 naming `body`: one scan of up to 2 MiB per edit, not two.
    body: z
      .string()
      .optional()
      .meta({ description: `The new HTML body, at most ${BODY_MAX_MIB} MiB; sanitised as the editor does.` }),
    reason: reasonField,
  })
  .refine((b) => b.title !== undefined || b.body !== undefined, {
    message: 'give a title, a body, or both',
    path: ['title'],
  })
  .meta({
    id: 'EditArticle',
    example: {
      title: 'How to choose a boiler in 2026',
      body: '<p>Updated intro.</p><p>Read our <a href="https://northside-plumbing.example/services" data-service-protected="internal" data-service-id="il_1">boiler services</a> first.</p>',
      reason: 'Refreshed for the new year',
    },
  });
export const FeaturedImageJsonBody = z
  .strictObject({
    url: cleanText(z.url({ message: 'must be an absolute URL' }).max(2048), { lines: false }).meta({
      description: 'An https address of the image.',
    }),
    alt: cleanText(z.string().max(ALT_MAX, atMost(ALT_MAX)), { lines: false })
      .optional()
      .meta({ description: 'Alternative text.' }),
  })
  .meta({
    id: 'FeaturedImageFromUrl',
    example: { url: 'https://images.example.org/boiler.webp', alt: 'A new combi boiler' },
  });
export type ArticleListQuery = z.output<typeof ArticleQuery>;

/** The featured image of a replacement: an https address the service fetches, or bytes the caller sends. */
export type ImageInput =
  | { url: string; alt: string }
  /** Read once the article is known to be the caller's (a multipart body is not read before). */
  | { upload: () => Promise<{ bytes: Uint8Array; alt: string }> };

export type Articles = ReturnType<typeof createArticles>;

/** Articles: read one or a site's list, edit title and body, replace the featured image. */
export function createArticles(
  deps: Pick<ApplicationDeps, 'db' | 'reads' | 'commands' | 'media' | 'fetchImage' | 'publicUrl'>,
  writer: ArticleWriter,
) {
  const { db, commands } = deps;
  const reads = readsOf(deps);
  return {
    /** One article of the account with its body and protected links; `not_found` otherwise. */
    get(call: Call, articleId: string): Promise<Outcome<ArticleOut>> {
      return outcomeOf({ articleId }, (note) => readArticle(call, note, articleId));
    },

    /**
     * One article as `get` gives it, written as JSON (its body as escaped when it was stored, not
     * escaped again: `articleJson`), unless the caller holds its current revision (`held`, from a
     * conditional request): then that revision alone, read without the body.
     */
    getUnlessHeld(
      call: Call,
      articleId: string,
      held: number | undefined,
    ): Promise<Outcome<{ revision: number; article: JsonOf<ArticleOut> | null }>> {
      return outcomeOf({ articleId }, async (note) => {
        if (held !== undefined) {
          const { principal } = call;
          const head = await reads.read(principal.accountId, (on) =>
            findArticleHead(on, principal.accountId, articleId, principal.liveKey),
          );
          if (!head) throw new DomainError('not_found', `No article ${articleId}`);
          note.site(head.siteId);
          if (head.revision === held) return { revision: held, article: null };
        }
        const row = await ownRow(call, note, articleId, findArticleJson);
        return { revision: row.revision, article: articleJson(row) };
      });
    },

    /** A page of a site's articles, newest published first, filtered by date and status. */
    list(call: Call, siteId: string, query: ArticleListQuery): Promise<Outcome<Listed<ArticleListItemOut>>> {
      return outcomeOf({ siteId }, async () => {
        const scope = { accountId: call.principal.accountId, siteId, liveKey: call.principal.liveKey };
        const { from, to, status } = query;
        const page = await reads.read(scope.accountId, (on) =>
          ofOwnSite(scope, listArticles(on, scope, { ...pageOf(query), from, to, status })),
        );
        return listed(page, query, articleListItemOut);
      });
    },

    /** Edits title and/or body: a new revision of the call's origin, unless nothing changes. */
    edit(
      call: Call,
      input: {
        articleId: string;
        title?: string | undefined;
        body?: string | undefined;
        reason?: string | null | undefined;
        expectedRevision?: number | undefined;
      },
      idempotency?: Idempotency,
    ): Promise<Outcome<ArticleWrite>> {
      const { articleId } = input;
      return inUseCase('articles.edit', call, () =>
        outcomeOf({ articleId }, async (note) => {
          // Without an Idempotency-Key, the key (if unconfirmed) can be checked by the edit's append.
          const owned = await writer.own(call, note, articleId, { keyInChange: idempotency === undefined });
          return writer.write(
            call,
            note,
            idempotency,
            (answerKey) =>
              commands.editArticle(
                call.principal.accountId,
                articleId,
                {
                  title: input.title,
                  body: input.body,
                  reason: input.reason,
                  expectedRevision: input.expectedRevision,
                },
                { ...call.principal, answerKey, confirmKey: owned.confirmKey },
              ),
            owned,
          );
        }),
      );
    },

    /**
     * Replaces the featured image. The image is fetched (or read) and recognised from its bytes (415,
     * 413 otherwise) before the edit is counted, and stored only for a write that will be accepted: a
     * stale expected revision is refused first (from the read model, written in the same transaction
     * as every revision). A concurrent edit can still make the revision stale between that check and
     * the append; the file stored for it is then referenced by no event, and the media collector
     * (infra/jobs/housekeeping.ts) removes it after its grace period.
     */
    replaceFeaturedImage(
      call: Call,
      input: { articleId: string; image: ImageInput; expectedRevision?: number | undefined },
      idempotency?: Idempotency,
    ): Promise<Outcome<ArticleWrite>> {
      return inUseCase('articles.replace_featured_image', call, () =>
        outcomeOf({ articleId: input.articleId }, (note) => replaceImage(call, note, input, idempotency)),
      );
    },
  };

  async function readArticle(call: Call, note: Note, articleId: string): Promise<ArticleOut> {
    return articleOut(await ownRow(call, note, articleId, findArticle));
  }

  /** The article's row as `find` reads it, the call's own (`not_found` otherwise), its site noted. */
  async function ownRow<R extends { site_id: string }>(
    call: Call,
    note: Note,
    articleId: string,
    find: (db: Db, accountId: string, articleId: string, liveKey?: string) => Promise<R | undefined>,
  ): Promise<R> {
    const { principal } = call;
    const row = await reads.read(principal.accountId, (on) =>
      find(on, principal.accountId, articleId, principal.liveKey),
    );
    if (!row) throw new DomainError('not_found', `No article ${articleId}`);
    note.site(row.site_id);
    return row;
  }

  async function replaceImage(
    call: Call,
    note: Note,
    input: { articleId: string; image: ImageInput; expectedRevision?: number | undefined },
    idempotency: Idempotency | undefined,
  ): Promise<ArticleWrite> {
    const { articleId, expectedRevision } = input;
    const { accountId } = call.principal;
    await writer.own(call, note, articleId);
    const { bytes, alt, identity } = await imageOf(input.image);
    const info = await inspectImage(bytes);
    const request =
      idempotency && identity ? { ...idempotency, request: [...idempotency.request, identity] } : idempotency;
    return writer.write(call, note, request, async (answerKey) => {
      if (expectedRevision !== undefined) {
        const current = await findArticleRevision(db, accountId, articleId);
        if (current === undefined) throw new DomainError('not_found', `No article ${articleId}`);
        checkExpectedRevision(current, expectedRevision);
      }
      const stored = await deps.media.put(bytes, info.ext, info.mime);
      const featuredImage: FeaturedImage = {
        url: `${deps.publicUrl}${stored.url}`,
        alt,
        width: info.width,
        height: info.height,
      };
      return commands.replaceFeaturedImage(
        accountId,
        articleId,
        { featuredImage, expectedRevision },
        { ...call.principal, answerKey },
      );
    });
  }

  /** The image's bytes and, for an upload, what identifies it to an idempotent retry (a URL request names itself). */
  async function imageOf(image: ImageInput): Promise<{ bytes: Uint8Array; alt: string; identity: unknown }> {
    if ('url' in image)
      return { bytes: await deps.fetchImage(image.url), alt: image.alt, identity: undefined };
    const { bytes, alt } = await image.upload();
    return { bytes, alt, identity: { sha256: requestHash([Buffer.from(bytes).toString('base64')]), alt } };
  }
}
