import { z } from 'zod';
import { ArticleStatus } from '../../../domain/article/events.ts';
import { BacklinkCategory } from '../../../domain/backlink/events.ts';
import { ArticleQuery } from '../../application/articles.ts';
import { BacklinkQuery } from '../../application/sites.ts';

/*
 * The query strings of the site pages, read as a person's input: an empty field is no filter, and a
 * refused value is named with the label of its field so that the form can say what to fix.
 */

const page = z.coerce
  .number({ message: 'must be a whole number from 1' })
  .int('must be a whole number from 1')
  .min(1, 'must be a whole number from 1')
  .max(100_000, 'must be at most 100000')
  .default(1);

/**
 * `/sites/{id}`: the articles' filters and page, the backlinks' category and page: the filters are the
 * use cases' own fields (a page's numbers are read as a person types them).
 */
export const SiteQuery = z
  .object({
    from: ArticleQuery.shape.from,
    to: ArticleQuery.shape.to,
    status: ArticleQuery.shape.status,
    page,
    category: BacklinkQuery.shape.category,
    backlinks_page: page,
  })
  .superRefine((q, ctx) => {
    if (q.from && q.to && q.from > q.to) {
      ctx.addIssue({ code: 'custom', path: ['from'], message: 'must not be after the end date' });
    }
  });
export type SiteQuery = z.infer<typeof SiteQuery>;

/** What the person sent, as text: the form shows it again. */
export type SiteForm = Record<'from' | 'to' | 'status' | 'page' | 'category' | 'backlinks_page', string>;

const FIELDS = ['from', 'to', 'status', 'page', 'category', 'backlinks_page'] as const;

/** The names people see for each parameter. */
export const FIELD_LABELS: Record<(typeof FIELDS)[number], string> = {
  from: 'Published from',
  to: 'Published to',
  status: 'Status',
  page: 'Page of articles',
  category: 'Category',
  backlinks_page: 'Page of backlinks',
};

/**
 * Reads `/sites/{id}`'s query: the form's text and either the query or the refusals (each naming its
 * field's label). A parameter given twice is refused; unknown parameters are ignored.
 */
export function readSiteQuery(
  query: unknown,
): { form: SiteForm; query: SiteQuery; errors: [] } | { form: SiteForm; query: null; errors: string[] } {
  const given = (query ?? {}) as Record<string, unknown>;
  const form = {} as SiteForm;
  const input: Record<string, string> = {};
  const errors: string[] = [];
  for (const field of FIELDS) {
    const value = given[field];
    if (Array.isArray(value)) {
      errors.push(`${FIELD_LABELS[field]}: must be given once`);
      form[field] = '';
      continue;
    }
    const text = typeof value === 'string' ? value.trim() : '';
    form[field] = text;
    if (text !== '') input[field] = text;
  }
  const parsed = SiteQuery.safeParse(input);
  if (parsed.success && errors.length === 0) return { form, query: parsed.data, errors: [] };
  for (const issue of parsed.error?.issues ?? []) {
    const field = issue.path[0] as (typeof FIELDS)[number];
    const message =
      issue.code === 'invalid_value' && field === 'status'
        ? `must be one of ${ArticleStatus.options.join(', ')}`
        : issue.code === 'invalid_value' && field === 'category'
          ? `must be one of ${BacklinkCategory.options.join(', ')}`
          : issue.message;
    errors.push(`${FIELD_LABELS[field] ?? field}: ${message}`);
  }
  return { form, query: null, errors };
}
