import { z } from 'zod';
import { checkExpectedRevision } from '../../domain/article/decider.ts';
import type { FeaturedImage } from '../../domain/article/events.ts';
import {
  ALT_MAX,
  ArticleStatus,
  BODY_MAX_MIB,
  MAX_IMAGE_MIB,
  MAX_IMAGE_SIDE,
  REASON_MAX,
  TITLE_MAX,
} from '../../domain/article/events.ts';
import {
  SEARCH_LANGUAGE_DEFAULT,
  SEARCH_QUERY_MAX,
  SNIPPET_MAX,
  snippetOf,
} from '../../domain/article/search.ts';
import { DomainError } from '../../domain/errors.ts';
import { extractProtectedLinks } from '../../domain/html/facts.ts';
import { REMOVED_LISTED_MAX } from '../../domain/html/sanitize.ts';
import { SanitizedItem as SanitizedItemShape } from '../../domain/html/sanitized-item.ts';
import { ProtectedKind } from '../../domain/html/tree.ts';
import { ALL_WORDS, diffChanges } from '../../domain/html/word-diff.ts';
import { URL_MAX } from '../../domain/input.ts';
import type { Db } from '../../infra/db/schema.ts';
import { requestHash } from '../../infra/idempotency.ts';
import { inspectImage } from '../../infra/media/image.ts';
import { type BodyDiff, diffInThread } from '../../infra/sanitize-pool.ts';
import { invalidKeyError } from '../../projections/accounts.ts';
import { listArticlesAsOf } from '../../projections/article-history.ts';
import type {
  ArticleDetailRow,
  ArticleJsonRow,
  ArticleRow,
  ArticleSearchRow,
} from '../../projections/articles.ts';
import {
  detailOf,
  findArticle,
  findArticleHead,
  findArticleJson,
  findArticleRevision,
  listArticles,
  searchArticles,
} from '../../projections/articles.ts';
import { revisionAsOf } from '../../projections/revisions.ts';
import { ofOwnSite } from '../../projections/sites.ts';
import type { ArticleWrite, ArticleWriter } from './article-write.ts';
import { type Call, type Idempotency, type Note, type Outcome, outcomeOf } from './call.ts';
import type { EditResult } from './commands/index.ts';
import {
  asOfParam,
  atMost,
  cleanText,
  DiffChange,
  dateRange,
  fromParam,
  wireId as id,
  idParam,
  type JsonOf,
  pageParam,
  parameterError,
  pastInstant,
  perPageParam,
  reasonField,
  rfc3339,
  timestamp,
  toolFields,
  toParam,
  writeOptions,
} from './contract.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { type Listed, listed, pageOf } from './lists.ts';
import { inUseCase } from './use-case-span.ts';

/*
 * The articles' contract: an article as it is asked for (the API's parameters and bodies, the tools'
 * inputs, the editor's fields) and as it is answered (the wire objects and their mappers); then the
 * use cases.
 */

/** A featured image on the wire (the domain's, with its size when known). */
export const WireFeaturedImage = z
  .object({
    url: z.url(),
    alt: z.string(),
    width: z.number().int().nullable(),
    height: z.number().int().nullable(),
  })
  .meta({
    id: 'FeaturedImage',
    description: 'The image shown with the article; width and height in pixels when known.',
  });

/** An article list item, as the documents show one. */
const LIST_ITEM_EXAMPLE = {
  id: 'art_06h014k2g711vw3tv0g528qpw8',
  site_id: 'site_06h014k26k323kar2chmr6p5jr',
  title: 'How to choose a boiler',
  url: 'https://northside-plumbing.example/blog/how-to-choose-a-boiler',
  status: 'published',
  published_at: '2026-11-02T09:30:00Z',
  target_keyword: 'boiler',
  word_count: 812,
  featured_image: { url: 'https://images.example/boiler.jpg', alt: 'A boiler', width: 1200, height: 630 },
  revision: 3,
  updated_at: '2026-11-05T14:00:00Z',
} as const;

export const ArticleListItem = z
  .object({
    id,
    site_id: id,
    title: z.string(),
    url: z.url(),
    status: ArticleStatus,
    published_at: timestamp
      .nullable()
      .meta({ description: 'When it was (or is to be) published; null for drafts.' }),
    target_keyword: z.string().nullable(),
    word_count: z.number().int().min(0).meta({ description: 'Words in the text of the body.' }),
    featured_image: WireFeaturedImage.nullable(),
    revision: z
      .number()
      .int()
      .min(1)
      .meta({ description: 'The current revision; GET article sends it as the weak ETag `W/"<revision>"`.' }),
    updated_at: timestamp,
  })
  .meta({
    id: 'ArticleListItem',
    description: 'An article as lists show it (without its body).',
    example: LIST_ITEM_EXAMPLE,
  });

/** A highlight's two ends: where it starts and where it stops. */
const RANGE_ENDS = 2;

/** How a search hit matched: its relevance and an excerpt of its body with the matched words. */
const SearchMatch = z
  .object({
    score: z.number().min(0).meta({
      description:
        'Relevance (PostgreSQL `ts_rank`): higher is better; words in the title count most, then the target keyword, then the body.',
    }),
    snippet: z.string().meta({
      description: `Plain text from the body around the matched words, at most ${SNIPPET_MAX} characters (an ellipsis ends a cut one).`,
    }),
    highlights: z.array(z.array(z.number().int().min(0)).length(RANGE_ENDS)).meta({
      description:
        'The matched words in `snippet`, as `[start, end]` character ranges (UTF-16 code units, end exclusive), in order.',
    }),
  })
  .meta({ id: 'SearchMatch' });

export const ArticleSearchHit = ArticleListItem.extend({ match: SearchMatch }).meta({
  id: 'ArticleSearchHit',
  description: 'An article a search found (as lists show it) and how it matched.',
  example: {
    ...LIST_ITEM_EXAMPLE,
    featured_image: null,
    match: {
      score: 0.6079271,
      snippet: 'A combi boiler heats water on demand … ask for the boiler pressure at the first service',
      highlights: [
        [8, 14],
        [51, 57],
      ],
    },
  },
});

const ProtectedLink = z
  .object({
    id: z.string(),
    kind: ProtectedKind,
    href: z.string(),
    text: z.string(),
  })
  .meta({
    id: 'ProtectedLink',
    description:
      'A block of the body marked `data-service-protected`: an inserted backlink anchor or internal link that an edit must keep.',
  });

export const Article = ArticleListItem.extend({
  body: z
    .string()
    .meta({ description: 'The full HTML body. Protected blocks carry `data-service-protected`.' }),
  protected_links: z.array(ProtectedLink),
}).meta({
  id: 'Article',
  description: 'An article with its full HTML body and the protected links read from it.',
  example: {
    ...LIST_ITEM_EXAMPLE,
    word_count: 9,
    featured_image: null,
    body: '<p>Read our <a href="https://northside-plumbing.example/services" data-service-protected="internal" data-service-id="il_1">boiler services</a> first.</p>',
    protected_links: [
      {
        id: 'il_1',
        kind: 'internal',
        href: 'https://northside-plumbing.example/services',
        text: 'boiler services',
      },
    ],
  },
});

export const ArticleAsOf = Article.extend({
  as_of: timestamp.meta({
    description: 'The instant asked for (`as_of`), to the second: the article as it stood then.',
  }),
}).meta({
  id: 'ArticleAsOf',
  description:
    'An article as it stood at an instant: the revision current then, with its title, body, status and featured image.',
});

export const GetArticleQuery = z.strictObject({ as_of: asOfParam.optional() });

/** The domain's sanitised item; its `reason` is documented as an open string, so a new reason breaks no client. */
const SanitizedItem = SanitizedItemShape.extend({
  path: SanitizedItemShape.shape.path.meta({ example: 'p[2] > a[1]' }),
  removed: SanitizedItemShape.shape.removed.meta({ example: 'onclick="track()"' }),
  reason: z.string().meta({ example: 'event_handler' }),
}).meta({
  id: 'SanitizedItem',
  description:
    'Something the sanitiser removed from the submitted body. `path` names the elements from the body down ' +
    '(`p[2] > a[1]`); one of more than 8 steps keeps its first 3 and last 4, with `…N…` for the N between.',
});

export const ArticleChange = Article.extend({
  changed: z.boolean().meta({ description: 'false when the edit changed nothing: no revision was created.' }),
  sanitized: z.array(SanitizedItem).meta({
    description:
      `What the sanitiser removed: at most ${REMOVED_LISTED_MAX} items, then one with reason \`more_removed\` whose \`removed\` ` +
      'says how many more (`"250 more"`) and whose `path` is where the first of them was.',
  }),
}).meta({ id: 'ArticleChange' });

export const ArticlePreview = z
  .object({
    article_id: id,
    base_revision: z
      .number()
      .int()
      .min(1)
      .meta({ description: 'The revision the preview judged the edit against (the current one).' }),
    would_change: z.boolean().meta({
      description:
        'true when the edit, sent now as it is, would make a new revision: the protected links pass and the title or body differ.',
    }),
    title: z.string().meta({ description: 'The title the article would have.' }),
    body: z.string().meta({
      description: 'The body the article would have: the submitted one sanitised, or the current one.',
    }),
    word_count: z.number().int().min(0).meta({ description: 'Words in the text of that body.' }),
    sanitized: ArticleChange.shape.sanitized.meta({
      description:
        'What the sanitiser would remove from the submitted body (as the edit would list it in `sanitized`); listed ' +
        'even when nothing would change.',
    }),
    protected_links: z
      .object({
        ok: z.boolean(),
        errors: z.array(z.object({ id: z.string(), change: z.enum(['removed', 'rewritten', 'forged']) })),
      })
      .meta({
        description:
          "The protected links' verdict: when `ok` is false the edit would be refused with 422 `protected_links_modified` " +
          'and these same `errors`.',
      }),
    diff: z
      .array(DiffChange)
      .nullable()
      .meta({
        description:
          "The word diff of the body's text against the current revision; null when the texts are too long or too " +
          'different to compare (or the server is busy comparing others): the verdict stands without it.',
      }),
  })
  .meta({
    id: 'ArticlePreview',
    description:
      'What an edit would do, checked and not made: no revision, no event, not counted as an edit.',
    example: {
      article_id: 'art_06h014k2g711vw3tv0g528qpw8',
      base_revision: 3,
      would_change: true,
      title: 'How to choose a boiler',
      body: '<p>Read our <a href="https://northside-plumbing.example/services" data-service-protected="internal" data-service-id="il_1">boiler services</a> today.</p>',
      word_count: 5,
      sanitized: [{ path: 'p[1]', removed: 'onclick="track()"', reason: 'event_handler' }],
      protected_links: { ok: true, errors: [] },
      diff: [
        { op: 'equal', text: 'Read our boiler services ' },
        { op: 'delete', text: 'first.' },
        { op: 'insert', text: 'today.' },
      ],
    },
  });

/* What the article use cases are asked with: every face's parameters and bodies derive from these. */

export const ArticleQuery = z
  .strictObject({
    from: fromParam,
    to: toParam,
    status: ArticleStatus.optional().meta({ description: 'Only articles with this status.' }),
    as_of: asOfParam.optional().meta({
      description:
        'The list as it stood at this instant (RFC 3339, UTC; not in the future): the articles that existed then, ' +
        'filtered and ordered by their status and `published_at` then, each at its revision then.',
    }),
    page: pageParam,
    per_page: perPageParam,
  })
  .superRefine(dateRange);
/** What an article list's `meta` adds: the instant it stood at, when one was asked for. */
export const ListAsOfMeta = {
  as_of: timestamp
    .optional()
    .meta({ description: 'The instant asked for (`as_of`): the list as it stood then.' }),
};
/** The words of a search (the API's `q`, the tool's `q`, the search page's field). */
export const searchText = cleanText(
  z
    .string({ message: 'give the words to search for' })
    .min(1, 'must not be empty')
    .max(SEARCH_QUERY_MAX, atMost(SEARCH_QUERY_MAX)),
  { lines: false },
);

export const SearchQuery = z
  .strictObject({
    q: searchText.meta({
      description:
        `What to search for, 1 to ${SEARCH_QUERY_MAX} characters, in web-search syntax: words (all must match, ` +
        'in the title and target keyword or in the body), `"a phrase"`, `-word` (must not match anywhere), `or` between alternatives.',
      examples: ['boiler pressure'],
    }),
    site_id: idParam.optional().meta({ description: 'Only articles of this site.' }),
    from: fromParam,
    to: toParam,
    status: ArticleStatus.optional().meta({ description: 'Only articles with this status.' }),
    page: pageParam,
    per_page: perPageParam,
  })
  .superRefine(dateRange);
export type ArticleSearchQuery = z.output<typeof SearchQuery>;

/** An edit names a title, a body, or both: the API's body and the tool's input refuse one that names neither. */
function titleOrBody(b: { title?: string | undefined; body?: string | undefined }): boolean {
  return b.title !== undefined || b.body !== undefined;
}
const TITLE_OR_BODY = { message: 'give a title, a body, or both', path: ['title'] };

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
  .refine(titleOrBody, TITLE_OR_BODY)
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
    url: cleanText(z.url({ message: 'must be an absolute URL' }).max(URL_MAX), { lines: false }).meta({
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

/* The tools' inputs: the same fields, described for a model. */

/** What a tool's list of articles is filtered and paged by: list_articles's and search_articles's. */
const articleFilterInputs = {
  from: toolFields.from('Only articles published'),
  to: toolFields.to('Only articles published'),
  status: ArticleQuery.shape.status.meta({
    description: 'Only articles with this status: draft, scheduled, published or archived.',
  }),
  page: toolFields.page,
  per_page: toolFields.perPage,
};

export const ListArticlesInput = z
  .strictObject({ site_id: toolFields.siteId, ...articleFilterInputs, as_of: ArticleQuery.shape.as_of })
  .superRefine(dateRange);

export const GetArticleInput = z.strictObject({
  article_id: toolFields.articleId,
  as_of: asOfParam.optional(),
});

/** What get_article answers: the article, as it stood at `as_of` when one was given. */
export const ArticleRead = Article.extend({ as_of: ArticleAsOf.shape.as_of.optional() }).meta({
  id: 'ArticleRead',
  description: 'An article with its full HTML body; with `as_of`, as it stood at that instant.',
});

export const SearchArticlesInput = z
  .strictObject({
    q: SearchQuery.shape.q.meta({
      description:
        `The words to find, 1 to ${SEARCH_QUERY_MAX} characters, web-search syntax: plain words must all appear, ` +
        'in the title and target keyword or in the body (any form: "boilers" finds "boiler"), "a quoted phrase" in that order, -word excludes, `or` between ' +
        'alternatives. Common words like "the" are ignored.',
    }),
    site_id: toolFields.siteId
      .optional()
      .meta({ description: "Optional: only this site's articles (list_sites gives ids)." }),
    ...articleFilterInputs,
  })
  .superRefine(dateRange);

export const UpdateArticleInput = z
  .strictObject({
    article_id: toolFields.articleId,
    title: EditArticleBody.shape.title.meta({ description: `The new title, 1 to ${TITLE_MAX} characters.` }),
    body: EditArticleBody.shape.body.meta({
      description:
        `The new full HTML body (at most ${BODY_MAX_MIB} MiB), replacing the current one. Start from get_article’s body and ` +
        'keep every element carrying data-service-protected exactly as it is (copy it verbatim; it may be moved).',
    }),
    reason: EditArticleBody.shape.reason.meta({
      description: `Optional: why the change is made (at most ${REASON_MAX} characters); shown in the revision history.`,
    }),
    ...writeOptions,
  })
  .refine(titleOrBody, TITLE_OR_BODY);

export const PreviewArticleEditInput = z
  .strictObject({
    article_id: toolFields.articleId,
    title: UpdateArticleInput.shape.title,
    body: UpdateArticleInput.shape.body,
    expected_revision: writeOptions.expected_revision,
  })
  .refine(titleOrBody, TITLE_OR_BODY);

export const ReplaceFeaturedImageInput = z.strictObject({
  article_id: toolFields.articleId,
  url: FeaturedImageJsonBody.shape.url.meta({
    description: `The https address of the image (JPEG, PNG, WebP, GIF or AVIF; at most ${MAX_IMAGE_MIB} MiB and ${MAX_IMAGE_SIDE}x${MAX_IMAGE_SIDE} px).`,
  }),
  alt: FeaturedImageJsonBody.shape.alt.meta({
    description: `Alternative text describing the image (at most ${ALT_MAX} characters).`,
  }),
  ...writeOptions,
});

/* Read-model rows to wire objects: every article use case answers with these. */

export type ArticleListItemOut = z.infer<typeof ArticleListItem>;
export type ArticleOut = z.infer<typeof Article>;
export type ArticleAsOfOut = z.infer<typeof ArticleAsOf>;
export type ArticleChangeOut = z.infer<typeof ArticleChange>;
export type ArticlePreviewOut = z.infer<typeof ArticlePreview>;

/** A preview's answer: the wire object, and the diff as the pages render it (`busy`, null: not shown). */
export type EditPreview = { preview: ArticlePreviewOut; diff: BodyDiff };

export function articleListItemOut(row: ArticleRow): ArticleListItemOut {
  return {
    id: row.id,
    site_id: row.site_id,
    title: row.title,
    url: row.url,
    status: row.status,
    published_at: row.published_at ? rfc3339(row.published_at) : null,
    target_keyword: row.target_keyword,
    word_count: row.word_count,
    featured_image: row.featured_image,
    revision: row.revision,
    updated_at: rfc3339(row.updated_at),
  };
}

export type ArticleSearchHitOut = z.infer<typeof ArticleSearchHit>;

export function searchHitOut(row: ArticleSearchRow): ArticleSearchHitOut {
  return { ...articleListItemOut(row), match: { score: row.score, ...snippetOf(row.headline) } };
}

export function articleOut(row: ArticleDetailRow): ArticleOut {
  return {
    ...articleListItemOut(row),
    body: row.body,
    protected_links: row.protected_links ?? extractProtectedLinks(row.body),
  };
}

/**
 * `JSON.stringify(articleOut(row))` of the article read with its body as JSON text (`body_json`,
 * escaped by PostgreSQL when the body was stored): the same text, with that body written as it is
 * rather than escaped again.
 */
export function articleJson(row: ArticleJsonRow): JsonOf<ArticleOut> {
  const links = row.protected_links ?? extractProtectedLinks(JSON.parse(row.body_json) as string);
  return articleText(articleListItemOut(row), row.body_json, links, '');
}

/**
 * An article's JSON as `JSON.stringify` writes it (its list fields, body, protected links, then
 * `more`, the members after them, each led by a comma), with the body's JSON text given.
 */
function articleText(
  listed: ArticleListItemOut,
  bodyJson: string,
  links: ArticleOut['protected_links'],
  more: string,
): string {
  return `${JSON.stringify(listed).slice(0, -1)},"body":${bodyJson},"protected_links":${JSON.stringify(links)}${more}}`;
}

export function changeOut(result: EditResult): ArticleChangeOut {
  return { ...articleOut(result.article), changed: result.changed, sanitized: result.sanitized };
}

/**
 * `JSON.stringify(change)`, with the body's JSON text from `bodyJson` (remembered by the caller for a
 * body it writes again and again: infra/json-texts.ts) rather than escaped here.
 */
export function changeJson(
  change: ArticleChangeOut,
  bodyJson: (body: string) => string,
): JsonOf<ArticleChangeOut> {
  const { body, protected_links, changed, sanitized, ...listed } = change;
  return articleText(
    listed,
    bodyJson(body),
    protected_links,
    `,"changed":${changed},"sanitized":${JSON.stringify(sanitized)}`,
  );
}

/** The featured image of a replacement: an https address the service fetches, or bytes the caller sends. */
export type ImageInput =
  | { url: string; alt: string }
  /** Read once the article is known to be the caller's (a multipart body is not read before). */
  | { upload: () => Promise<{ bytes: Uint8Array; alt: string }> };

export type Articles = ReturnType<typeof createArticles>;

/** Articles: read one or a site's list, edit title and body, replace the featured image. */
export function createArticles(
  deps: Pick<
    ApplicationDeps,
    'db' | 'reads' | 'commands' | 'media' | 'fetchImage' | 'publicUrl' | 'diff' | 'searchLanguage' | 'now'
  >,
  writer: ArticleWriter,
) {
  const { db, commands } = deps;
  const reads = readsOf(deps);
  const diff = deps.diff ?? diffInThread;
  return {
    /** One article of the account with its body and protected links; `not_found` otherwise. */
    get(call: Call, articleId: string): Promise<Outcome<ArticleOut>> {
      return outcomeOf({ articleId }, (note) => readArticle(call, note, articleId));
    },

    /**
     * One article of the account as it stood at `asOf` (RFC 3339): the revision current then, replayed
     * from its events; `not_found` when it did not exist then, an invalid request when `asOf` is in
     * the future.
     */
    getAsOf(call: Call, articleId: string, asOf: string): Promise<Outcome<ArticleAsOfOut>> {
      return outcomeOf({ articleId }, async (note) => {
        const { principal } = call;
        const instant = pastInstant(asOf, deps.now(), principal.origin === 'mcp' ? 'arguments' : 'query');
        const found = await reads.read(principal.accountId, (on) =>
          revisionAsOf(on, articleId, instant, principal.liveKey),
        );
        if (!found.keyLive) throw invalidKeyError();
        if (found.revision === null) {
          throw new DomainError('not_found', `No article ${articleId} at ${rfc3339(instant)}`);
        }
        const state = await commands.articleAt(principal.accountId, articleId, found.revision);
        if (!state.exists) throw new DomainError('not_found', `No article ${articleId}`);
        note.site(state.siteId);
        return { ...articleOut(detailOf(state)), as_of: rfc3339(instant) };
      });
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
        const { principal } = call;
        const scope = { accountId: principal.accountId, siteId, liveKey: principal.liveKey };
        const { from, to, status, as_of: asOf } = query;
        const filters = { ...pageOf(query), from, to, status };
        if (asOf !== undefined) {
          const instant = pastInstant(asOf, deps.now(), principal.origin === 'mcp' ? 'arguments' : 'query');
          const page = await reads.read(scope.accountId, (on) =>
            ofOwnSite(scope, listArticlesAsOf(on, scope, filters, instant)),
          );
          const list = listed(page, query, articleListItemOut);
          return { ...list, meta: { ...list.meta, as_of: rfc3339(instant) } };
        }
        const page = await reads.read(scope.accountId, (on) =>
          ofOwnSite(scope, listArticles(on, scope, filters)),
        );
        return listed(page, query, articleListItemOut);
      });
    },

    /**
     * A full-text search of the account's articles (title, target keyword, body text), most relevant
     * first, then newest published, then by id; limited to a site (`not_found` when it is not the
     * account's), a status and dates. A text with nothing to search for (only common words) is
     * refused, naming `q`.
     */
    search(call: Call, query: ArticleSearchQuery): Promise<Outcome<Listed<ArticleSearchHitOut>>> {
      return outcomeOf(query.site_id === undefined ? {} : { siteId: query.site_id }, async () => {
        const { principal } = call;
        const found = await reads.read(principal.accountId, (on) =>
          searchArticles(on, {
            ...pageOf(query),
            accountId: principal.accountId,
            liveKey: principal.liveKey,
            text: query.q,
            language: deps.searchLanguage ?? SEARCH_LANGUAGE_DEFAULT,
            siteId: query.site_id,
            status: query.status,
            from: query.from,
            to: query.to,
          }),
        );
        if (found.kind === 'not_own_site') throw new DomainError('not_found', `No site ${query.site_id}`);
        if (found.kind === 'nothing_searchable') {
          const message = 'has no word to search for (only common words or signs)';
          throw parameterError(`The search ${JSON.stringify(query.q)} ${message}`, [
            { in: principal.origin === 'mcp' ? 'arguments' : 'query', name: 'q', message },
          ]);
        }
        return listed(found.page, query, searchHitOut);
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
     * What `edit` would do with the same input, checked and not made: the title and body it would store,
     * what the sanitiser removes, the protected links' verdict (the decider's own, `editVerdict`, for
     * the call's origin: refused links are in the answer, not thrown), whether it would make a revision,
     * and the body's word diff against the current revision. No revision, no event, not counted against
     * the edit limit; a read-only grant may preview. Refused as the edit is for an unknown or another
     * account's article (`not_found`), a stale expected revision (`revision_mismatch`) and a title or body
     * the rules refuse. `reason` is not part of a preview (the faces accept it and leave it out).
     */
    preview(
      call: Call,
      input: {
        articleId: string;
        title?: string | undefined;
        body?: string | undefined;
        expectedRevision?: number | undefined;
      },
    ): Promise<Outcome<EditPreview>> {
      const { articleId } = input;
      return inUseCase('articles.preview', call, () =>
        outcomeOf({ articleId }, async (note) => {
          // Tenancy, and the API key confirmed unrevoked, in one statement.
          await writer.own(call, note, articleId);
          const { principal } = call;
          const { article, verdict, wordCount } = await commands.previewEdit(
            principal.accountId,
            articleId,
            { title: input.title, body: input.body, expectedRevision: input.expectedRevision },
            principal,
          );
          const bodyDiff = await diff(article.body, verdict.body, ALL_WORDS);
          const errors = verdict.protected.ok ? [] : verdict.protected.errors;
          return {
            preview: {
              article_id: articleId,
              base_revision: article.revision,
              would_change: verdict.wouldChange,
              title: verdict.title,
              body: verdict.body,
              word_count: wordCount,
              sanitized: verdict.sanitized,
              protected_links: { ok: verdict.protected.ok, errors },
              diff: bodyDiff === null || bodyDiff === 'busy' ? null : diffChanges(bodyDiff),
            },
            diff: bodyDiff,
          };
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
