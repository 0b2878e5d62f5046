import { z } from 'zod';
import { REASON_MAX, REVISION_MAX } from '../../domain/article/events.ts';
import { DomainError, type NamedDetail } from '../../domain/errors.ts';
import { ID_MAX_LENGTH, ID_PATTERN, ID_RULE, textProblem } from '../../domain/input.ts';
import { PAGE_MAX, PER_PAGE_DEFAULT, PER_PAGE_MAX } from '../../domain/vocabulary.ts';
import { IDEMPOTENCY_KEY } from '../../infra/idempotency.ts';

/*
 * What every resource's contract is made of. Each resource's module (sites.ts, articles.ts,
 * revisions.ts, activity.ts, webhooks.ts) declares its contract from these, beside its use cases: the
 * requests (the API's parameters and bodies, the MCP tools' inputs with descriptions written for a
 * model, the fields the pages read their forms with), the wire objects (zod schemas that the API's
 * routes declare as responses, the tools as outputs, and the OpenAPI document is generated from) and
 * the one mapper of each from its read-model row. Strict: an unknown parameter is a 400 that names it.
 */

/* Requests. */

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

/** An instant to read as of: RFC 3339 in UTC, not in the future (`pastInstant`, when read). */
export const asOfParam = z.iso
  .datetime({ message: 'must be a time in RFC 3339 UTC form, as 2026-11-01T09:00:00Z' })
  .meta({
    description:
      'Read as it stood at this instant (RFC 3339, UTC; not in the future): the revision current then. ' +
      'A revision counts from its `created_at`, to the second.',
    example: '2026-11-01T09:00:00Z',
  });

/**
 * The instant of an `as_of` a face read (`in`: the query, or a tool's arguments), or the invalid
 * request naming it when it is after `now`.
 */
export function pastInstant(asOf: string, now: Date, where: 'query' | 'arguments'): Date {
  const instant = new Date(asOf);
  if (instant.getTime() > now.getTime()) {
    const message = 'must not be in the future';
    throw parameterError(`as_of ${asOf} is in the future`, [{ in: where, name: 'as_of', message }]);
  }
  return instant;
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

/* The write options: what an article write is based on, and what makes its retry safe. */

/** A revision number, 1 to REVISION_MAX: in a path, and as the revision a write is based on. */
export const revisionNumber = z.coerce
  .number({ message: 'must be a whole number' })
  .int('must be a whole number')
  .min(1, 'must be 1 or more')
  .max(REVISION_MAX, `must be at most ${REVISION_MAX}`);

/**
 * The revision named by a text (a form's field, the digits of an ETag): decimal digits, 1 to
 * REVISION_MAX; null for anything else.
 */
export function revisionOf(text: unknown): number | null {
  if (typeof text !== 'string' || !/^\d{1,16}$/.test(text.trim())) return null;
  const parsed = revisionNumber.safeParse(text.trim());
  return parsed.success ? parsed.data : null;
}

/**
 * The ETag of a revision (`W/"3"`, or strong `"3"` where `weak` allows it) to its revision number:
 * null when it is no such ETag.
 */
export function revisionOfEtag(value: string, opts: { weak: 'only' | 'or-strong' }): number | null {
  const match = (opts.weak === 'only' ? /^W\/"(\d+)"$/ : /^\s*(?:W\/)?"(\d+)"\s*$/).exec(value);
  return match?.[1] === undefined ? null : revisionOf(match[1]);
}

/**
 * The write options as a tool takes them: the revision the write is based on (the API's `If-Match`,
 * the pages' `expected_revision` field) and an idempotency key (the API's `Idempotency-Key`).
 */
export const writeOptions = {
  expected_revision: revisionNumber.optional().meta({
    description:
      'Optional: the article revision your edit is based on (get_article gives it as `revision`). If the ' +
      'article changed since, nothing changes and the call fails with revision_mismatch.',
  }),
  idempotency_key: z
    .string()
    .regex(IDEMPOTENCY_KEY, 'must be 1 to 255 visible ASCII characters')
    .optional()
    .meta({
      description:
        'Optional: a key of your choosing (1 to 255 visible ASCII characters, a UUID say) that makes a retry ' +
        'safe: the same call with the same key and arguments within 24 hours returns the first answer and ' +
        'makes no second revision; the same key with other arguments is refused. Send one when you may retry.',
    }),
};

/* The fields of the tools' inputs, with descriptions written for a model. */

function idField(what: 'site' | 'article', from: string) {
  return idParam.meta({
    description: `The ${what}'s id, as ${from} gives it (e.g. ${what === 'site' ? 'site_' : 'art_'}06h0...).`,
  });
}

export const toolFields = {
  siteId: idField('site', 'list_sites'),
  articleId: idField('article', 'list_articles'),
  page: pageParam.meta({
    description:
      'Page number, from 1 (default 1). Use next_page from the previous answer to get the next page.',
  }),
  perPage: perPageParam.meta({
    description: `Items per page, 1 to ${PER_PAGE_MAX} (default ${PER_PAGE_DEFAULT}).`,
  }),
  /** `from` and `to` of a list filtered by dates: `what` is the sentence's start ("Only articles published"). */
  from: (what: string) => fromParam.meta({ description: `${what} on or after this UTC date (YYYY-MM-DD).` }),
  to: (what: string) => toParam.meta({ description: `${what} on or before this UTC date (YYYY-MM-DD).` }),
};

/* Wire objects' shared fields. */

export const wireId = z.string().min(1).max(ID_MAX_LENGTH);
export const timestamp = z.iso.datetime().meta({ example: '2026-11-02T09:30:00Z' });
export const calendarDate = z.iso.date().meta({ example: '2026-11-02' });

/** Who made a change or a call; `type` is an open string on the wire, so a new kind of actor breaks no client. */
export const WireActor = z.object({ type: z.string(), id: z.string(), name: z.string() });

/** RFC 3339 UTC without milliseconds, as the wire writes them (`2026-11-02T09:30:00Z`). */
export function rfc3339(date: Date): string {
  // toISOString always ends in `.sssZ`.
  return `${date.toISOString().slice(0, -5)}Z`;
}

/** The JSON text of a wire object of type `T`, as `JSON.stringify` writes it. */
export type JsonOf<T> = string & { readonly __jsonOf?: T };

/**
 * One stretch of a word diff on the wire (an edit's preview, the comparison of two revisions): what
 * `diffChanges` (domain/html/word-diff.ts) makes of a whole word diff.
 */
export const DiffChange = z
  .object({
    op: z.enum(['equal', 'insert', 'delete']),
    text: z.string(),
  })
  .meta({
    id: 'DiffChange',
    description:
      'One stretch of a word diff of the visible text, in order: `equal` (in both), `insert` (only after) or ' +
      '`delete` (only before). A protected link is one unit: its text is kept, added or removed whole.',
    example: { op: 'insert', text: 'condensing ' },
  });
