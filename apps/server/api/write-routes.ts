import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ALT_MAX, MAX_IMAGE_BYTES, MAX_IMAGE_MIB, MAX_IMAGE_SIDE } from '../../../domain/article/events.ts';
import { DomainError } from '../../../domain/errors.ts';
import { createJsonTexts } from '../../../infra/json-texts.ts';
import {
  ArticleChange,
  ArticlePreview,
  EditArticleBody,
  FeaturedImageJsonBody,
  type ImageInput,
} from '../../application/articles.ts';
import { ArticleParams, PageQuery, parameterError, revisionOfEtag } from '../../application/contract.ts';
import type { Application } from '../../application/index.ts';
import {
  CompareQuery,
  RestoreBody,
  Revision,
  RevisionComparison,
  RevisionContent,
  RevisionParams,
} from '../../application/revisions.ts';
import { settled } from '../http/outcome.ts';
import { listOf, Problem } from '../http/schemas.ts';
import { FeaturedImageMultipartDoc, WriteHeaders } from '../http/write-schemas.ts';
import { apiCall, idempotencyOf, sendWrite } from './call.ts';
import { sendList } from './lists.ts';
import { readErrors } from './read-routes.ts';

type WriteRouteDeps = { application: Application; publicUrl: string };

const writeErrors = { ...readErrors, 403: Problem, 409: Problem, 412: Problem, 422: Problem } as const;
const RevisionList = listOf(Revision, 'RevisionList', {
  of: 'revisions, newest first',
  examplePath: '/api/v1/articles/art_06h014k2g711vw3tv0g528qpw8/revisions',
});

/** `If-Match: W/"3"` (or `"3"`) → 3; `*` or absent → no expectation; anything else is a 400. */
function parseIfMatch(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '*') return undefined;
  const revision = revisionOfEtag(value, { weak: 'or-strong' });
  if (revision === null) {
    throw parameterError('If-Match must be the ETag of a revision, like W/"3"', [
      { in: 'header', name: 'if-match', message: 'must be an ETag like W/"3"' },
    ]);
  }
  return revision;
}

/** The writes: article edits, restores; each accepted change is a revision with origin `api`. */
export const writeRoutes: FastifyPluginAsyncZod<WriteRouteDeps> = async (app, { application, publicUrl }) => {
  // The bodies these answers carry, escaped once each (an edit of the title answers with the same body).
  const jsonTexts = createJsonTexts();
  app.put(
    '/articles/:id',
    {
      // The key is confirmed unrevoked by the application's ownership check, in its own statement.
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
      const call = apiCall(req);
      return sendWrite(
        req,
        reply,
        await application.articles.edit(
          call,
          { articleId: req.params.id, title, body, reason, expectedRevision },
          idempotencyOf(req, req.body),
        ),
        jsonTexts,
      );
    },
  );

  app.post(
    '/articles/:id/preview',
    {
      // Changes nothing: a read-only key may preview. The key is confirmed by the ownership check's statement.
      config: { operation: 'articles.preview', subject: 'article', keyCheck: 'statement' },
      schema: {
        tags: ['articles'],
        summary: 'Preview an edit: what it would store, checked and not made',
        description:
          'Takes the body of `PUT /articles/{id}` (`reason` is accepted and ignored) and answers what that edit would ' +
          'do now: the title and sanitised body it would store, their word count, what the sanitiser would remove, ' +
          "the protected links' verdict (`ok: false` with the `errors` a PUT would be refused with, 422 " +
          '`protected_links_modified`), whether it would make a revision (`would_change`), the revision it is based ' +
          'on, and a word diff of the body against the current revision (`null` when too long or different to ' +
          'compare). No revision and no event are made; it is not an edit for the daily limit (it is a request). ' +
          'A stale `If-Match` is a 412, and the title and body rules give the 400s the PUT gives. A read-only key ' +
          'may preview.',
        params: ArticleParams,
        headers: WriteHeaders.pick({ 'if-match': true }),
        body: EditArticleBody,
        response: { 200: ArticlePreview, ...readErrors, 412: Problem },
      },
    },
    async (req, reply) => {
      const expectedRevision = parseIfMatch(req.headers['if-match']);
      const { title, body } = req.body;
      const { preview } = settled(
        req,
        reply,
        await application.articles.preview(apiCall(req), {
          articleId: req.params.id,
          title,
          body,
          expectedRevision,
        }),
      );
      return preview;
    },
  );

  /**
   * The image of a featured-image request: `{url}` to fetch, or the `image` part of a multipart form,
   * read only once the application has found the article to be the caller's.
   */
  function imageOf(req: FastifyRequest): { image: ImageInput; payload: unknown } {
    if (req.isMultipart()) return { image: { upload: () => readForm(req) }, payload: undefined };
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
    return { image: { url: parsed.data.url, alt: parsed.data.alt ?? '' }, payload: parsed.data };
  }

  /** The `image` file part and the `alt` text part of a multipart form. */
  async function readForm(req: FastifyRequest): Promise<{ bytes: Uint8Array; alt: string }> {
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
              `The image is larger than ${MAX_IMAGE_BYTES} bytes (${MAX_IMAGE_MIB} MiB)`,
            );
          }
          throw error;
        }
      } else if (part.fieldname === 'alt') {
        alt = String(part.value);
        if (alt.length > ALT_MAX) {
          throw parameterError('The alt text is too long', [
            { in: 'body', name: 'alt', message: `must be at most ${ALT_MAX} characters` },
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
    return { bytes, alt };
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
          `recognised from the bytes; at most ${MAX_IMAGE_MIB} MiB and ${MAX_IMAGE_SIDE} x ${MAX_IMAGE_SIDE} px; SVG is refused. The URL fetch refuses ` +
          'non-https addresses and private, loopback, link-local and reserved destinations (also after each of at ' +
          `most 3 redirects) and stops at 10 s or ${MAX_IMAGE_MIB} MiB. The image is stored by the service and served from ` +
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
      const { image, payload } = imageOf(req);
      const call = apiCall(req);
      return sendWrite(
        req,
        reply,
        await application.articles.replaceFeaturedImage(
          call,
          { articleId: req.params.id, image, expectedRevision },
          idempotencyOf(req, payload),
        ),
        jsonTexts,
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
      const result = settled(
        req,
        reply,
        await application.revisions.list(apiCall(req), req.params.id, req.query),
      );
      const path = `/api/v1/articles/${encodeURIComponent(req.params.id)}/revisions`;
      return sendList(reply, { publicUrl, path, query: req.query }, result);
    },
  );

  // A static segment: the router prefers it to `/revisions/:n` (and `compare` is no revision number).
  app.get(
    '/articles/:id/revisions/compare',
    {
      config: { operation: 'compare_revisions', subject: 'article' },
      schema: {
        tags: ['revisions'],
        summary: 'Compare two revisions of an article',
        description:
          'The titles at `from` and `to` and a word diff of the visible text from `from` to `to`, each revision ' +
          'obtained by replay; a protected link is one unit (its text is kept, added or removed whole). `to` may be ' +
          'earlier than `from` (the diff then shows the way back) or the same (all `equal`). Texts too long or too ' +
          'different to compare within the diff budget are refused with 422 `diff_too_large`, whose `links` give ' +
          'both revisions whole (`from`, `to`).',
        params: ArticleParams,
        querystring: CompareQuery,
        response: { 200: RevisionComparison, ...readErrors, 422: Problem },
      },
    },
    async (req, reply) =>
      settled(req, reply, await application.revisions.compare(apiCall(req), req.params.id, req.query)),
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
    async (req, reply) =>
      settled(req, reply, await application.revisions.get(apiCall(req), req.params.id, req.params.n)),
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
      const call = apiCall(req);
      return sendWrite(
        req,
        reply,
        await application.revisions.restore(
          call,
          { articleId: req.params.id, revision: req.params.n, reason, expectedRevision },
          idempotencyOf(req, { n: req.params.n, reason }),
        ),
        jsonTexts,
      );
    },
  );
};
