/*
 * The product's shared words and numbers. Each vocabulary is defined once in domain/, as a zod schema
 * or a constant, next to the aggregate it belongs to; the API and MCP schemas, the table types and the
 * OpenAPI document derive from it:
 * - origins and actors: event.ts (`Origin`, `Actor`); activity sources: activity/events.ts
 * - article statuses, featured images and the article limits: article/events.ts
 * - backlink categories and anchor types: backlink/events.ts; key scopes: account/events.ts
 * - error codes: errors.ts; ids: input.ts
 * - sanitised items and their reasons: html/sanitized-item.ts; protected link kinds: html/tree.ts
 * This file holds the ones that belong to no aggregate: lists, the daily edit limit and webhooks.
 */

/** Items per page of a list: 1 to `PER_PAGE_MAX`, `PER_PAGE_DEFAULT` when not asked. */
export const PER_PAGE_MAX = 100;
export const PER_PAGE_DEFAULT = 20;

/** The highest page number a list accepts. */
export const PAGE_MAX = 1_000_000;

/** Article edits per UTC day per account, unless configured otherwise (CONTRACT "Limits"). */
export const EDIT_LIMIT_PER_DAY = 200;

/**
 * Requests per minute per account (and per client address without a key), API and MCP together,
 * unless configured otherwise (CONTRACT "Limits").
 */
export const REQUESTS_PER_MINUTE = 60;

/** The webhook event types an endpoint subscribes to (CONTRACT "Webhooks"). */
export const WEBHOOK_EVENT_TYPES = [
  'article.created',
  'article.updated',
  'article.featured_image_replaced',
  'article.published',
  'backlink.acquired',
  'report.ready',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Webhook endpoints per account. */
export const WEBHOOK_ENDPOINTS_MAX = 10;

/** The delays, in seconds, before each retry of a failed delivery: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h. */
export const WEBHOOK_RETRY_SCHEDULE_SECONDS = '5,300,1800,7200,18000,36000,50400,72000,86400';

/** A delivery succeeds on a 2xx within this many seconds. */
export const WEBHOOK_TIMEOUT_SECONDS = 10;

/** An endpoint failing for this long (every attempt since its last success) is disabled. */
export const WEBHOOK_DISABLE_AFTER_DAYS = 3;
