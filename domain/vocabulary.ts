/*
 * The product's shared words and numbers. Each vocabulary is defined once in domain/, as a zod schema
 * or a constant, next to the aggregate it belongs to; the API and MCP schemas, the table types and the
 * OpenAPI document derive from it:
 * - origins and actors: event.ts (`Origin`, `Actor`); activity sources: activity/events.ts
 * - article statuses, featured images and the article limits: article/events.ts
 * - backlink categories and anchor types: backlink/events.ts; key scopes: account/events.ts
 * - error codes: errors.ts; ids: input.ts
 * - sanitised items and their reasons: html/sanitized-item.ts; protected link kinds: html/tree.ts
 * This file holds the ones that belong to no aggregate: lists and the daily edit limit.
 */

/** Items per page of a list: 1 to `PER_PAGE_MAX`, `PER_PAGE_DEFAULT` when not asked. */
export const PER_PAGE_MAX = 100;
export const PER_PAGE_DEFAULT = 20;

/** The highest page number a list accepts. */
export const PAGE_MAX = 1_000_000;

/** Article edits per UTC day per account, unless configured otherwise (CONTRACT "Limits"). */
export const EDIT_LIMIT_PER_DAY = 200;
