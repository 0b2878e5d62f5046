import type { Selectable } from 'kysely';
import type { z } from 'zod';
import { extractProtectedLinks } from '../../domain/html/facts.ts';
import type {
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
} from '../../infra/db/schema.ts';
import type { ActivityRow } from '../../projections/activity.ts';
import type { ArticleDetailRow, ArticleRow } from '../../projections/articles.ts';
import type { BacklinkRow } from '../../projections/backlinks.ts';
import type { RevisionRow } from '../../projections/revisions.ts';
import type { Period, SiteStats } from '../../projections/site-stats.ts';
import type { SiteRow } from '../../projections/sites.ts';
import type { EditResult } from './commands/index.ts';
import type {
  ActivityRecord,
  Article,
  ArticleChange,
  ArticleListItem,
  Backlink,
  Revision,
  RevisionContent,
  Site,
  Stats,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookReplay,
} from './wire-schemas.ts';

/** Read-model rows to the CONTRACT's wire shapes: every use case answers with these. */

export type SiteOut = z.infer<typeof Site>;
export type ArticleListItemOut = z.infer<typeof ArticleListItem>;
export type ArticleOut = z.infer<typeof Article>;
export type BacklinkOut = z.infer<typeof Backlink>;
export type ActivityOut = z.infer<typeof ActivityRecord>;
export type StatsOut = z.infer<typeof Stats>;
export type RevisionOut = z.infer<typeof Revision>;
export type RevisionContentOut = z.infer<typeof RevisionContent>;
export type ArticleChangeOut = z.infer<typeof ArticleChange>;
export type WebhookEndpointOut = z.infer<typeof WebhookEndpoint>;
export type WebhookDeliveryOut = z.infer<typeof WebhookDelivery>;
export type WebhookReplayOut = z.infer<typeof WebhookReplay>;

/** RFC 3339 UTC without milliseconds, as CONTRACT writes them (`2026-11-02T09:30:00Z`). */
export function rfc3339(date: Date): string {
  // toISOString always ends in `.sssZ`.
  return `${date.toISOString().slice(0, -5)}Z`;
}

export function siteOut(row: SiteRow): SiteOut {
  return {
    id: row.id,
    name: row.name,
    domain: row.domain,
    url: row.url,
    created_at: rfc3339(row.created_at),
  };
}

export function articleListItemOut(row: ArticleRow): ArticleListItemOut {
  return {
    id: row.id,
    site_id: row.site_id,
    title: row.title,
    url: row.url,
    status: row.status,
    published_at: row.published_at ? rfc3339(row.published_at) : null,
    target_keyword: row.target_keyword,
    word_count: row.word_count,
    featured_image: row.featured_image,
    revision: row.revision,
    updated_at: rfc3339(row.updated_at),
  };
}

export function articleOut(row: ArticleDetailRow): ArticleOut {
  return {
    ...articleListItemOut(row),
    body: row.body,
    protected_links: row.protected_links ?? extractProtectedLinks(row.body),
  };
}

export function backlinkOut(row: BacklinkRow): BacklinkOut {
  return {
    id: row.id,
    site_id: row.site_id,
    acquired_on: row.acquired_on,
    source_domain: row.source_domain,
    source_url: row.source_url,
    target_url: row.target_url,
    anchor_text: row.anchor_text,
    anchor_type: row.anchor_type,
    category: row.category,
  };
}

export function activityOut(row: ActivityRow): ActivityOut {
  return {
    id: row.id,
    at: rfc3339(row.at),
    source: row.source,
    actor: row.actor,
    operation: row.operation,
    site_id: row.site_id,
    article_id: row.article_id,
    revision: row.revision,
    status: row.status,
    request_id: row.request_id,
    client_request_id: row.client_request_id,
    duration_ms: row.duration_ms,
  };
}

export function statsOut(siteId: string, period: Period, s: SiteStats): StatsOut {
  return {
    site_id: siteId,
    period: { key: period.key, from: period.from, to: period.to },
    articles: { published: s.articles_published },
    backlinks: {
      total: s.backlinks_industry + s.backlinks_local,
      industry: s.backlinks_industry,
      local: s.backlinks_local,
    },
  };
}

export function changeOut(result: EditResult): ArticleChangeOut {
  return { ...articleOut(result.article), changed: result.changed, sanitized: result.sanitized };
}

export function revisionOut(row: RevisionRow): RevisionOut {
  return {
    revision: row.revision,
    origin: row.origin,
    actor: row.actor,
    reason: row.reason,
    created_at: rfc3339(row.created_at),
    title: row.title,
    word_count: row.word_count,
    restored_from: row.restored_from,
  };
}

/** A webhook endpoint as the account sees it: never its secret (only the answer that creates it has that). */
export function webhookEndpointOut(
  row: Omit<Selectable<WebhookEndpointsTable>, 'secret'>,
): WebhookEndpointOut {
  return {
    id: row.id,
    url: row.url,
    events: row.events as WebhookEndpointOut['events'],
    description: row.description,
    enabled: row.enabled,
    disabled_reason: row.disabled_reason as WebhookEndpointOut['disabled_reason'],
    disabled_at: row.disabled_at ? rfc3339(row.disabled_at) : null,
    created_at: rfc3339(row.created_at),
    updated_at: rfc3339(row.updated_at),
  };
}

/** A delivery with its latest attempts (newest first), as the deliveries list shows it. */
export function webhookDeliveryOut(
  row: Omit<Selectable<WebhookDeliveriesTable>, 'payload' | 'seq' | 'claimed_until'>,
  attempts: readonly Selectable<WebhookAttemptsTable>[],
): WebhookDeliveryOut {
  const at = (date: Date | null): string | null => (date ? rfc3339(date) : null);
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type as WebhookDeliveryOut['event_type'],
    source: row.source,
    status: row.status,
    attempts: row.attempts,
    next_attempt_at: rfc3339(row.next_attempt_at),
    last_attempt_at: at(row.last_attempt_at),
    last_status_code: row.last_status_code,
    last_duration_ms: row.last_duration_ms,
    last_error: row.last_error,
    delivered_at: at(row.delivered_at),
    created_at: rfc3339(row.created_at),
    attempt_log: attempts.map((a) => ({
      attempt: a.attempt,
      at: rfc3339(a.at),
      status_code: a.status_code,
      duration_ms: a.duration_ms,
      error: a.error,
    })),
  };
}
