import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { checkExpectedRevision } from '../../../domain/article/decider.ts';
import type { FeaturedImage } from '../../../domain/article/events.ts';
import { DomainError, parameterError } from '../../../domain/errors.ts';
import type { Caller, Commands, EditResult } from '../../../infra/commands.ts';
import type { Db } from '../../../infra/db/schema.ts';
import { idempotent, requestHash, type StoredResponse } from '../../../infra/idempotency.ts';
import type { FetchImage } from '../../../infra/media/fetch.ts';
import { type ImageInfo, inspectImage, MAX_IMAGE_BYTES } from '../../../infra/media/image.ts';
import type { MediaStore } from '../../../infra/media/store.ts';
import { findArticleRevision, findArticleSite } from '../../../projections/articles.ts';
import { findRevision, listRevisions, type RevisionRow } from '../../../projections/revisions.ts';
import { liveKeyOf, type Principal, principalOf } from './auth.ts';
import { sendList } from './lists.ts';
import { readErrors } from './read-routes.ts';
import { ArticleParams, listOf, PageQuery, Problem } from './schemas.ts';
import { articleOut, rfc3339, weakEtag } from './wire.ts';
import {
  ArticleChange,
  EditArticleBody,
  FeaturedImageJsonBody,
  FeaturedImageMultipartDoc,
  RestoreBody,
  Revision,
  RevisionContent,
  RevisionParams,
  WriteHeaders,
} from './write-schemas.ts';

/** Called once per write that reaches an article of the account, before it runs: throws when the day's edits are used up. */
export type EditGate = (request: FastifyRequest, reply: FastifyReply, accountId: string) => Promise<void>;

export type WriteRouteDeps = {
  db: Db;
  commands: Commands;
  publicUrl: string;
  editGate: EditGate;
  media: MediaStore;
  fetchImage: FetchImage;
};

const writeErrors = { ...readErrors, 403: Problem, 409: Problem, 412: Problem, 422: Problem } as const;
const RevisionList = listOf(Revision, 'RevisionList', {
  of: 'revisions, newest first',
  examplePath: '/api/v1/articles/art_06h014k2g711vw3tv0g528qpw8/revisions',
});

/** `If-Match: W/"3"` (or `"3"`) → 3; `*` or absent → no expectation; anything else is a 400. */
export function parseIfMatch(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '*') return undefined;
  const match = /^\s*(?:W\/)?"(\d{1,9})"\s*$/.exec(value);
  if (!match?.[1]) {
    throw parameterError('If-Match must be the ETag of a revision, like W/"3"', [
      { in: 'header', name: 'if-match', message: 'must be an ETag like W/"3"' },
    ]);
  }
  return Number(match[1]);
}

/** The article as it was at revision n (by replay) with that revision's record: one answer for the API and MCP. */
export async function revisionContent(
  db: Db,
  commands: Commands,
  accountId: string,
  articleId: string,
  revision: number,
): Promise<{ siteId: string; content: z.infer<typeof RevisionContent> }> {
  const state = await commands.articleAt(accountId, articleId, revision);
  const record = await findRevision(db, articleId, revision);
  if (!state.exists || !record)
    throw new DomainError('not_found', `Article ${articleId} has no revision ${revision}`);
  return {
    siteId: state.siteId,
    content: {
      ...revisionOut(record),
      title: state.title,
      body: state.body,
      featured_image: state.featuredImage,
      status: state.status,
      published_at: state.publishedAt ? rfc3339(new Date(state.publishedAt)) : null,
    },
  };
}

export function revisionOut(row: RevisionRow): z.infer<typeof Revision> {
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

/** An image recognised from its bytes (format, size, dimensions: 415 or 413 otherwise), not stored yet. */
export type CheckedImage = { bytes: Uint8Array; info: ImageInfo; alt: string };

export async function checkImage(bytes: Uint8Array, alt: string): Promise<CheckedImage> {
  return { bytes, info: await inspectImage(bytes), alt };
}

/**
 * Replaces an article's featured image: the API (multipart and `{url}`) and the MCP tool share this
 * path, called once the article is known to be the account's and the edit has been counted. The image
 * is stored only for a write that will be accepted: a stale expected revision is refused first (from
 * the read model, written in the same transaction as every revision). A concurrent edit can still make
 * the revision stale between that check and the append; the file stored for it is then referenced by
 * no event, and the media collector (infra/jobs/housekeeping.ts) removes it after its grace period.
 */
export async function replaceFeaturedImage(
  deps: { db: Db; commands: Commands; media: MediaStore; publicUrl: string },
  accountId: string,
  articleId: string,
  image: CheckedImage,
  opts: { expectedRevision: number | undefined; caller: Caller },
): Promise<EditResult> {
  if (opts.expectedRevision !== undefined) {
    const current = await findArticleRevision(deps.db, accountId, articleId);
    if (current === undefined) throw new DomainError('not_found', `No article ${articleId}`);
    checkExpectedRevision(current, opts.expectedRevision);
  }
  const { info } = image;
  const stored = await deps.media.put(image.bytes, info.ext, info.mime);
  const featuredImage: FeaturedImage = {
    url: `${deps.publicUrl}${stored.url}`,
    alt: image.alt,
    width: info.width,
    height: info.height,
  };
  return deps.commands.replaceFeaturedImage(
    accountId,
    articleId,
    { featuredImage, expectedRevision: opts.expectedRevision },
    opts.caller,
  );
}

export function changeOut(result: EditResult): z.infer<typeof ArticleChange> {
  return { ...articleOut(result.article), changed: result.changed, sanitized: result.sanitized };
}

/** The writes: article edits, restores; each accepted change is a revision with origin `api`. */
export const writeRoutes: FastifyPluginAsyncZod<WriteRouteDeps> = async (
  app,
  { db, commands, publicUrl, editGate, media, fetchImage },
) => {
  const callerOf = (req: FastifyRequest, principal: Principal): Caller => ({
    origin: 'api',
    actor: principal.actor,
    requestId: String(req.id),
  });

  /**
   * A write to one article: it must be the account's (404 otherwise, counted nowhere); with an
   * Idempotency-Key a retry replays the first answer; the edit gate counts the edit just before it runs.
   */
  async function articleWrite(
    req: FastifyRequest,
    reply: FastifyReply,
    articleId: string,
    payload: unknown,
    run: (principal: Principal) => Promise<EditResult>,
  ): Promise<FastifyReply> {
    const principal = principalOf(req);
    const siteId = await findArticleSite(db, principal.accountId, articleId, liveKeyOf(req));
    if (!siteId) throw new DomainError('not_found', `No article ${articleId}`);
    req.activity.siteId = siteId;
    const work = async (): Promise<StoredResponse> => {
      await editGate(req, reply, principal.accountId);
      const result = await run(principal);
      return { status: 200, headers: { etag: weakEtag(result.revision) }, body: changeOut(result) };
    };
    const key = req.headers['idempotency-key'];
    const { response, replayed } =
      typeof key === 'string'
        ? await idempotent(
            db,
            principal.accountId,
            key,
            requestHash([req.method, req.url, req.headers['if-match'] ?? null, payload]),
            work,
          )
        : { response: await work(), replayed: false };
    if (replayed) reply.header('idempotent-replayed', 'true');
    return reply.status(response.status).headers(response.headers).send(response.body);
  }

  app.put(
    '/articles/:id',
    {
      // The key is confirmed unrevoked by the ownership check before the edit (articleWrite).
      config: { operation: 'update_article', subject: 'article', scope: 'write', keyCheck: 'statement' },
      schema: {
        tags: ['articles'],
        summary: "Edit an article's title and/or body",
        description:
          'The body is sanitised as the editor does (scripts, iframes, event handlers and javascript:/data: URLs are ' +
          'removed, and listed in `sanitized`). Every element carrying `data-service-protected` in the current body ' +
          'must stay with the same tag, attributes, href and text (moving it is fine); an edit that removes, rewrites ' +
          'or forges one is refused with 422 `protected_links_modified` and nothing changes. An accepted change is a ' +
          'new revision (origin `api`); an edit that changes nothing creates none (`changed: false`). Counts against ' +
          'the daily edit limit.',
        params: ArticleParams,
        headers: WriteHeaders,
        body: EditArticleBody,
        response: { 200: ArticleChange, ...writeErrors },
        responseHeaders: { 200: ['ETag', 'Idempotent-Replayed'] },
      },
    },
    async (req, reply) => {
      const expectedRevision = parseIfMatch(req.headers['if-match']);
      const { title, body, reason } = req.body;
      return articleWrite(req, reply, req.params.id, req.body, (principal) =>
        commands.editArticle(
          principal.accountId,
          req.params.id,
          { title, body, reason, expectedRevision },
          callerOf(req, principal),
        ),
      );
    },
  );

  /** The image of a featured-image request: the `image` part of a multipart form, or fetched from `{url}`. */
  async function imageOf(req: FastifyRequest): Promise<{ bytes: Uint8Array; alt: string; source: unknown }> {
    if (!req.isMultipart()) {
      const parsed = FeaturedImageJsonBody.safeParse(req.body);
      if (!parsed.success) {
        throw parameterError(
          'Send multipart/form-data with an `image` file part, or JSON {"url": "https://...", "alt": "..."}',
          parsed.error.issues.map((i) => ({
            in: 'body',
            name: i.path.join('.') || 'body',
            message: i.message,
          })),
        );
      }
      return { bytes: await fetchImage(parsed.data.url), alt: parsed.data.alt ?? '', source: parsed.data };
    }
    let bytes: Uint8Array | undefined;
    let alt = '';
    for await (const part of req.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== 'image' || bytes) {
          part.file.resume();
          throw parameterError('Send exactly one file, in the part named `image`', [
            { in: 'body', name: part.fieldname, message: 'only one file part, named image, is accepted' },
          ]);
        }
        try {
          bytes = await part.toBuffer();
        } catch (error) {
          if ((error as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE') {
            throw new DomainError(
              'image_too_large',
              `The image is larger than ${MAX_IMAGE_BYTES} bytes (10 MiB)`,
            );
          }
          throw error;
        }
      } else if (part.fieldname === 'alt') {
        alt = String(part.value);
        if (alt.length > 1000) {
          throw parameterError('The alt text is too long', [
            { in: 'body', name: 'alt', message: 'must be at most 1000 characters' },
          ]);
        }
      } else {
        throw parameterError(`Unknown form field ${part.fieldname}`, [
          { in: 'body', name: part.fieldname, message: 'is not a known field (image, alt)' },
        ]);
      }
    }
    if (!bytes) {
      throw parameterError('The form has no `image` file part', [
        { in: 'body', name: 'image', message: 'is required' },
      ]);
    }
    return { bytes, alt, source: { sha256: requestHash([Buffer.from(bytes).toString('base64')]), alt } };
  }

  app.post(
    '/articles/:id/featured-image',
    {
      config: { operation: 'replace_featured_image', subject: 'article', scope: 'write' },
      schema: {
        tags: ['articles'],
        summary: "Replace an article's featured image",
        description:
          'Either a multipart form with one file part named `image` (and an optional text part `alt`), or JSON ' +
          '`{url, alt?}` with an https address the service fetches. JPEG, PNG, WebP, GIF and AVIF are accepted, ' +
          'recognised from the bytes; at most 10 MiB and 8000 x 8000 px; SVG is refused. The URL fetch refuses ' +
          'non-https addresses and private, loopback, link-local and reserved destinations (also after each of at ' +
          'most 3 redirects) and stops at 10 s or 10 MiB. The image is stored by the service and served from ' +
          '`/media/...`. A new revision; counts against the daily edit limit.',
        params: ArticleParams,
        headers: WriteHeaders,
        // Null for a multipart form, which the handler reads as a stream; the schema speaks for JSON bodies.
        body: FeaturedImageJsonBody.nullish(),
        multipartBody: FeaturedImageMultipartDoc,
        response: { 200: ArticleChange, ...writeErrors, 413: Problem, 415: Problem },
        responseHeaders: { 200: ['ETag', 'Idempotent-Replayed'] },
      },
    },
    async (req, reply) => {
      const expectedRevision = parseIfMatch(req.headers['if-match']);
      const principal = principalOf(req);
      if (!(await findArticleSite(db, principal.accountId, req.params.id))) {
        throw new DomainError('not_found', `No article ${req.params.id}`);
      }
      const image = await imageOf(req);
      // Recognised before the edit is counted (415 and 413 count nowhere); stored only after it is.
      const checked = await checkImage(image.bytes, image.alt);
      return articleWrite(req, reply, req.params.id, image.source, (p) =>
        replaceFeaturedImage({ db, commands, media, publicUrl }, p.accountId, req.params.id, checked, {
          expectedRevision,
          caller: callerOf(req, p),
        }),
      );
    },
  );

  app.get(
    '/articles/:id/revisions',
    {
      config: { operation: 'list_revisions', subject: 'article' },
      schema: {
        tags: ['revisions'],
        summary: 'List the revisions of an article',
        description:
          'Newest first. Revision 1 is the creation; every later one names its origin, actor and reason.',
        params: ArticleParams,
        querystring: PageQuery,
        response: { 200: RevisionList, ...readErrors },
      },
    },
    async (req, reply) => {
      const principal = principalOf(req);
      const siteId = await findArticleSite(db, principal.accountId, req.params.id);
      if (!siteId) throw new DomainError('not_found', `No article ${req.params.id}`);
      req.activity.siteId = siteId;
      const { page, per_page } = req.query;
      const result = await listRevisions(db, req.params.id, { page, perPage: per_page });
      const path = `/api/v1/articles/${encodeURIComponent(req.params.id)}/revisions`;
      return sendList(
        reply,
        { publicUrl, path, query: req.query, page, perPage: per_page },
        result,
        revisionOut,
      );
    },
  );

  app.get(
    '/articles/:id/revisions/:n',
    {
      config: { operation: 'get_revision', subject: 'article' },
      schema: {
        tags: ['revisions'],
        summary: 'The article as it was at revision n',
        description: 'Obtained by replaying the article’s history up to revision n.',
        params: RevisionParams,
        response: { 200: RevisionContent, ...readErrors },
      },
    },
    async (req) => {
      const { siteId, content } = await revisionContent(
        db,
        commands,
        principalOf(req).accountId,
        req.params.id,
        req.params.n,
      );
      req.activity.siteId = siteId;
      return content;
    },
  );

  app.post(
    '/articles/:id/revisions/:n/restore',
    {
      config: { operation: 'restore_revision', subject: 'article', scope: 'write' },
      schema: {
        tags: ['revisions'],
        summary: 'Restore an earlier revision',
        description:
          'Appends a new revision carrying the content of revision n (`restored_from: n`); history is never rewritten. ' +
          'A restore may not remove a protected link added since revision n (422). Counts against the daily edit limit.',
        params: RevisionParams,
        headers: WriteHeaders,
        // A restore may be sent without a body (fastify hands the validator null then).
        body: RestoreBody.nullish(),
        response: { 200: ArticleChange, ...writeErrors },
        responseHeaders: { 200: ['ETag', 'Idempotent-Replayed'] },
      },
    },
    async (req, reply) => {
      const expectedRevision = parseIfMatch(req.headers['if-match']);
      const reason = req.body?.reason ?? null;
      return articleWrite(req, reply, req.params.id, { n: req.params.n, reason }, (principal) =>
        commands.restoreRevision(
          principal.accountId,
          req.params.id,
          { revision: req.params.n, reason, expectedRevision },
          callerOf(req, principal),
        ),
      );
    },
  );
};
