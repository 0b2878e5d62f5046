import { DomainError, invalidField } from '../errors.ts';
import type { Actor, Command, Origin } from '../event.ts';
import { bodyFacts, checkProtectedBlocks } from '../html/facts.ts';
import type { HtmlMemory } from '../html/memory.ts';
import { compareProtectedForms, type ProtectedCheck, type ProtectedForms } from '../html/protected.ts';
import { sanitizeHtml } from '../html/sanitize.ts';
import type { SanitizedItem } from '../html/sanitized-item.ts';
import { isWebUrl, requireText, WEB_URL_RULE } from '../input.ts';
import {
  type ArticleEvent,
  type ArticleStatus,
  BODY_MAX_BYTES,
  BODY_MAX_MIB,
  type FeaturedImage,
  TITLE_MAX,
} from './events.ts';

/** The article as its events leave it. `revision` equals the stream version. */
export type Article = {
  readonly exists: true;
  readonly articleId: string;
  readonly siteId: string;
  readonly accountId: string;
  readonly revision: number;
  readonly title: string;
  readonly body: string;
  readonly url: string;
  readonly status: ArticleStatus;
  readonly publishedAt: string | null;
  readonly targetKeyword: string | null;
  readonly featuredImage: FeaturedImage | null;
  readonly updatedAt: string;
};
export type ArticleState = { readonly exists: false; readonly revision: 0 } | Article;

export const initialState: ArticleState = { exists: false, revision: 0 };

export function evolve(state: ArticleState, event: ArticleEvent): ArticleState {
  const at = event.metadata.at;
  switch (event.type) {
    case 'ArticleCreated': {
      const d = event.data;
      return {
        exists: true,
        articleId: d.articleId,
        siteId: d.siteId,
        accountId: d.accountId,
        revision: d.revision,
        title: d.title,
        body: d.body,
        url: d.url,
        status: d.status,
        publishedAt: d.publishedAt,
        targetKeyword: d.targetKeyword,
        featuredImage: d.featuredImage,
        updatedAt: at,
      };
    }
    case 'ArticleEdited': {
      if (!state.exists) return state;
      const d = event.data;
      return {
        ...state,
        revision: d.revision,
        title: d.title ?? state.title,
        body: d.body ?? state.body,
        updatedAt: at,
      };
    }
    case 'FeaturedImageReplaced':
      if (!state.exists) return state;
      return {
        ...state,
        revision: event.data.revision,
        featuredImage: event.data.featuredImage,
        updatedAt: at,
      };
    case 'ArticleRestored': {
      if (!state.exists) return state;
      const d = event.data;
      return {
        ...state,
        revision: d.revision,
        title: d.title,
        body: d.body,
        featuredImage: d.featuredImage,
        updatedAt: at,
      };
    }
    case 'ArticleStatusChanged':
      if (!state.exists) return state;
      return {
        ...state,
        revision: event.data.revision,
        status: event.data.status,
        publishedAt: event.data.publishedAt,
        updatedAt: at,
      };
    default: {
      const unknown: never = event;
      throw new Error(`unknown article event ${JSON.stringify(unknown)}`);
    }
  }
}

/** Replays events onto the initial state (the content at revision n is `fold(events up to n)`). */
export function fold(events: readonly ArticleEvent[]): ArticleState {
  return events.reduce(evolve, initialState);
}

type Who = { origin: Origin; actor: Actor; reason: string | null };
/** Present when the caller edits a revision it has seen (If-Match): a stale one is refused. */
type Expectation = { expectedRevision?: number | undefined };

export type CreateArticle = Command<
  'CreateArticle',
  Who & {
    articleId: string;
    siteId: string;
    accountId: string;
    title: string;
    body: string;
    url: string;
    status: ArticleStatus;
    publishedAt: string | null;
    targetKeyword: string | null;
    featuredImage: FeaturedImage | null;
  }
>;
export type EditArticle = Command<
  'EditArticle',
  Who & Expectation & { articleId: string; title?: string | undefined; body?: string | undefined }
>;
export type ReplaceFeaturedImage = Command<
  'ReplaceFeaturedImage',
  Who & Expectation & { articleId: string; featuredImage: FeaturedImage }
>;
/** `snapshot` is the article replayed up to `revision` by the handler; the decider only judges it. */
export type RestoreRevision = Command<
  'RestoreRevision',
  Who & Expectation & { articleId: string; revision: number; snapshot: ArticleState }
>;
export type ChangeArticleStatus = Command<
  'ChangeArticleStatus',
  Who & Expectation & { articleId: string; status: ArticleStatus; publishedAt: string | null }
>;
export type ArticleCommand =
  | CreateArticle
  | EditArticle
  | ReplaceFeaturedImage
  | RestoreRevision
  | ChangeArticleStatus;

function requireArticle(state: ArticleState, articleId: string): Article {
  if (!state.exists) throw new DomainError('not_found', `No article ${articleId}`);
  return state;
}

/** Refuses an edit made on a revision other than the current one (`If-Match`, `expected_revision`). */
export function checkExpectedRevision(current: number, expected: number | undefined): void {
  if (expected !== undefined && expected !== current) {
    throw new DomainError(
      'revision_mismatch',
      `The article is at revision ${current}, not ${expected}; reload it and apply the edit again`,
    );
  }
}

function checkExpectation(state: Article, expected: number | undefined): void {
  checkExpectedRevision(state.revision, expected);
}

const checkText = (name: string, value: string | null | undefined, lines: boolean): void =>
  requireText(name, value, { lines });

function checkTitle(title: string): void {
  checkText('title', title, false);
  if (title.trim().length === 0 || title.length > TITLE_MAX) {
    throw invalidField(
      `The title must be 1 to ${TITLE_MAX} characters`,
      'title',
      `must be 1 to ${TITLE_MAX} characters, not only spaces`,
    );
  }
}

function checkBodySize(body: string): void {
  checkText('body', body, true);
  if (new TextEncoder().encode(body).length > BODY_MAX_BYTES) {
    throw invalidField(
      `The body is larger than ${BODY_MAX_MIB} MiB`,
      'body',
      `must be at most ${BODY_MAX_MIB} MiB (${BODY_MAX_BYTES} bytes) of UTF-8`,
    );
  }
}

/**
 * The stored body is held to the same limit as the submitted one: serialising the sanitised tree can
 * make it longer (`&` becomes `&amp;`, attribute values gain quotes), so a body just under the limit
 * may come out over it.
 */
function checkSanitizedSize(html: string): void {
  if (new TextEncoder().encode(html).length > BODY_MAX_BYTES) {
    throw invalidField(
      `The body is larger than ${BODY_MAX_MIB} MiB once sanitised (characters such as & are stored escaped, as &amp;)`,
      'body',
      `must be at most ${BODY_MAX_MIB} MiB (${BODY_MAX_BYTES} bytes) of UTF-8 once sanitised`,
    );
  }
}

/**
 * Protected blocks may be moved, never removed or rewritten. Only the service's own pipeline
 * (origin `rewrite`) inserts new ones: from anyone else a new protected block is a forgery.
 */
function checkProtected(current: string, next: string, origin: Origin, memory?: HtmlMemory): void {
  refuseProtectedChanges(checkProtectedBlocks(current, next, memory), origin);
}

/** The check as the origin is held to it: from `rewrite`, a new protected block is no error. */
function protectedFor(check: ProtectedCheck, origin: Origin): ProtectedCheck {
  if (check.ok) return check;
  const errors = origin === 'rewrite' ? check.errors.filter((e) => e.change !== 'forged') : check.errors;
  return errors.length > 0 ? { ...check, errors } : { ok: true };
}

function refuseProtectedChanges(check: ProtectedCheck, origin: Origin): void {
  const held = protectedFor(check, origin);
  if (!held.ok) throw new DomainError('protected_links_modified', held.summary, held.errors);
}

/**
 * What an edit of title and/or body would do to the article, judged and not made: the title and body
 * it would store (the body sanitised), what the sanitiser removes, the protected blocks' verdict for
 * the edit's origin, and whether anything would change.
 */
export type EditVerdict = {
  /** The title and body the article would have after the edit (the current ones where unchanged). */
  readonly title: string;
  readonly body: string;
  /** What sanitising the submitted body removed (none without a body). */
  readonly sanitized: SanitizedItem[];
  /** The protected blocks' verdict, with the errors the edit's origin is refused for. */
  readonly protected: ProtectedCheck;
  /** The title, the body, as they differ from the current ones (undefined: unchanged). */
  readonly titleChange: string | undefined;
  readonly bodyChange: string | undefined;
  /** True when the edit would make a revision: the protected check passes and title or body differ. */
  readonly wouldChange: boolean;
};

/**
 * The one judgement of an edit: `decide` makes its `EditArticle` events from it (refusing a failed
 * protected check), the preview (apps/application/articles.ts `preview`) answers with it, so the two
 * cannot disagree. Throws what the edit throws before its protected check: `invalid_request` for
 * neither a title nor a body and for a title or body the rules refuse, `revision_mismatch` for a
 * stale expected revision. `memory` as for `decide`.
 */
export function editVerdict(article: Article, d: EditArticle['data'], memory?: HtmlMemory): EditVerdict {
  if (d.title === undefined && d.body === undefined) {
    throw invalidField('Give a title, a body, or both', 'title', 'title or body is required');
  }
  checkExpectation(article, d.expectedRevision);
  if (d.title !== undefined) checkTitle(d.title);
  let body: string | undefined;
  let sanitized: SanitizedItem[] = [];
  let check: ProtectedCheck = { ok: true };
  if (d.body !== undefined) {
    checkBodySize(d.body);
    const result = sanitizeHtml(d.body, memory);
    checkSanitizedSize(result.html);
    check = protectedFor(checkProtectedBlocks(article.body, result.html, memory), d.origin);
    body = result.html;
    sanitized = result.removed;
  }
  const titleChange = d.title !== undefined && d.title !== article.title ? d.title : undefined;
  const bodyChange = body !== undefined && body !== article.body ? body : undefined;
  return {
    title: titleChange ?? article.title,
    body: bodyChange ?? article.body,
    sanitized,
    protected: check,
    titleChange,
    bodyChange,
    wouldChange: check.ok && (titleChange !== undefined || bodyChange !== undefined),
  };
}

/** The fields every revision event carries: the next revision number and who made it, from where, why. */
function nextRevision(article: Article, who: Who): Who & { articleId: string; revision: number } {
  checkText('reason', who.reason, true);
  return {
    articleId: article.articleId,
    revision: article.revision + 1,
    origin: who.origin,
    actor: who.actor,
    reason: who.reason,
  };
}

/** Field by field: an image read back from the event store's jsonb has its keys in another order. */
function sameImage(a: FeaturedImage | null, b: FeaturedImage | null): boolean {
  if (a === null || b === null) return a === b;
  return a.url === b.url && a.alt === b.alt && a.width === b.width && a.height === b.height;
}

/**
 * `memory`: what the html rules remember between commands (the handler's; domain/html/memory.ts). It
 * changes the time a body takes, never the events: without it every body is parsed in full.
 */
export function decide(command: ArticleCommand, state: ArticleState, memory?: HtmlMemory): ArticleEvent[] {
  const metadata = command.metadata;
  switch (command.type) {
    case 'CreateArticle': {
      const d = command.data;
      if (state.exists) throw new DomainError('conflict', `Article ${d.articleId} exists already`);
      checkTitle(d.title);
      checkBodySize(d.body);
      checkText('reason', d.reason, true);
      if ((d.status === 'published' || d.status === 'scheduled') && d.publishedAt === null) {
        throw new DomainError('invalid_request', `A ${d.status} article needs published_at`);
      }
      const body = sanitizeHtml(d.body, memory).html;
      checkSanitizedSize(body);
      return [{ type: 'ArticleCreated', data: { ...d, body, revision: 1 }, metadata }];
    }
    case 'EditArticle': {
      const d = command.data;
      const article = requireArticle(state, d.articleId);
      const verdict = editVerdict(article, d, memory);
      if (!verdict.protected.ok) {
        throw new DomainError(
          'protected_links_modified',
          verdict.protected.summary,
          verdict.protected.errors,
        );
      }
      const { titleChange: title, bodyChange: body, sanitized } = verdict;
      if (!verdict.wouldChange) return [];
      return [
        {
          type: 'ArticleEdited',
          data: {
            ...nextRevision(article, d),
            ...(title !== undefined ? { title } : {}),
            ...(body !== undefined ? { body } : {}),
            sanitized,
          },
          metadata,
        },
      ];
    }
    case 'ReplaceFeaturedImage': {
      const d = command.data;
      const article = requireArticle(state, d.articleId);
      checkExpectation(article, d.expectedRevision);
      checkText('alt', d.featuredImage?.alt, false);
      if (sameImage(article.featuredImage, d.featuredImage)) return [];
      return [
        {
          type: 'FeaturedImageReplaced',
          data: {
            ...nextRevision(article, d),
            featuredImage: d.featuredImage,
          },
          metadata,
        },
      ];
    }
    case 'RestoreRevision': {
      const d = command.data;
      const article = requireArticle(state, d.articleId);
      checkExpectation(article, d.expectedRevision);
      if (!Number.isInteger(d.revision) || d.revision < 1 || d.revision > article.revision) {
        throw new DomainError('not_found', `Article ${d.articleId} has no revision ${d.revision}`);
      }
      const target = d.snapshot;
      if (!target.exists || target.revision !== d.revision) {
        throw new DomainError('not_found', `Article ${d.articleId} has no revision ${d.revision}`);
      }
      // A featured image ingested before addresses had to be http(s) is not brought back.
      if (target.featuredImage !== null && !isWebUrl(target.featuredImage.url)) {
        throw invalidField(
          `The featured image of revision ${d.revision} has an address that is not http(s); it cannot be restored`,
          'revision',
          `has a featured image whose address ${WEB_URL_RULE}`,
        );
      }
      // The body as the sanitiser stores it now (a revision stored under earlier rules may differ).
      const body = sanitizeHtml(target.body, memory).html;
      checkSanitizedSize(body);
      // A restore is an edit too: it may not drop a protected link inserted after that revision.
      checkProtected(article.body, body, d.origin, memory);
      if (
        target.title === article.title &&
        body === article.body &&
        sameImage(target.featuredImage, article.featuredImage)
      ) {
        return [];
      }
      return [
        {
          type: 'ArticleRestored',
          data: {
            ...nextRevision(article, d),
            restoredFrom: d.revision,
            title: target.title,
            body,
            featuredImage: target.featuredImage,
          },
          metadata,
        },
      ];
    }
    case 'ChangeArticleStatus': {
      const d = command.data;
      const article = requireArticle(state, d.articleId);
      checkExpectation(article, d.expectedRevision);
      if ((d.status === 'published' || d.status === 'scheduled') && d.publishedAt === null) {
        throw new DomainError('invalid_request', `A ${d.status} article needs published_at`);
      }
      if (d.status === article.status && d.publishedAt === article.publishedAt) return [];
      return [
        {
          type: 'ArticleStatusChanged',
          data: {
            ...nextRevision(article, d),
            status: d.status,
            publishedAt: d.publishedAt,
          },
          metadata,
        },
      ];
    }
    default: {
      const unknown: never = command;
      throw new Error(`unknown article command ${JSON.stringify(unknown)}`);
    }
  }
}

/**
 * What is kept of an article between its stored events when they are checked one by one (an archive's
 * log, on import): its revision and its protected blocks, not its body.
 */
export type StoredArticle = { readonly revision: number; readonly forms: ProtectedForms };

/**
 * Checks that a stored article event is one `decide` could have made on the article as its earlier
 * events left it (`article`; undefined before its first event), and returns the article after it. The
 * rules are the write's: the revision is the next one; a title of 1 to 300 characters without control
 * characters; a body within the size limit, stored as the sanitiser stores it (sanitising it again
 * changes nothing: no `<script>`, no event handler, no `javascript:` link), keeping the protected
 * blocks of the body before it (new ones only from the service's own pipeline); a published or
 * scheduled article with its date; a restore of an earlier revision. What the schemas check
 * (`validateEvent`: shapes, origins, http(s) addresses) is assumed done. Throws `invalid_request` (or
 * `protected_links_modified`) saying what no write would have made.
 */
export function admitArticleEvent(
  article: StoredArticle | undefined,
  event: ArticleEvent,
  memory?: HtmlMemory,
): StoredArticle {
  const d = event.data;
  const expected = (article?.revision ?? 0) + 1;
  if (d.revision !== expected)
    throw new DomainError(
      'invalid_request',
      `${event.type} of article ${d.articleId} is revision ${d.revision}, not the next one (${expected})`,
    );
  checkText('reason', d.reason, true);
  if (event.type === 'ArticleCreated') {
    if (article !== undefined) throw new DomainError('conflict', `Article ${d.articleId} exists already`);
    const c = event.data;
    checkTitle(c.title);
    if ((c.status === 'published' || c.status === 'scheduled') && c.publishedAt === null)
      throw new DomainError('invalid_request', `A ${c.status} article needs published_at`);
    checkText('alt', c.featuredImage?.alt, false);
    return { revision: c.revision, forms: storedBodyForms(c.body, memory) };
  }
  if (article === undefined)
    throw new DomainError('not_found', `${event.type} of article ${d.articleId}, which was not created`);
  switch (event.type) {
    case 'ArticleEdited': {
      const e = event.data;
      if (e.title === undefined && e.body === undefined)
        throw invalidField(
          'An edit changes the title, the body, or both',
          'title',
          'title or body is required',
        );
      if (e.title !== undefined) checkTitle(e.title);
      if (e.body === undefined) return { revision: e.revision, forms: article.forms };
      const forms = storedBodyForms(e.body, memory);
      refuseProtectedChanges(compareProtectedForms(article.forms, forms), e.origin);
      return { revision: e.revision, forms };
    }
    case 'FeaturedImageReplaced':
      checkText('alt', event.data.featuredImage.alt, false);
      return { revision: event.data.revision, forms: article.forms };
    case 'ArticleRestored': {
      const r = event.data;
      if (r.restoredFrom >= r.revision)
        throw new DomainError(
          'not_found',
          `Revision ${r.revision} of article ${r.articleId} restores revision ${r.restoredFrom}, which it precedes`,
        );
      checkTitle(r.title);
      checkText('alt', r.featuredImage?.alt, false);
      const forms = storedBodyForms(r.body, memory);
      refuseProtectedChanges(compareProtectedForms(article.forms, forms), r.origin);
      return { revision: r.revision, forms };
    }
    case 'ArticleStatusChanged': {
      const s = event.data;
      if ((s.status === 'published' || s.status === 'scheduled') && s.publishedAt === null)
        throw new DomainError('invalid_request', `A ${s.status} article needs published_at`);
      return { revision: s.revision, forms: article.forms };
    }
    default: {
      const unknown: never = event;
      throw new Error(`unknown article event ${JSON.stringify(unknown)}`);
    }
  }
}

/** A stored body must be one the sanitiser stores: within the limit, and unchanged by sanitising it. */
function storedBodyForms(body: string, memory?: HtmlMemory): ProtectedForms {
  checkBodySize(body);
  const result = sanitizeHtml(body, memory);
  if (result.html !== body) {
    const first = result.removed[0];
    const what = first
      ? `: it holds ${first.removed} at ${first.path} (${first.reason})`
      : ' (it is not written as the sanitiser writes it)';
    throw invalidField(
      `The body is not one the sanitiser stores${what}`,
      'body',
      'must be as the sanitiser stores it',
    );
  }
  return bodyFacts(body, memory).protectedForms;
}
