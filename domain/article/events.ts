import { z } from 'zod';
import { Actor, type Event, eventSchema, Origin } from '../event.ts';
import { SanitizedItem } from '../html/sanitized-item.ts';
import { WebUrl } from '../input.ts';

/** Title length, in characters. */
export const TITLE_MAX = 300;
/** Length, in characters, of an article's target keyword. */
export const KEYWORD_MAX = 300;
/** Body size, in bytes of UTF-8: as submitted, and as stored once sanitised. */
export const BODY_MAX_MIB = 2;
export const BODY_MAX_BYTES = BODY_MAX_MIB * 1024 * 1024;
/** Length, in characters, of the reason given for a revision. */
export const REASON_MAX = 1000;
/** Length, in characters, of a featured image's alternative text. */
export const ALT_MAX = 1000;
/** A featured image: at most this many bytes, and this many pixels on each side. */
export const MAX_IMAGE_MIB = 10;
export const MAX_IMAGE_BYTES = MAX_IMAGE_MIB * 1024 * 1024;
export const MAX_IMAGE_SIDE = 8000;
/** The highest revision number a request may name (a path, an `If-Match`, an `expected_revision`). */
export const REVISION_MAX = 1_000_000;

export const ArticleStatus = z.enum(['draft', 'scheduled', 'published', 'archived']);
export type ArticleStatus = z.infer<typeof ArticleStatus>;

export const FeaturedImage = z.object({
  url: WebUrl,
  alt: z.string().max(ALT_MAX),
  width: z.number().int().positive().nullable(),
  height: z.number().int().positive().nullable(),
});
export type FeaturedImage = z.infer<typeof FeaturedImage>;

/** Every article event is a revision: its number equals the stream version it is stored at. */
const RevisionFields = {
  articleId: z.string().min(1),
  revision: z.number().int().positive(),
  origin: Origin,
  actor: Actor,
  reason: z.string().max(REASON_MAX).nullable(),
};

export const ArticleCreatedData = z.object({
  ...RevisionFields,
  siteId: z.string().min(1),
  accountId: z.string().min(1),
  title: z.string().min(1).max(TITLE_MAX),
  body: z.string(),
  url: WebUrl,
  status: ArticleStatus,
  publishedAt: z.iso.datetime({ offset: true }).nullable(),
  targetKeyword: z.string().max(KEYWORD_MAX).nullable(),
  featuredImage: FeaturedImage.nullable(),
});
export const ArticleEditedData = z.object({
  ...RevisionFields,
  title: z.string().min(1).max(TITLE_MAX).optional(),
  body: z.string().optional(),
  /** What the sanitiser removed from the submitted body (kept for the audit trail). */
  sanitized: z.array(SanitizedItem),
});
export const FeaturedImageReplacedData = z.object({ ...RevisionFields, featuredImage: FeaturedImage });
export const ArticleRestoredData = z.object({
  ...RevisionFields,
  restoredFrom: z.number().int().positive(),
  title: z.string().min(1).max(TITLE_MAX),
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
