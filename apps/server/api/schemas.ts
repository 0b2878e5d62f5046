import { z } from 'zod';
import { ActivitySource } from '../../../domain/activity/events.ts';
import { ArticleStatus } from '../../../domain/article/events.ts';
import { AnchorType, BacklinkCategory } from '../../../domain/backlink/events.ts';
import { ErrorCode } from '../../../domain/errors.ts';
import { ProtectedKind } from '../../../domain/html/tree.ts';
import { ID_MAX_LENGTH, ID_PATTERN, ID_RULE, textProblem } from '../../../domain/input.ts';
import { PAGE_MAX, PER_PAGE_DEFAULT, PER_PAGE_MAX } from '../../../domain/vocabulary.ts';

/*
 * The wire shapes of CONTRACT.md, as zod schemas: the routes validate requests with them, the
 * responses are built to their types (api/wire.ts; the end-to-end tests check every response against
 * them), and the OpenAPI document is generated from them.
 */

const id = z.string().min(1).max(ID_MAX_LENGTH);

/** The message of a length limit. */
export const atMost = (n: number): string => `must be at most ${n} characters`;

/** An id as a request names it (path, filter, tool argument): the alphabet of domain/input.ts. */
export const idParam = z
  .string({ message: 'must be an id (a string)' })
  .min(1, 'must not be empty')
  .max(ID_MAX_LENGTH, atMost(ID_MAX_LENGTH))
  .regex(ID_PATTERN, ID_RULE);

/**
 * Text a person or a model wrote: no lone surrogates and no control characters (with `lines`, tab and
 * line breaks are fine). PostgreSQL refuses some of them; none has a place in a title or a reason.
 */
export function cleanText<T extends z.ZodType<string>>(schema: T, opts: { lines: boolean }): T {
  return schema.superRefine((value, ctx) => {
    const problem = textProblem(value, opts);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }) as T;
}
const timestamp = z.iso.datetime().meta({ example: '2026-11-02T09:30:00Z' });
const calendarDate = z.iso.date().meta({ example: '2026-11-02' });

export const Problem = z
  .object({
    type: z.string().meta({ example: 'https://content-service.dev/problems/not-found' }),
    title: z.string().meta({ example: 'Not found' }),
    status: z.number().int().meta({ example: 404 }),
    detail: z.string().meta({ example: 'No site site_01jd...' }),
    instance: z.string().meta({ example: '/api/v1/sites/site_01jd.../articles' }),
    code: ErrorCode,
    request_id: z.string().meta({ example: 'req_06h0...' }),
    errors: z.array(z.record(z.string(), z.unknown())).optional(),
  })
  .meta({ id: 'Problem', description: 'RFC 9457 problem details; `code` is stable and machine-readable.' });

export const Site = z
  .object({
    id,
    name: z.string(),
    domain: z.string(),
    url: z.url(),
    created_at: timestamp,
  })
  .meta({
    id: 'Site',
    description: 'A website on the account.',
    example: {
      id: 'site_06h014k26k323kar2chmr6p5jr',
      name: 'Northside Plumbing',
      domain: 'northside-plumbing.example',
      url: 'https://northside-plumbing.example/',
      created_at: '2026-10-01T08:00:00Z',
    },
  });

export const FeaturedImage = z
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
    featured_image: FeaturedImage.nullable(),
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
    example: {
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
    },
  });

export const ProtectedLink = z
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
    id: 'art_06h014k2g711vw3tv0g528qpw8',
    site_id: 'site_06h014k26k323kar2chmr6p5jr',
    title: 'How to choose a boiler',
    url: 'https://northside-plumbing.example/blog/how-to-choose-a-boiler',
    status: 'published',
    published_at: '2026-11-02T09:30:00Z',
    target_keyword: 'boiler',
    word_count: 9,
    featured_image: null,
    revision: 3,
    updated_at: '2026-11-05T14:00:00Z',
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

export const Backlink = z
  .object({
    id,
    site_id: id,
    acquired_on: calendarDate,
    source_domain: z.string(),
    source_url: z.string(),
    target_url: z.string(),
    anchor_text: z.string(),
    anchor_type: AnchorType,
    category: BacklinkCategory,
  })
  .meta({
    id: 'Backlink',
    description: 'A link from another website to one of the account’s sites.',
    example: {
      id: 'bl_06h014k41f2z7xq29rrdb0mhtc',
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      acquired_on: '2026-11-03',
      source_domain: 'citylocalnews.example',
      source_url: 'https://citylocalnews.example/business/directory',
      target_url: 'https://northside-plumbing.example/',
      anchor_text: 'Northside Plumbing',
      anchor_type: 'branded',
      category: 'local',
    },
  });

export const Stats = z
  .object({
    site_id: id,
    period: z
      .object({ key: z.string(), from: calendarDate, to: calendarDate })
      .meta({ description: 'The period asked for, as inclusive UTC dates.' }),
    articles: z.object({ published: z.number().int().min(0) }),
    backlinks: z.object({
      total: z.number().int().min(0),
      industry: z.number().int().min(0),
      local: z.number().int().min(0),
    }),
  })
  .meta({
    id: 'Stats',
    description: 'Articles published and backlinks acquired in a period.',
    example: {
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      period: { key: '2026-10', from: '2026-10-01', to: '2026-10-31' },
      articles: { published: 12 },
      backlinks: { total: 30, industry: 18, local: 12 },
    },
  });

/** Who made a change or a call; `type` is an open string on the wire, so a new kind of actor breaks no client. */
export const WireActor = z.object({ type: z.string(), id: z.string(), name: z.string() });

export const ActivityRecord = z
  .object({
    id,
    at: timestamp,
    source: ActivitySource,
    actor: WireActor,
    operation: z
      .string()
      .meta({ description: 'What was done: the MCP tool names (`list_sites`, `get_article`, ...).' }),
    site_id: z.string().nullable(),
    article_id: z.string().nullable(),
    status: z.number().int().meta({ description: 'The HTTP status answered (499 when the client hung up).' }),
    request_id: z.string().nullable(),
    duration_ms: z.number().int().min(0),
  })
  .meta({
    id: 'ActivityRecord',
    description:
      'One call through the API or MCP (refused ones included), or a change the content pipeline made.',
    example: {
      id: 'act_06h017my4x3zamww4jk51y2p4c',
      at: '2026-11-05T14:00:00Z',
      source: 'api',
      actor: { type: 'api_key', id: 'key_06h0...', name: 'Reporting key' },
      operation: 'list_articles',
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      article_id: null,
      status: 200,
      request_id: 'req_06h017my4x3zamww4jk51y2p4c',
      duration_ms: 14,
    },
  });

const Links = z.object({
  self: z.url(),
  first: z.url(),
  last: z.url(),
  prev: z.url().nullable(),
  next: z.url().nullable(),
});
/** The `meta` of a page of a list. */
export const PageMeta = z.object({
  page: z.number().int().min(1),
  per_page: z.number().int().min(1).max(PER_PAGE_MAX),
  total: z.number().int().min(0),
  total_pages: z.number().int().min(0),
});

/**
 * The list envelope of CONTRACT "Lists" around `item`, registered as component `name`. `doc` only
 * documents it: what the items are, and a path for the example (page 2 of 3, built from the item's example).
 */
export function listOf<T extends z.ZodType>(
  item: T,
  name: string,
  doc?: { of: string; examplePath: string },
): z.ZodObject<{ data: z.ZodArray<T>; meta: typeof PageMeta; links: typeof Links }> {
  const list = z.object({ data: z.array(item), meta: PageMeta, links: Links });
  if (!doc) return list.meta({ id: name, description: 'A page of a list, with links to the other pages.' });
  const itemExample = z.globalRegistry.get(item)?.example;
  const url = (page: number): string => `http://localhost:3000${doc.examplePath}?page=${page}&per_page=1`;
  return list.meta({
    id: name,
    description: `A page of ${doc.of}, with links to the other pages (also sent in the \`Link\` header).`,
    example: {
      data: itemExample === undefined ? [] : [itemExample],
      meta: { page: 2, per_page: 1, total: 3, total_pages: 3 },
      links: { self: url(2), first: url(1), last: url(3), prev: url(1), next: url(3) },
    },
  });
}

/* Query parameters. Strict: an unknown parameter is a 400 that names it. */

const pageParam = z.coerce
  .number({ message: 'must be a whole number' })
  .int('must be a whole number')
  .min(1, 'must be 1 or more')
  .max(PAGE_MAX, `must be at most ${PAGE_MAX}`)
  .default(1)
  .meta({ description: 'Page number, from 1. A page past the end has an empty `data`.' });
const perPageParam = z.coerce
  .number({ message: 'must be a whole number' })
  .int('must be a whole number')
  .min(1, 'must be 1 or more')
  .max(PER_PAGE_MAX, `must be at most ${PER_PAGE_MAX}`)
  .default(PER_PAGE_DEFAULT)
  .meta({ description: `Items per page, 1 to ${PER_PAGE_MAX} (above ${PER_PAGE_MAX} is a 400).` });
// Year 0000 is no date in PostgreSQL's calendar (1 BC is followed by AD 1): dates start at 0001-01-01.
const dateParam = z.iso
  .date({ message: 'must be a date YYYY-MM-DD' })
  .refine((d) => !d.startsWith('0000'), 'must be a date from 0001-01-01 on');
const fromParam = dateParam.optional().meta({ description: 'First day, inclusive, UTC (YYYY-MM-DD).' });
const toParam = dateParam.optional().meta({ description: 'Last day, inclusive, UTC (YYYY-MM-DD).' });

/** `from` after `to` is refused. */
export function dateRange<T extends { from?: string | undefined; to?: string | undefined }>(
  q: T,
  ctx: z.RefinementCtx,
): void {
  if (q.from && q.to && q.from > q.to) {
    ctx.addIssue({ code: 'custom', path: ['from'], message: 'must not be after to' });
  }
}

export const PageQuery = z.strictObject({ page: pageParam, per_page: perPageParam });
export const ArticleQuery = z
  .strictObject({
    from: fromParam,
    to: toParam,
    status: ArticleStatus.optional().meta({ description: 'Only articles with this status.' }),
    page: pageParam,
    per_page: perPageParam,
  })
  .superRefine(dateRange);
export const BacklinkQuery = z
  .strictObject({
    from: fromParam,
    to: toParam,
    category: BacklinkCategory.optional().meta({ description: 'Only industry or only local backlinks.' }),
    page: pageParam,
    per_page: perPageParam,
  })
  .superRefine(dateRange);
export const StatsQuery = z.strictObject({
  period: z
    .string()
    .regex(
      /^(this_month|last_month|last_30_days|(19[7-9]\d|[2-9]\d{3})-(0[1-9]|1[0-2]))$/,
      'must be this_month, last_month, last_30_days or a month YYYY-MM from 1970-01 on',
    )
    .default('this_month')
    .meta({
      description:
        'this_month (default), last_month, last_30_days (today and the 29 days before), or a month YYYY-MM. UTC.',
      examples: ['2026-10'],
    }),
});
export const ActivityQuery = z
  .strictObject({
    from: fromParam,
    to: toParam,
    source: ActivitySource.optional().meta({
      description: 'Only records of this origin (`rewrite`: the content pipeline).',
    }),
    site_id: idParam.optional().meta({ description: 'Only records about this site.' }),
    article_id: idParam.optional().meta({ description: 'Only records about this article.' }),
    page: pageParam,
    per_page: perPageParam,
  })
  .superRefine(dateRange);

export const SiteParams = z.strictObject({
  id: idParam.meta({ description: 'Site id', examples: ['site_06h014k26k323kar2chmr6p5jr'] }),
});
export const ArticleParams = z.strictObject({
  id: idParam.meta({ description: 'Article id', examples: ['art_06h014k2g711vw3tv0g528qpw8'] }),
});
