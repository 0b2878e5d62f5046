import type { ColumnType } from 'kysely';
import type { KeyScope } from '../../domain/account/events.ts';
import type { ActivitySource } from '../../domain/activity/events.ts';
import type { ArticleStatus, FeaturedImage } from '../../domain/article/events.ts';
import type { AnchorType, BacklinkCategory } from '../../domain/backlink/events.ts';
import type { Actor, Origin } from '../../domain/event.ts';
import type { ProtectedLink } from '../../domain/html/protected.ts';

/*
 * The read models' tables. Their vocabularies (statuses, origins, sources, scopes, categories) and
 * JSON shapes are the domain's types: a new status is one edit, in the domain.
 */

/** `date` columns travel as `YYYY-MM-DD` strings (the pg parser for OID 1082 is set in open.ts). */
type DateString = string;
type Json<T> = ColumnType<T, string, string>;
type Timestamp = ColumnType<Date, Date | string, Date | string>;

/** The jsonb `actor` of revisions and activity. */
export type ActorJson = Actor;

export interface AccountsTable {
  id: string;
  name: string;
  email: string;
  created_at: Timestamp;
}
export interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  hash: string;
  scope: KeyScope;
  created_at: Timestamp;
  revoked_at: Timestamp | null;
}
export interface StaffTable {
  id: string;
  email: string;
  name: string;
  created_at: Timestamp;
}
export interface SitesTable {
  id: string;
  account_id: string;
  name: string;
  domain: string;
  url: string;
  created_at: Timestamp;
}
export interface ArticlesTable {
  id: string;
  site_id: string;
  account_id: string;
  title: string;
  url: string;
  status: ArticleStatus;
  published_at: Timestamp | null;
  target_keyword: string | null;
  word_count: number;
  featured_image: Json<FeaturedImage | null>;
  revision: number;
  created_at: Timestamp;
  updated_at: Timestamp;
}
/** The jsonb `protected_links` of an article body. */
export type ProtectedLinkJson = ProtectedLink;
export interface ArticleBodiesTable {
  article_id: string;
  body: string;
  /** The body's protected links, found when it was projected (null on rows from before migration 008). */
  protected_links: ColumnType<ProtectedLinkJson[] | null, string | null | undefined, string | null>;
  /** The body's JSON text (a quoted, escaped string), made by PostgreSQL from `body` (a generated column). */
  body_json: ColumnType<string, never, never>;
  /** The body's words for full-text search (weight C), made with SEARCH_LANGUAGE (projections/articles.ts). */
  search: ColumnType<string, never, never>;
}
export interface ArticleTitleSearchTable {
  article_id: string;
  /** The title's (weight A) and target keyword's (B) words for full-text search, made with SEARCH_LANGUAGE. */
  search: ColumnType<string, never, never>;
}
export interface RevisionsTable {
  article_id: string;
  revision: number;
  origin: Origin;
  actor: Json<ActorJson>;
  reason: string | null;
  created_at: Timestamp;
  title: string;
  word_count: number;
  restored_from: number | null;
  event_type: string;
}
export interface BacklinksTable {
  id: string;
  site_id: string;
  account_id: string;
  acquired_on: DateString;
  source_domain: string;
  source_url: string;
  target_url: string;
  anchor_text: string;
  anchor_type: AnchorType;
  category: BacklinkCategory;
  /** When the service recorded it (its event's time); `as_of` statistics count what was recorded by then. */
  recorded_at: ColumnType<Date, Date | string | undefined, never>;
}
export interface StatsBucketsTable {
  site_id: string;
  /** `day` for daily buckets, `month` for monthly buckets. */
  grain: 'day' | 'month';
  /** The day, or the first day of the month. */
  bucket: DateString;
  articles_published: number;
  backlinks_industry: number;
  backlinks_local: number;
}
export interface StatsArticlesTable {
  article_id: string;
  site_id: string;
  /** The UTC day the article counts as published on, or null while it does not count. */
  counted_on: DateString | null;
}
export interface ActivityTable {
  id: string;
  account_id: string;
  at: Timestamp;
  source: ActivitySource;
  actor: Json<ActorJson>;
  operation: string;
  site_id: string | null;
  article_id: string | null;
  /** The revision the call created (a pipeline change: its own); null when it created none. */
  revision: number | null;
  status: number;
  /** The service's id of the request (`req_...`): what support finds an account by. */
  request_id: string | null;
  /** The client's own `X-Request-Id`, never taken for the request id. */
  client_request_id: string | null;
  duration_ms: number;
}

/** Articles per site and status (inline, with the article rows): list totals without counting rows. */
export interface ArticleCountsTable {
  site_id: string;
  status: string;
  n: number;
}
/** Backlinks per site and category (with the backlink rows). */
export interface BacklinkCountsTable {
  site_id: string;
  category: string;
  n: number;
}

/**
 * The activity records per account, UTC day, source and site (`''`: none), kept by the trigger on
 * `activity` (migration 024): a page's total without counting an account's records.
 */
export interface ActivityCountsTable {
  account_id: string;
  day: ColumnType<string, string, string>;
  source: string;
  site_id: string;
  n: number;
}

/** The article aggregate's state at `version` (inline): commands fold from here. */
export interface ArticleSnapshotsTable {
  article_id: string;
  version: number;
  state: ColumnType<unknown, string, string>;
}

/** The article's state every SNAPSHOT_HISTORY_EVERY versions (without its body), for past revisions. */
export interface ArticleSnapshotHistoryTable {
  article_id: string;
  version: number;
  state: ColumnType<unknown, string, string>;
}

/**
 * What an article's list entry showed from one revision on (async, from the events that change it:
 * creation, status changes, featured images, restores): a list `as_of` an instant reads each article's
 * last entry by then.
 */
export interface ArticleHistoryTable {
  article_id: string;
  revision: number;
  site_id: string;
  account_id: string;
  at: Timestamp;
  status: ArticleStatus;
  published_at: Timestamp | null;
  featured_image: Json<FeaturedImage | null>;
}

/** Support staff's searches for accounts (inline, from `StaffSearched`): the staff-side audit. */
export interface StaffSearchesTable {
  id: string;
  staff_id: string;
  staff_name: string;
  at: Timestamp;
  query: string;
  /** The accounts the search listed. */
  account_ids: Json<string[]>;
  result_count: number;
  request_id: string | null;
}

export interface ReadModelTables {
  article_snapshots: ArticleSnapshotsTable;
  article_snapshot_history: ArticleSnapshotHistoryTable;
  article_history: ArticleHistoryTable;
  article_counts: ArticleCountsTable;
  backlink_counts: BacklinkCountsTable;
  activity_counts: ActivityCountsTable;
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  staff: StaffTable;
  sites: SitesTable;
  articles: ArticlesTable;
  article_bodies: ArticleBodiesTable;
  article_title_search: ArticleTitleSearchTable;
  revisions: RevisionsTable;
  backlinks: BacklinksTable;
  stats_buckets: StatsBucketsTable;
  stats_articles: StatsArticlesTable;
  activity: ActivityTable;
  staff_searches: StaffSearchesTable;
}
