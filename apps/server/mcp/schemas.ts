import { z } from 'zod';
import {
  ALT_MAX,
  BODY_MAX_MIB,
  MAX_IMAGE_MIB,
  MAX_IMAGE_SIDE,
  REASON_MAX,
  TITLE_MAX,
} from '../../../domain/article/events.ts';
import { PER_PAGE_DEFAULT, PER_PAGE_MAX } from '../../../domain/vocabulary.ts';
import { IDEMPOTENCY_KEY } from '../../../infra/idempotency.ts';
import { ActivityQuery } from '../../application/activity.ts';
import { ArticleQuery, EditArticleBody, FeaturedImageJsonBody } from '../../application/articles.ts';
import { dateRange, idParam, PageQuery } from '../../application/requests.ts';
import { RestoreBody, RevisionParams } from '../../application/revisions.ts';
import { BacklinkQuery, StatsQuery } from '../../application/sites.ts';
import {
  ActivityRecord,
  Article,
  ArticleChange,
  ArticleListItem,
  Backlink,
  Revision,
  RevisionContent,
  Site,
  Stats,
} from '../../application/wire.ts';
import { PageMeta } from '../http/schemas.ts';

/*
 * The tools' inputs and outputs. Inputs are the use cases' requests under the same names, built from
 * the application's own zod fields (same limits, same messages), with descriptions written for a model. Outputs are
 * the API's wire shapes; lists are `{data, meta, next_page}` (the API envelope without its links,
 * which point at the HTTP API: a model pages by calling the tool again with `page: next_page`).
 */

function idField(what: 'site' | 'article', from: string) {
  return idParam.meta({
    description: `The ${what}'s id, as ${from} gives it (e.g. ${what === 'site' ? 'site_' : 'art_'}06h0...).`,
  });
}

const siteId = idField('site', 'list_sites');
const articleId = idField('article', 'list_articles');
const page = PageQuery.shape.page.meta({
  description:
    'Page number, from 1 (default 1). Use next_page from the previous answer to get the next page.',
});
const perPage = PageQuery.shape.per_page.meta({
  description: `Items per page, 1 to ${PER_PAGE_MAX} (default ${PER_PAGE_DEFAULT}).`,
});
const from = ArticleQuery.shape.from.meta({ description: 'First day, inclusive, as a UTC date YYYY-MM-DD.' });
const to = ArticleQuery.shape.to.meta({ description: 'Last day, inclusive, as a UTC date YYYY-MM-DD.' });
const idempotencyKey = z
  .string()
  .regex(IDEMPOTENCY_KEY, 'must be 1 to 255 visible ASCII characters')
  .optional()
  .meta({
    description:
      'Optional: a key of your choosing (1 to 255 visible ASCII characters, a UUID say) that makes a retry ' +
      'safe: the same call with the same key and arguments within 24 hours returns the first answer and ' +
      'makes no second revision; the same key with other arguments is refused. Send one when you may retry.',
  });

const expectedRevision = z.coerce
  .number({ message: 'must be a whole number' })
  .int('must be a whole number')
  .min(1, 'must be 1 or more')
  .max(1_000_000_000, 'must be at most 1000000000')
  .optional()
  .meta({
    description:
      'Optional: the article revision your edit is based on (get_article gives it as `revision`). If the ' +
      'article changed since, nothing changes and the call fails with revision_mismatch.',
  });
const reason = EditArticleBody.shape.reason.meta({
  description: `Optional: why the change is made (at most ${REASON_MAX} characters); shown in the revision history.`,
});

export const ListSitesInput = z.strictObject({ page, per_page: perPage });

export const ListArticlesInput = z
  .strictObject({
    site_id: siteId,
    from: from.meta({ description: 'Only articles published on or after this UTC date (YYYY-MM-DD).' }),
    to: to.meta({ description: 'Only articles published on or before this UTC date (YYYY-MM-DD).' }),
    status: ArticleQuery.shape.status.meta({
      description: 'Only articles with this status: draft, scheduled, published or archived.',
    }),
    page,
    per_page: perPage,
  })
  .superRefine(dateRange);

export const GetArticleInput = z.strictObject({ article_id: articleId });

export const ListBacklinksInput = z
  .strictObject({
    site_id: siteId,
    from: from.meta({ description: 'Only backlinks acquired on or after this UTC date (YYYY-MM-DD).' }),
    to: to.meta({ description: 'Only backlinks acquired on or before this UTC date (YYYY-MM-DD).' }),
    category: BacklinkQuery.shape.category.meta({ description: 'Only industry or only local backlinks.' }),
    page,
    per_page: perPage,
  })
  .superRefine(dateRange);

export const GetStatsInput = z.strictObject({
  site_id: siteId,
  period: StatsQuery.shape.period.meta({
    description:
      'this_month (default), last_month, last_30_days (today and the 29 days before), or a calendar month ' +
      'YYYY-MM. All UTC.',
  }),
});

export const UpdateArticleInput = z
  .strictObject({
    article_id: articleId,
    title: EditArticleBody.shape.title.meta({ description: `The new title, 1 to ${TITLE_MAX} characters.` }),
    body: EditArticleBody.shape.body.meta({
      description:
        `The new full HTML body (at most ${BODY_MAX_MIB} MiB), replacing the current one. Start from get_article’s body and ` +
        'keep every element carrying data-service-protected exactly as it is (copy it verbatim; it may be moved).',
    }),
    reason,
    expected_revision: expectedRevision,
    idempotency_key: idempotencyKey,
  })
  .refine((b) => b.title !== undefined || b.body !== undefined, {
    message: 'give a title, a body, or both',
    path: ['title'],
  });

export const ReplaceFeaturedImageInput = z.strictObject({
  article_id: articleId,
  url: FeaturedImageJsonBody.shape.url.meta({
    description: `The https address of the image (JPEG, PNG, WebP, GIF or AVIF; at most ${MAX_IMAGE_MIB} MiB and ${MAX_IMAGE_SIDE}x${MAX_IMAGE_SIDE} px).`,
  }),
  alt: FeaturedImageJsonBody.shape.alt.meta({
    description: `Alternative text describing the image (at most ${ALT_MAX} characters).`,
  }),
  expected_revision: expectedRevision,
  idempotency_key: idempotencyKey,
});

export const ListRevisionsInput = z.strictObject({ article_id: articleId, page, per_page: perPage });

const revisionNumber = RevisionParams.shape.n.meta({
  description: 'The revision number, from 1 (the article’s creation); list_revisions gives them.',
});

export const GetRevisionInput = z.strictObject({ article_id: articleId, revision: revisionNumber });

export const RestoreRevisionInput = z.strictObject({
  article_id: articleId,
  revision: revisionNumber,
  reason: RestoreBody.shape.reason.meta({
    description: `Optional: why the earlier version comes back (at most ${REASON_MAX} characters).`,
  }),
  expected_revision: expectedRevision,
  idempotency_key: idempotencyKey,
});

export const ListActivityInput = z
  .strictObject({
    from: from.meta({ description: 'Only records on or after this UTC date (YYYY-MM-DD).' }),
    to: to.meta({ description: 'Only records on or before this UTC date (YYYY-MM-DD).' }),
    source: ActivityQuery.shape.source.meta({
      description:
        'Only records from api, mcp (assistants), editor (the web app), rewrite (the content pipeline) or system.',
    }),
    site_id: ActivityQuery.shape.site_id.meta({ description: 'Only records about this site.' }),
    article_id: ActivityQuery.shape.article_id.meta({ description: 'Only records about this article.' }),
    page,
    per_page: perPage,
  })
  .superRefine(dateRange);

/* Outputs. */

const ToolPageMeta = PageMeta.extend({
  total: PageMeta.shape.total.meta({ description: 'Items in the whole list.' }),
});

/** A page of a list, as the tools answer it. */
function pageOf<T extends z.ZodType>(item: T) {
  return z.object({
    data: z.array(item),
    meta: ToolPageMeta,
    next_page: z
      .number()
      .int()
      .min(2)
      .nullable()
      .meta({ description: 'The page to ask for next with the same arguments; null on the last page.' }),
  });
}

export const SiteList = pageOf(Site);
export const ArticleList = pageOf(ArticleListItem);
export const BacklinkList = pageOf(Backlink);
export const RevisionList = pageOf(Revision);
export const ActivityList = pageOf(ActivityRecord);
export { Article, ArticleChange, RevisionContent, Stats };

type JsonSchema = Record<string, unknown>;

/**
 * A zod schema as the JSON Schema a tool advertises: the root is an object schema (as MCP requires),
 * shared components are written inline instead of as `$ref`s (simpler for models and for clients
 * whose validators do not resolve references), without the OpenAPI-only `example` and without the
 * long patterns zod adds beside `format: date`/`date-time` (nor its safe-integer bounds). No `$schema`: the keywords used mean the
 * same in draft-07 and 2020-12 (MCP's default dialect).
 */
export function toolJsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const generated = z.toJSONSchema(schema, { io, unrepresentable: 'throw' }) as JsonSchema;
  const defs = (generated.$defs ?? {}) as Record<string, JsonSchema>;
  const clean = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(clean);
    if (node === null || typeof node !== 'object') return node;
    let object = node as JsonSchema;
    const ref = object.$ref;
    if (typeof ref === 'string' && ref.startsWith('#/$defs/')) {
      const { $ref: _ref, ...rest } = object;
      object = { ...defs[ref.slice('#/$defs/'.length)], ...rest };
    }
    const out: JsonSchema = {};
    for (const [key, value] of Object.entries(object)) {
      if (key === '$schema' || key === '$defs' || key === 'example') continue;
      if (key === 'pattern' && (object.format === 'date' || object.format === 'date-time')) continue;
      // zod's integer bounds say nothing a model needs.
      if (key === 'maximum' && value === Number.MAX_SAFE_INTEGER) continue;
      if (key === 'minimum' && value === Number.MIN_SAFE_INTEGER) continue;
      out[key] =
        key === 'properties' && value !== null && typeof value === 'object'
          ? Object.fromEntries(Object.entries(value).map(([name, property]) => [name, clean(property)]))
          : clean(value);
    }
    return out;
  };
  const result = clean(generated) as JsonSchema;
  if (result.type !== 'object') throw new Error('a tool schema must be an object schema');
  return result;
}
