import multipart from '@fastify/multipart';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ALT_MAX, MAX_IMAGE_BYTES, MAX_IMAGE_MIB, MAX_IMAGE_SIDE } from '../../../domain/article/events.ts';
import { DomainError, isDomainError } from '../../../domain/errors.ts';
import { ID_PATTERN } from '../../../domain/input.ts';
import {
  type ArticleChangeOut,
  type ArticleOut,
  FeaturedImageJsonBody,
  type ImageInput,
} from '../../application/articles.ts';
import { unwrap } from '../../application/call.ts';
import { revisionOf } from '../../application/contract.ts';
import { statusOf } from '../http/errors.ts';
import { type Html, html, raw } from '../http/html.ts';
import { settled } from '../http/outcome.ts';
import { featuredImage, sentence } from './articles.ts';
import { recordChanges, webCall } from './call.ts';
import { CSRF_FIELD } from './csrf.ts';
import { ARTICLE_PAGE_CSP, installFormParser, installPageHeaders } from './kit.ts';
import type { PagesDeps } from './pages.ts';
import { sendRefusal } from './refusal.ts';
import type { WebSession } from './sessions.ts';
import { articleCrumbs } from './sites.ts';

/*
 * `/articles/{id}/featured-image`: the article's featured image and two forms that replace it, one
 * uploading a file, one giving an https address the service fetches, each with its alt text
 * (required here). Both are `multipart/form-data` (a file needs it) and go through
 * `articles.replaceFeaturedImage`, the use case of the API's `POST .../featured-image` and the MCP
 * tool, with origin `editor` and the person as actor: a new revision, in the history and the activity
 * log. The image is recognised from its bytes there (JPEG, PNG, WebP, GIF, AVIF; at most
 * MAX_IMAGE_MIB MiB and MAX_IMAGE_SIDE pixels a side), and an address is fetched with the API's rules.
 * Replaced: to the article page with its "Saved as revision N" notice. Refused: this page again,
 * with the status the API answers, what went wrong beside the form it concerns, and what was typed.
 */

/** The form fields besides the CSRF token and the file; the token comes first (checked before the rest is read). */
const FIELDS = ['expected_revision', 'alt', 'url'] as const;
type Field = (typeof FIELDS)[number];
/** The most bytes of a text field: an address (2,048 characters) or an alt text (ALT_MAX) in UTF-8. */
const FIELD_MAX_BYTES = 8 * 1024;

/** The two forms of the page. */
type Kind = 'upload' | 'url';

/** What a person sent: the CSRF token, and the fields kept in the form when it is refused. */
type Sent = {
  token: unknown;
  kind: Kind | null;
  alt: string;
  url: string;
  expectedRevision: number | null;
  /** The uploaded file's bytes; `too large` past MAX_IMAGE_BYTES (read to its end, not kept). */
  file: Buffer | 'too large' | null;
};

/** Why the page refuses what was sent: which form, which field, in words, and the status (400 unless said). */
type Refusal = {
  kind: Kind | null;
  field: 'image' | 'url' | 'alt' | null;
  message: Html | string;
  status?: number;
};

/** A form that cannot be read as the page's forms are written: 400. */
class UnreadableForm extends Error {}

const ACCEPT = 'image/jpeg,image/png,image/webp,image/gif,image/avif';

const articlePath = (id: string): string => `/articles/${encodeURIComponent(id)}`;

/**
 * Reads the form: the CSRF token first, as the page's forms send it. Without the right one the rest
 * of the body is read and dropped, never kept, and the token returned is for the route to refuse. A
 * file over MAX_IMAGE_BYTES is read to its end and dropped too (`too large`); a field given twice,
 * unknown or too long, or a body that is not multipart, is an UnreadableForm. Every answer waits for
 * the whole body: a browser still sending would not see it.
 */
async function readForm(request: FastifyRequest, tokenOk: (token: unknown) => boolean): Promise<Sent> {
  if (!request.isMultipart()) throw new UnreadableForm('The form was not sent as multipart/form-data.');
  const values = new Map<Field, string>();
  let token: unknown;
  let file: Sent['file'] | undefined;
  let expired: boolean | undefined;
  let unreadable: string | undefined;
  try {
    for await (const part of request.parts()) {
      if (expired === undefined) {
        token = part.type === 'field' && part.fieldname === CSRF_FIELD ? part.value : undefined;
        expired = !tokenOk(token);
        if (part.type === 'file') part.file.resume();
      } else if (expired || unreadable) {
        if (part.type === 'file') part.file.resume();
      } else if (part.type === 'file') {
        if (part.fieldname !== 'image' || file !== undefined) {
          unreadable = 'The form sent more than one file.';
          part.file.resume();
        } else {
          // A file input left empty sends a part with no file name and no bytes.
          file = await part.toBuffer().then(
            (bytes) => (part.filename === '' && bytes.length === 0 ? null : bytes),
            (error: unknown) => {
              if (tooLarge(error)) return 'too large' as const;
              throw error;
            },
          );
        }
      } else {
        const name = part.fieldname as Field;
        if (!FIELDS.includes(name) || values.has(name))
          unreadable = `The form sent the field ${part.fieldname} twice, or one it does not have.`;
        else if (part.valueTruncated) unreadable = `The field ${name} is longer than the form takes.`;
        else values.set(name, String(part.value));
      }
    }
  } catch (error) {
    // A file over the limit is also the iteration's last word, once the body has been read.
    if (!(file === 'too large' && tooLarge(error))) {
      if (expired) return refused(token);
      throw new UnreadableForm('The form could not be read: send it again from the page.');
    }
  }
  if (expired !== false) return refused(token);
  if (unreadable) throw new UnreadableForm(unreadable);
  const url = values.get('url');
  const kind: Kind | null =
    file !== undefined && url === undefined
      ? 'upload'
      : url !== undefined && file === undefined
        ? 'url'
        : null;
  return {
    token,
    kind,
    alt: values.get('alt') ?? '',
    url: url ?? '',
    expectedRevision: revisionOf(values.get('expected_revision')),
    file: file ?? null,
  };
}

/** Reads a multipart body to its end, keeping nothing (a refusal waits for it: a browser still sending would not see it). */
async function drop(request: FastifyRequest): Promise<void> {
  if (!request.isMultipart()) return;
  try {
    for await (const part of request.parts()) if (part.type === 'file') part.file.resume();
  } catch {
    // A broken body: nothing more to read of it.
  }
}

function tooLarge(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'FST_REQ_FILE_TOO_LARGE';
}

/** A form whose token is wrong: nothing of it is kept. */
function refused(token: unknown): Sent {
  return { token, kind: null, alt: '', url: '', expectedRevision: null, file: null };
}

/** The image the use case is given, or why the form cannot give one (checked before any edit is counted). */
function imageOf(sent: Sent): ImageInput | Refusal {
  const { kind } = sent;
  if (kind === null)
    return { kind, field: null, message: 'Send one of the two forms: a file, or an address.' };
  const alt = sent.alt.trim();
  if (alt === '') {
    return {
      kind,
      field: 'alt',
      message: 'Give the alt text: what the image shows, for people who cannot see it.',
    };
  }
  if (kind === 'upload') {
    const bytes = sent.file;
    if (!bytes) return { kind, field: 'image', message: 'Choose an image file to upload.' };
    if (bytes === 'too large') {
      return {
        kind,
        field: 'image',
        status: statusOf.image_too_large,
        message: `The file is larger than ${MAX_IMAGE_MIB} MiB, the most accepted.`,
      };
    }
    return { upload: async () => ({ bytes, alt }) };
  }
  // The API's own rules for an address and an alt text (an absolute URL, their lengths, no control characters).
  const parsed = FeaturedImageJsonBody.safeParse({ url: sent.url.trim(), alt });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path[0] === 'alt' ? 'alt' : 'url';
    return {
      kind,
      field,
      message: `The ${field === 'alt' ? 'alt text' : 'address'} ${issue?.message ?? 'is not valid'}.`,
    };
  }
  return { url: parsed.data.url, alt: parsed.data.alt ?? alt };
}

/** A refusal of the use case in words, beside the form it concerns. */
function refusalOf(
  error: DomainError,
  kind: Kind | null,
  article: ArticleOut,
  expected: number | null,
): Refusal {
  switch (error.code) {
    case 'revision_mismatch':
      return {
        kind: null,
        field: null,
        message: html`<strong>The article changed since you opened this page.</strong> You started from revision ${expected ?? '?'}; it is now at revision ${article.revision}, with the featured image shown below. Nothing was replaced: send the form again to replace it.`,
      };
    case 'unsupported_image':
    case 'image_too_large':
      return { kind, field: kind === 'url' ? 'url' : 'image', message: sentence(error.message) };
    case 'image_fetch_failed':
      return { kind, field: 'url', message: `The image could not be fetched. ${sentence(error.message)}` };
    default:
      return { kind, field: null, message: sentence(error.message) };
  }
}

export const featuredImagePages: FastifyPluginAsync<PagesDeps> = async (app, { kit, application }) => {
  installFormParser(app, kit);
  // Multipart forms here only, read by the route itself (readForm), with the API's file size.
  await app.register(multipart, {
    limits: {
      fileSize: MAX_IMAGE_BYTES,
      files: 1,
      fields: FIELDS.length + 1,
      parts: FIELDS.length + 2,
      fieldSize: FIELD_MAX_BYTES,
    },
  });
  installPageHeaders(app, { policy: ARTICLE_PAGE_CSP });
  recordChanges(app, kit, application.activity);

  /** The article of the path, or a refusal thrown (404 for another account's). */
  async function articleOf(request: FastifyRequest, session: WebSession): Promise<ArticleOut> {
    const { id } = request.params as { id: string };
    if (!ID_PATTERN.test(id)) throw new DomainError('not_found', `No article ${id}`);
    return unwrap(await application.articles.get(webCall(request, session), id));
  }

  async function imagePage(
    request: FastifyRequest,
    reply: FastifyReply,
    session: WebSession,
    article: ArticleOut,
    opts: { status?: number; sent?: Sent; refusal?: Refusal; notice?: Html } = {},
  ): Promise<FastifyReply> {
    const path = articlePath(article.id);
    const { refusal, sent } = opts;
    // An article without a featured image gets one added: the page says so, not "replace".
    const adding = !article.featured_image;
    const verb = adding ? 'add' : 'replace';
    // The alt text and address typed into the form that was sent are kept; the other starts empty.
    const kept = (kind: Kind, value: 'alt' | 'url'): string => (sent?.kind === kind ? sent[value] : '');
    const error = (kind: Kind | null): Html | string =>
      refusal && refusal.kind === kind
        ? html`<div class="error" role="alert" id="refusal${kind ? `-${kind}` : ''}"><p>${kind ? html`<strong>${adding ? 'Not added.' : 'Not replaced.'}</strong> ` : ''}${refusal.message}</p></div>`
        : '';
    const invalid = (kind: Kind, field: Refusal['field']): Html | string =>
      refusal?.kind === kind && refusal.field === field
        ? raw(` aria-invalid="true" aria-describedby="refusal-${kind}"`)
        : '';
    const common = html`${kit.csrfField(request, reply, session)}
<input type="hidden" name="expected_revision" value="${article.revision}">`;
    const altField = (kind: Kind) => html`<label for="${kind}-alt">Alt text</label>
<p class="muted" id="${kind}-alt-help">What the image shows, for people who cannot see it. Required.</p>
<input type="text" id="${kind}-alt" name="alt" maxlength="${ALT_MAX}" required value="${kept(kind, 'alt')}"${
      invalid(kind, 'alt') || raw(` aria-describedby="${kind}-alt-help"`)
    }>`;
    const trail = await articleCrumbs(application, webCall(request, session), article, [
      [adding ? 'Add a featured image' : 'Featured image', null],
    ]);
    const body = html`${trail}<div class="article-view featured-image-page">
<div class="card">
<h1>${adding ? 'Add a featured image' : 'Replace the featured image'}</h1>
${opts.notice ?? ''}
${error(null)}
${
  adding
    ? html`<p>The image makes revision ${article.revision + 1}; revision ${article.revision} and every earlier one stay without one, and restoring one of them takes it away again.</p>`
    : html`<p>The new image makes revision ${article.revision + 1}; revision ${article.revision} and every earlier one keep the image they had, and restoring one brings it back.</p>`
}
<h2 id="current">Now</h2>
${featuredImage(article.featured_image)}
</div>
<section class="card" aria-labelledby="upload-heading">
<h2 id="upload-heading">Upload an image</h2>
${error('upload')}
<form method="post" action="${path}/featured-image" enctype="multipart/form-data" class="image-form">
${common}
<label for="upload-image">Image file</label>
<p class="muted" id="upload-image-help">JPEG, PNG, WebP, GIF or AVIF, at most ${MAX_IMAGE_MIB} MiB and ${MAX_IMAGE_SIDE} x ${MAX_IMAGE_SIDE} pixels.</p>
<input type="file" id="upload-image" name="image" accept="${ACCEPT}" required${
      invalid('upload', 'image') || raw(' aria-describedby="upload-image-help"')
    }>
${altField('upload')}
<div class="actions"><button class="primary" type="submit">Upload and ${verb}</button></div>
</form>
</section>
<section class="card" aria-labelledby="url-heading">
<h2 id="url-heading">Use an image from an https address</h2>
${error('url')}
<form method="post" action="${path}/featured-image" enctype="multipart/form-data" class="image-form">
${common}
<label for="url-url">Address of the image</label>
<p class="muted" id="url-url-help">An https address: the service fetches the image once and keeps a copy, with the same formats and sizes as an upload.</p>
<input type="url" id="url-url" name="url" maxlength="2048" required placeholder="https://" value="${kept('url', 'url')}"${
      invalid('url', 'url') || raw(' aria-describedby="url-url-help"')
    }>
${altField('url')}
<div class="actions"><button class="primary" type="submit">Fetch and ${verb}</button></div>
</form>
</section>
<p><a href="${path}">Back to the article</a></p>
</div>`;
    return kit.send(reply, {
      status: opts.status ?? 200,
      title: `${adding ? 'Add a featured image' : 'Featured image'} · ${article.title}`,
      body,
      session,
      request,
      wide: true,
    });
  }

  app.get('/articles/:id/featured-image', { schema: { hide: true } }, async (request, reply) => {
    const session = await kit.signedIn(request, reply);
    if (!session) return reply;
    try {
      return imagePage(request, reply, session, await articleOf(request, session));
    } catch (error) {
      return sendRefusal(kit, request, reply, session, error);
    }
  });

  app.post(
    '/articles/:id/featured-image',
    {
      schema: { hide: true },
      config: {
        form: { from: 'account' },
        operation: 'replace_featured_image',
        subject: 'article',
        source: 'editor',
      },
    },
    async (request, reply) => {
      const session = await kit.signedIn(request, reply);
      if (!session) return reply;
      try {
        // The file is read only for an article of the person's (as the API reads it); another's,
        // or none, is the 404 page once the body has been read and dropped.
        const article = await articleOf(request, session).catch(async (error: unknown) => {
          await drop(request);
          throw error;
        });
        let sent: Sent;
        try {
          sent = await readForm(request, (token) => kit.csrf.check(request, session, token));
        } catch (error) {
          if (!(error instanceof UnreadableForm)) throw error;
          return imagePage(request, reply, session, article, {
            status: 400,
            refusal: { kind: null, field: null, message: error.message },
          });
        }
        // A wrong token: the 403 "This form has expired" page.
        if (!kit.checkForm(request, reply, session, sent.token)) return reply;
        const image = imageOf(sent);
        if (!('url' in image) && !('upload' in image)) {
          return imagePage(request, reply, session, article, {
            status: image.status ?? 400,
            sent,
            refusal: image,
          });
        }
        if (sent.expectedRevision === null) {
          return imagePage(request, reply, session, article, {
            status: 400,
            sent,
            refusal: {
              kind: null,
              field: null,
              message: 'The form did not say which revision it was opened on: send it again from this page.',
            },
          });
        }
        const outcome = await application.articles.replaceFeaturedImage(webCall(request, session), {
          articleId: article.id,
          image,
          expectedRevision: sent.expectedRevision,
        });
        let change: ArticleChangeOut;
        try {
          change = settled(request, reply, outcome).change;
        } catch (error) {
          if (!isDomainError(error) || error.code === 'not_found') throw error;
          const latest = await articleOf(request, session);
          return imagePage(request, reply, session, latest, {
            status: statusOf[error.code],
            sent,
            refusal: refusalOf(error, sent.kind, latest, sent.expectedRevision),
          });
        }
        if (!change.changed) {
          return imagePage(request, reply, session, await articleOf(request, session), {
            notice: html`<p class="notice" role="status" id="image-unchanged">Nothing changed: this image, with this alt text, is the featured image already (revision ${change.revision}).</p>`,
          });
        }
        return reply.redirect(`${articlePath(article.id)}?saved=${change.revision}`, 303);
      } catch (error) {
        return sendRefusal(kit, request, reply, session, error);
      }
    },
  );
};
