import { z } from 'zod';
import { REASON_MAX } from '../../domain/article/events.ts';
import { DomainError, type NamedDetail } from '../../domain/errors.ts';
import { ID_MAX_LENGTH, ID_PATTERN, ID_RULE, textProblem } from '../../domain/input.ts';
import { PAGE_MAX, PER_PAGE_DEFAULT, PER_PAGE_MAX } from '../../domain/vocabulary.ts';

/*
 * The fields every request is made of, as zod schemas (ids, pages, date ranges, text, reasons), and the
 * requests shared by several use cases (a page of a list, a site's or an article's id). Each use case
 * declares its own requests beside it from these (articles.ts: ArticleQuery, EditArticleBody, ...): the
 * API takes them as its parameters and bodies (the OpenAPI document is generated from them), the MCP
 * tools derive their inputs from them, the pages read their forms with their fields. Strict: an
 * unknown parameter is a 400 that names it.
 */

/**
 * A parameter a face refused where it read it (a request header, a query parameter, a path segment, the
 * request body as a whole, a tool's arguments), in the shape every face answers with: `in` names the
 * place.
 */
export type ParameterError = NamedDetail & {
  readonly in: 'header' | 'query' | 'path' | 'body' | 'arguments';
};

/** `invalid_request` naming the parameters a face refused where it read them. */
export function parameterError(message: string, errors: readonly ParameterError[]): DomainError {
  return new DomainError('invalid_request', message, errors);
}

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
export const pageParam = z.coerce
  .number({ message: 'must be a whole number' })
  .int('must be a whole number')
  .min(1, 'must be 1 or more')
  .max(PAGE_MAX, `must be at most ${PAGE_MAX}`)
  .default(1)
  .meta({ description: 'Page number, from 1. A page past the end has an empty `data`.' });
export const perPageParam = z.coerce
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
export const fromParam = dateParam
  .optional()
  .meta({ description: 'First day, inclusive, UTC (YYYY-MM-DD).' });
export const toParam = dateParam.optional().meta({ description: 'Last day, inclusive, UTC (YYYY-MM-DD).' });

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

export const SiteParams = z.strictObject({
  id: idParam.meta({ description: 'Site id', examples: ['site_06h014k26k323kar2chmr6p5jr'] }),
});
export const ArticleParams = z.strictObject({
  id: idParam.meta({ description: 'Article id', examples: ['art_06h014k2g711vw3tv0g528qpw8'] }),
});

export const reasonField = cleanText(z.string().max(REASON_MAX, atMost(REASON_MAX)), { lines: true })
  .nullable()
  .optional();

/** Which page, and how long: what every list takes. */
export type ListQuery = z.output<typeof PageQuery>;
/** Inclusive UTC calendar dates (YYYY-MM-DD). */
export type DateRange = { from?: string | undefined; to?: string | undefined };
