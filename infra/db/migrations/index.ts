import type { Migration, MigrationProvider } from 'kysely/migration';
import * as eventStore from './2026-11-21-001-event-store.ts';
import * as readModels from './2026-11-21-002-read-models.ts';
import * as apiKeyUsage from './2026-11-22-003-api-key-usage.ts';
import * as idempotency from './2026-11-22-004-idempotency.ts';
import * as oauthAndWebSessions from './2026-11-22-005-oauth-and-web-sessions.ts';
import * as listCounts from './2026-11-22-006-list-counts.ts';
import * as articleSnapshots from './2026-11-22-007-article-snapshots.ts';
import * as bodyProtectedLinks from './2026-11-22-008-body-protected-links.ts';
import * as snapshotsWithoutBody from './2026-11-22-009-snapshots-without-body.ts';
import * as lz4Bodies from './2026-11-22-010-lz4-bodies.ts';
import * as credentials from './2026-11-23-011-credentials.ts';
import * as featuredImageReferences from './2026-11-23-012-featured-image-references.ts';
import * as activityRevision from './2026-11-23-013-activity-revision.ts';
import * as staff from './2026-11-23-014-staff.ts';
import * as webhooks from './2026-11-24-015-webhooks.ts';
import * as requestIdsAndStaffSearches from './2026-11-26-016-request-ids-and-staff-searches.ts';
import * as bodyJson from './2026-11-27-017-body-json.ts';
import * as articleSearch from './2026-11-29-018-article-search.ts';
import * as titleSearch from './2026-11-29-019-title-search.ts';
import * as snapshotHistory from './2026-11-29-020-snapshot-history.ts';
import * as asOfHistory from './2026-11-30-021-as-of-history.ts';
import * as mcpSessions from './2026-11-30-022-mcp-sessions.ts';
import * as shownOnce from './2026-11-30-023-shown-once.ts';
import * as activityCounts from './2026-12-01-024-activity-counts.ts';
import * as activityByArticle from './2026-12-01-025-activity-by-article.ts';
import * as staffLooks from './2026-12-01-026-staff-looks.ts';
import * as searchSerial from './2026-12-01-027-search-serial.ts';

/*
 * Every migration, imported statically so that they run the same under Node's type stripping,
 * vitest and the CLI (no directory scanning, no dynamic import of `.ts` paths).
 * Add new files here, named `YYYY-MM-DD-NNN-what.ts`; kysely runs them in name order.
 */
const all: Record<string, Migration> = {
  '2026-11-21-001-event-store': eventStore,
  '2026-11-21-002-read-models': readModels,
  '2026-11-22-003-api-key-usage': apiKeyUsage,
  '2026-11-22-004-idempotency': idempotency,
  '2026-11-22-005-oauth-and-web-sessions': oauthAndWebSessions,
  '2026-11-22-006-list-counts': listCounts,
  '2026-11-22-007-article-snapshots': articleSnapshots,
  '2026-11-22-008-body-protected-links': bodyProtectedLinks,
  '2026-11-22-009-snapshots-without-body': snapshotsWithoutBody,
  '2026-11-22-010-lz4-bodies': lz4Bodies,
  '2026-11-23-011-credentials': credentials,
  '2026-11-23-012-featured-image-references': featuredImageReferences,
  '2026-11-23-013-activity-revision': activityRevision,
  '2026-11-23-014-staff': staff,
  '2026-11-24-015-webhooks': webhooks,
  '2026-11-26-016-request-ids-and-staff-searches': requestIdsAndStaffSearches,
  '2026-11-27-017-body-json': bodyJson,
  '2026-11-29-018-article-search': articleSearch,
  '2026-11-29-019-title-search': titleSearch,
  '2026-11-29-020-snapshot-history': snapshotHistory,
  '2026-11-30-021-as-of-history': asOfHistory,
  '2026-11-30-022-mcp-sessions': mcpSessions,
  '2026-11-30-023-shown-once': shownOnce,
  '2026-12-01-024-activity-counts': activityCounts,
  '2026-12-01-025-activity-by-article': activityByArticle,
  '2026-12-01-026-staff-looks': staffLooks,
  '2026-12-01-027-search-serial': searchSerial,
};

export const migrations: Readonly<Record<string, Migration>> = Object.freeze(
  Object.fromEntries(Object.entries(all).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
);

export const migrationProvider: MigrationProvider = {
  getMigrations: async (): Promise<Record<string, Migration>> => ({ ...migrations }),
};
