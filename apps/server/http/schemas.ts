import { z } from 'zod';
import { ActivitySource } from '../../../domain/activity/events.ts';
import { ArticleStatus } from '../../../domain/article/events.ts';
import { BacklinkCategory } from '../../../domain/backlink/events.ts';
import { ErrorCode } from '../../../domain/errors.ts';
import { ID_MAX_LENGTH, ID_PATTERN, ID_RULE, textProblem } from '../../../domain/input.ts';
import { PAGE_MAX, PER_PAGE_DEFAULT, PER_PAGE_MAX } from '../../../domain/vocabulary.ts';
import {
  ActivityRecord,
  Article,
  ArticleListItem,
  Backlink,
  Site,
  Stats,
} from '../../application/wire-schemas.ts';

/*
 * The API's requests as zod schemas (parameters, queries, the problem document and the list envelope);
 * the wire objects they answer with are the application's (apps/application/wire-schemas.ts), re-exported
 * here for the routes. The OpenAPI document is generated from both.
 */

export { ActivityRecord, Article, ArticleListItem, Backlink, Site, Stats };

const _id = z.string().min(1).max(ID_MAX_LENGTH);

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
      description:
        'Only records of this source (`editor`: article changes on the web pages; `web`: other changes on the web pages; `rewrite`: the content pipeline; `system`: the service and support staff).',
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
