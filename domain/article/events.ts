import { z } from 'zod';
import { Actor, type Event, eventSchema, Origin } from '../event.ts';

export const ArticleStatus = z.enum(['draft', 'scheduled', 'published', 'archived']);
export type ArticleStatus = z.infer<typeof ArticleStatus>;

export const FeaturedImage = z.object({
  url: z.url(),
  alt: z.string().max(1000),
  width: z.number().int().positive().nullable(),
  height: z.number().int().positive().nullable(),
});
export type FeaturedImage = z.infer<typeof FeaturedImage>;

export const SanitizedItem = z.object({ path: z.string(), removed: z.string(), reason: z.string() });
export type SanitizedItem = z.infer<typeof SanitizedItem>;

/** Every article event is a revision: its number equals the stream version it is stored at. */
const RevisionFields = {
  articleId: z.string().min(1),
  revision: z.number().int().positive(),
  origin: Origin,
  actor: Actor,
  reason: z.string().max(1000).nullable(),
};

export const ArticleCreatedData = z.object({
  ...RevisionFields,
  siteId: z.string().min(1),
  accountId: z.string().min(1),
  title: z.string().min(1).max(300),
  body: z.string(),
  url: z.url(),
  status: ArticleStatus,
  publishedAt: z.iso.datetime({ offset: true }).nullable(),
  targetKeyword: z.string().max(300).nullable(),
  featuredImage: FeaturedImage.nullable(),
});
export const ArticleEditedData = z.object({
  ...RevisionFields,
  title: z.string().min(1).max(300).optional(),
  body: z.string().optional(),
  /** What the sanitiser removed from the submitted body (kept for the audit trail). */
  sanitized: z.array(SanitizedItem),
});
export const FeaturedImageReplacedData = z.object({ ...RevisionFields, featuredImage: FeaturedImage });
export const ArticleRestoredData = z.object({
  ...RevisionFields,
  restoredFrom: z.number().int().positive(),
  title: z.string().min(1).max(300),
  body: z.string(),
  featuredImage: FeaturedImage.nullable(),
});
export const ArticleStatusChangedData = z.object({
  ...RevisionFields,
  status: ArticleStatus,
  publishedAt: z.iso.datetime({ offset: true }).nullable(),
});

export const ArticleEventSchemas = {
  ArticleCreated: eventSchema('ArticleCreated', ArticleCreatedData),
  ArticleEdited: eventSchema('ArticleEdited', ArticleEditedData),
  FeaturedImageReplaced: eventSchema('FeaturedImageReplaced', FeaturedImageReplacedData),
  ArticleRestored: eventSchema('ArticleRestored', ArticleRestoredData),
  ArticleStatusChanged: eventSchema('ArticleStatusChanged', ArticleStatusChangedData),
} as const;

export type ArticleCreated = Event<'ArticleCreated', z.infer<typeof ArticleCreatedData>>;
export type ArticleEdited = Event<'ArticleEdited', z.infer<typeof ArticleEditedData>>;
export type FeaturedImageReplaced = Event<'FeaturedImageReplaced', z.infer<typeof FeaturedImageReplacedData>>;
export type ArticleRestored = Event<'ArticleRestored', z.infer<typeof ArticleRestoredData>>;
export type ArticleStatusChanged = Event<'ArticleStatusChanged', z.infer<typeof ArticleStatusChangedData>>;

export type ArticleEvent =
  | ArticleCreated
  | ArticleEdited
  | FeaturedImageReplaced
  | ArticleRestored
  | ArticleStatusChanged;

/** Every article event type: the article read models handle each. */
export const articleEventTypes = Object.keys(ArticleEventSchemas) as readonly ArticleEvent['type'][];

export const articleStream = (articleId: string): string => `article-${articleId}`;
