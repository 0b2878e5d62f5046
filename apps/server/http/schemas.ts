import { z } from 'zod';
import { ErrorCode } from '../../../domain/errors.ts';
import { PER_PAGE_MAX } from '../../../domain/vocabulary.ts';

/*
 * What the HTTP faces add to the resources' contracts (apps/application): the problem document and the
 * list envelope (its page counts and links), and how long a page's form field may be before it is
 * read. The OpenAPI document is generated from the contracts and these.
 */

/*
 * The lengths a page's form field may have before it is read at all: what a field may hold is the
 * use cases' rule (apps/application), checked after.
 */
/** A free text field: a reason, a password, an address to return to, a webhook form's value. */
export const FORM_TEXT_MAX = 4096;
/** A form's CSRF token. */
export const FORM_TOKEN_MAX = 256;
/** A short field: a number, a flag, a date and time, a field's name. */
export const FORM_SHORT_MAX = 64;

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
    links: z.record(z.string(), z.string()).optional().meta({
      description:
        'Where to read on, by name, as paths on the service (`diff_too_large`: `from` and `to`, the two revisions).',
    }),
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
 * `meta` adds a list's own fields to its `meta` (an article list's `as_of`).
 */
export function listOf<T extends z.ZodType, M extends z.ZodRawShape = Record<never, never>>(
  item: T,
  name: string,
  doc?: { of: string; examplePath: string },
  meta?: M,
) {
  const list = z.object({ data: z.array(item), meta: PageMeta.extend(meta ?? ({} as M)), links: Links });
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
