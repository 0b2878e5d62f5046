import type { Selectable } from 'kysely';
import { z } from 'zod';
import { ActivitySource } from '../../domain/activity/events.ts';
import { ArticleStatus } from '../../domain/article/events.ts';
import { AnchorType, BacklinkCategory } from '../../domain/backlink/events.ts';
import { Origin } from '../../domain/event.ts';
import { extractProtectedLinks } from '../../domain/html/facts.ts';
import { SanitizedItem as SanitizedItemShape } from '../../domain/html/sanitized-item.ts';
import { ProtectedKind } from '../../domain/html/tree.ts';
import { ID_MAX_LENGTH } from '../../domain/input.ts';
import { WEBHOOK_EVENT_TYPES } from '../../domain/vocabulary.ts';
import type {
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
} from '../../infra/db/schema.ts';
import type { ActivityRow } from '../../projections/activity.ts';
import type { ArticleDetailRow, ArticleJsonRow, ArticleRow } from '../../projections/articles.ts';
import type { BacklinkRow } from '../../projections/backlinks.ts';
import type { RevisionRow } from '../../projections/revisions.ts';
import type { Period, SiteStats } from '../../projections/site-stats.ts';
import type { SiteRow } from '../../projections/sites.ts';
import type { EditResult } from './commands/index.ts';

/*
 * The wire objects of CONTRACT.md: each as a zod schema (what the API's routes declare as their
 * responses, the MCP tools as their outputs, and the OpenAPI document is generated from), its type, and
 * the one mapper from its read-model row (or replayed state) that every use case answers with.
 */

const id = z.string().min(1).max(ID_MAX_LENGTH);
const timestamp = z.iso.datetime().meta({ example: '2026-11-02T09:30:00Z' });
const calendarDate = z.iso.date().meta({ example: '2026-11-02' });

/** A webhook event type (CONTRACT "Webhooks"). */
export const WebhookEventType = z.enum(WEBHOOK_EVENT_TYPES).meta({ id: 'WebhookEventType' });

export const Site = z
  .object({
    id,
    name: z.string(),
    domain: z.string(),
    url: z.url(),
    created_at: timestamp,
  })
  .meta({
    id: 'Site',
    description: 'A website on the account.',
    example: {
      id: 'site_06h014k26k323kar2chmr6p5jr',
      name: 'Northside Plumbing',
      domain: 'northside-plumbing.example',
      url: 'https://northside-plumbing.example/',
      created_at: '2026-10-01T08:00:00Z',
    },
  });

const FeaturedImage = z
  .object({
    url: z.url(),
    alt: z.string(),
    width: z.number().int().nullable(),
    height: z.number().int().nullable(),
  })
  .meta({
    id: 'FeaturedImage',
    description: 'The image shown with the article; width and height in pixels when known.',
  });

export const ArticleListItem = z
  .object({
    id,
    site_id: id,
    title: z.string(),
    url: z.url(),
    status: ArticleStatus,
    published_at: timestamp
      .nullable()
      .meta({ description: 'When it was (or is to be) published; null for drafts.' }),
    target_keyword: z.string().nullable(),
    word_count: z.number().int().min(0).meta({ description: 'Words in the text of the body.' }),
    featured_image: FeaturedImage.nullable(),
    revision: z
      .number()
      .int()
      .min(1)
      .meta({ description: 'The current revision; GET article sends it as the weak ETag `W/"<revision>"`.' }),
    updated_at: timestamp,
  })
  .meta({
    id: 'ArticleListItem',
    description: 'An article as lists show it (without its body).',
    example: {
      id: 'art_06h014k2g711vw3tv0g528qpw8',
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      title: 'How to choose a boiler',
      url: 'https://northside-plumbing.example/blog/how-to-choose-a-boiler',
      status: 'published',
      published_at: '2026-11-02T09:30:00Z',
      target_keyword: 'boiler',
      word_count: 812,
      featured_image: { url: 'https://images.example/boiler.jpg', alt: 'A boiler', width: 1200, height: 630 },
      revision: 3,
      updated_at: '2026-11-05T14:00:00Z',
    },
  });

const ProtectedLink = z
  .object({
    id: z.string(),
    kind: ProtectedKind,
    href: z.string(),
    text: z.string(),
  })
  .meta({
    id: 'ProtectedLink',
    description:
      'A block of the body marked `data-service-protected`: an inserted backlink anchor or internal link that an edit must keep.',
  });

export const Article = ArticleListItem.extend({
  body: z
    .string()
    .meta({ description: 'The full HTML body. Protected blocks carry `data-service-protected`.' }),
  protected_links: z.array(ProtectedLink),
}).meta({
  id: 'Article',
  description: 'An article with its full HTML body and the protected links read from it.',
  example: {
    id: 'art_06h014k2g711vw3tv0g528qpw8',
    site_id: 'site_06h014k26k323kar2chmr6p5jr',
    title: 'How to choose a boiler',
    url: 'https://northside-plumbing.example/blog/how-to-choose-a-boiler',
    status: 'published',
    published_at: '2026-11-02T09:30:00Z',
    target_keyword: 'boiler',
    word_count: 9,
    featured_image: null,
    revision: 3,
    updated_at: '2026-11-05T14:00:00Z',
    body: '<p>Read our <a href="https://northside-plumbing.example/services" data-service-protected="internal" data-service-id="il_1">boiler services</a> first.</p>',
    protected_links: [
      {
        id: 'il_1',
        kind: 'internal',
        href: 'https://northside-plumbing.example/services',
        text: 'boiler services',
      },
    ],
  },
});

export const Backlink = z
  .object({
    id,
    site_id: id,
    acquired_on: calendarDate,
    source_domain: z.string(),
    source_url: z.string(),
    target_url: z.string(),
    anchor_text: z.string(),
    anchor_type: AnchorType,
    category: BacklinkCategory,
  })
  .meta({
    id: 'Backlink',
    description: 'A link from another website to one of the account’s sites.',
    example: {
      id: 'bl_06h014k41f2z7xq29rrdb0mhtc',
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      acquired_on: '2026-11-03',
      source_domain: 'citylocalnews.example',
      source_url: 'https://citylocalnews.example/business/directory',
      target_url: 'https://northside-plumbing.example/',
      anchor_text: 'Northside Plumbing',
      anchor_type: 'branded',
      category: 'local',
    },
  });

export const Stats = z
  .object({
    site_id: id,
    period: z
      .object({ key: z.string(), from: calendarDate, to: calendarDate })
      .meta({ description: 'The period asked for, as inclusive UTC dates.' }),
    articles: z.object({ published: z.number().int().min(0) }),
    backlinks: z.object({
      total: z.number().int().min(0),
      industry: z.number().int().min(0),
      local: z.number().int().min(0),
    }),
  })
  .meta({
    id: 'Stats',
    description: 'Articles published and backlinks acquired in a period.',
    example: {
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      period: { key: '2026-10', from: '2026-10-01', to: '2026-10-31' },
      articles: { published: 12 },
      backlinks: { total: 30, industry: 18, local: 12 },
    },
  });

/** Who made a change or a call; `type` is an open string on the wire, so a new kind of actor breaks no client. */
const WireActor = z.object({ type: z.string(), id: z.string(), name: z.string() });

export const ActivityRecord = z
  .object({
    id,
    at: timestamp,
    source: ActivitySource,
    actor: WireActor,
    operation: z.string().meta({
      description:
        'What was done: the MCP tool names (`list_sites`, `get_article`, ...); `staff_view` and `staff_search` (source `system`) when support staff opened the account or listed it in a search.',
    }),
    site_id: z.string().nullable(),
    article_id: z.string().nullable(),
    revision: z.number().int().min(1).nullable().meta({
      description:
        'The article revision the call created (open it at /articles/{article_id}/revisions/{revision}); null when it created none.',
    }),
    status: z.number().int().meta({ description: 'The HTTP status answered (499 when the client hung up).' }),
    request_id: z.string().nullable().meta({
      description:
        'The id the service gave the request (`req_...`, its `X-Request-Id` response header): quote it to support.',
    }),
    client_request_id: z.string().nullable().meta({
      description:
        'The `X-Request-Id` the client sent with the request, if a valid one: kept for correlation, never the request id.',
    }),
    duration_ms: z.number().int().min(0),
  })
  .meta({
    id: 'ActivityRecord',
    description:
      'One call through the API or MCP (refused ones included), or a change the content pipeline made.',
    example: {
      id: 'act_06h017my4x3zamww4jk51y2p4c',
      at: '2026-11-05T14:00:00Z',
      source: 'api',
      actor: { type: 'api_key', id: 'key_06h0...', name: 'Reporting key' },
      operation: 'list_articles',
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      article_id: null,
      revision: null,
      status: 200,
      request_id: 'req_06h017my4x3zamww4jk51y2p4c',
      client_request_id: 'checkout-7f3a',
      duration_ms: 14,
    },
  });

/** The domain's sanitised item; its `reason` is documented as an open string, so a new reason breaks no client. */
const SanitizedItem = SanitizedItemShape.extend({
  path: SanitizedItemShape.shape.path.meta({ example: 'p[2] > a[1]' }),
  removed: SanitizedItemShape.shape.removed.meta({ example: 'onclick="track()"' }),
  reason: z.string().meta({ example: 'event_handler' }),
}).meta({
  id: 'SanitizedItem',
  description:
    'Something the sanitiser removed from the submitted body. `path` names the elements from the body down ' +
    '(`p[2] > a[1]`); one of more than 8 steps keeps its first 3 and last 4, with `…N…` for the N between.',
});

export const ArticleChange = Article.extend({
  changed: z.boolean().meta({ description: 'false when the edit changed nothing: no revision was created.' }),
  sanitized: z.array(SanitizedItem).meta({
    description:
      'What the sanitiser removed: at most 100 items, then one with reason `more_removed` whose `removed` ' +
      'says how many more (`"250 more"`) and whose `path` is where the first of them was.',
  }),
}).meta({ id: 'ArticleChange' });

export const Revision = z
  .object({
    revision: z.number().int().min(1),
    origin: Origin,
    actor: WireActor,
    reason: z.string().nullable(),
    created_at: z.iso.datetime(),
    title: z.string(),
    word_count: z.number().int().min(0),
    restored_from: z.number().int().min(1).nullable(),
  })
  .meta({
    id: 'Revision',
    example: {
      revision: 3,
      origin: 'api',
      actor: { type: 'api_key', id: 'key_06h0...', name: 'Reporting key' },
      reason: 'Refreshed for the new year',
      created_at: '2026-11-05T14:00:00Z',
      title: 'How to choose a boiler in 2026',
      word_count: 812,
      restored_from: null,
    },
  });

export const RevisionContent = Revision.extend({
  body: z.string(),
  featured_image: FeaturedImage.nullable(),
  status: ArticleStatus,
  published_at: z.iso.datetime().nullable(),
}).meta({
  id: 'RevisionContent',
  description: 'The article as it was at this revision, obtained by replaying its history.',
});

/** Why an endpoint was disabled: it answered 410, it failed for 3 days, or the account turned it off. */
export const WebhookDisabledReason = z.enum(['gone', 'failing', 'account']).meta({
  description:
    '`gone`: the endpoint answered 410 Gone; `failing`: every delivery failed for 3 days; `account`: turned off by the account.',
});

export const WebhookEndpoint = z
  .object({
    id,
    url: z.string().meta({
      description: 'Where deliveries are POSTed: https (http only inside OUTBOUND_ALLOW_NETWORKS).',
    }),
    events: z.array(WebhookEventType).min(1).meta({ description: 'The event types sent to it.' }),
    description: z.string().nullable(),
    enabled: z
      .boolean()
      .meta({ description: 'false: nothing is sent; deliveries wait until it is enabled again.' }),
    disabled_reason: WebhookDisabledReason.nullable(),
    disabled_at: timestamp.nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({
    id: 'WebhookEndpoint',
    description: 'An address the account’s events are sent to.',
    example: {
      id: 'whe_06h01a8m0qhs7q1n0x1d4c3b2a',
      url: 'https://hooks.northside-plumbing.example/content',
      events: ['article.published', 'report.ready'],
      description: 'Publishing notices for the team chat',
      enabled: true,
      disabled_reason: null,
      disabled_at: null,
      created_at: '2026-11-05T14:00:00Z',
      updated_at: '2026-11-05T14:00:00Z',
    },
  });

export const NewWebhookEndpoint = WebhookEndpoint.extend({
  secret: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/)
    .meta({
      description:
        'The signing secret (Standard Webhooks: `whsec_` and base64). Shown in this answer only: keep it to verify `webhook-signature`.',
    }),
}).meta({
  id: 'NewWebhookEndpoint',
  description: 'A new endpoint with its signing secret, which is shown this once.',
  example: {
    id: 'whe_06h01a8m0qhs7q1n0x1d4c3b2a',
    url: 'https://hooks.northside-plumbing.example/content',
    events: ['article.published', 'report.ready'],
    description: 'Publishing notices for the team chat',
    enabled: true,
    disabled_reason: null,
    disabled_at: null,
    created_at: '2026-11-05T14:00:00Z',
    updated_at: '2026-11-05T14:00:00Z',
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  },
});

const WebhookAttempt = z
  .object({
    attempt: z.number().int().min(1),
    at: timestamp,
    status_code: z
      .number()
      .int()
      .nullable()
      .meta({ description: 'The HTTP status answered; null when none came (timeout, refused).' }),
    duration_ms: z.number().int().min(0),
    error: z.string().nullable(),
  })
  .meta({ id: 'WebhookAttempt', description: 'One attempt to send a delivery.' });

export const WebhookDelivery = z
  .object({
    id,
    event_id: z
      .string()
      .meta({ description: 'The message id: the `webhook-id` header and the body’s `id`.' }),
    event_type: WebhookEventType,
    source: z.enum(['live', 'replay', 'redelivery']).meta({
      description:
        '`live`: made when the event happened; `replay`: by a replay; `redelivery`: by a redeliver request.',
    }),
    status: z.enum(['pending', 'succeeded', 'failed']).meta({
      description: '`pending`: to be sent or retried; `failed`: every retry of the schedule failed.',
    }),
    attempts: z.number().int().min(0),
    next_attempt_at: timestamp.meta({ description: 'When it is (or was) to be sent next.' }),
    last_attempt_at: timestamp.nullable(),
    last_status_code: z.number().int().nullable(),
    last_duration_ms: z.number().int().min(0).nullable(),
    last_error: z.string().nullable(),
    delivered_at: timestamp.nullable(),
    created_at: timestamp,
    attempt_log: z.array(WebhookAttempt).meta({ description: 'The latest 10 attempts, newest first.' }),
  })
  .meta({
    id: 'WebhookDelivery',
    description: 'One message to an endpoint, and how sending it went.',
    example: {
      id: 'dlv_06h01b2c3d4e5f6g7h8j9k0m1n',
      event_id: '019a5c3e-8f10-7d2e-9b1a-3c4d5e6f7a8b',
      event_type: 'article.published',
      source: 'live',
      status: 'succeeded',
      attempts: 2,
      next_attempt_at: '2026-11-05T14:00:05Z',
      last_attempt_at: '2026-11-05T14:00:05Z',
      last_status_code: 200,
      last_duration_ms: 84,
      last_error: null,
      delivered_at: '2026-11-05T14:00:05Z',
      created_at: '2026-11-05T14:00:00Z',
      attempt_log: [
        { attempt: 2, at: '2026-11-05T14:00:05Z', status_code: 200, duration_ms: 84, error: null },
        { attempt: 1, at: '2026-11-05T14:00:00Z', status_code: 503, duration_ms: 120, error: 'HTTP 503' },
      ],
    },
  });

export const WebhookReplay = z
  .object({
    replay_id: id,
    queued: z.number().int().min(0).meta({ description: 'How many deliveries the replay queued.' }),
  })
  .meta({
    id: 'WebhookReplay',
    description: 'A replay: the events queued again, after the endpoint’s pending deliveries.',
    example: { replay_id: 'rpl_06h01b2c3d4e5f6g7h8j9k0m1n', queued: 42 },
  });

/* Read-model rows and replayed states to the wire shapes above: every use case answers with these. */

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

/** The JSON text of a wire object of type `T`, as `JSON.stringify` writes it. */
export type JsonOf<T> = string & { readonly __jsonOf?: T };

/**
 * `JSON.stringify(articleOut(row))` of the article read with its body as JSON text (`body_json`,
 * escaped by PostgreSQL when the body was stored): the same text, with that body written as it is
 * rather than escaped again.
 */
export function articleJson(row: ArticleJsonRow): JsonOf<ArticleOut> {
  const links = row.protected_links ?? extractProtectedLinks(JSON.parse(row.body_json) as string);
  return articleText(articleListItemOut(row), row.body_json, links, '');
}

/**
 * An article's JSON as `JSON.stringify` writes it (its list fields, body, protected links, then
 * `more`, the members after them, each led by a comma), with the body's JSON text given.
 */
function articleText(
  listed: ArticleListItemOut,
  bodyJson: string,
  links: ArticleOut['protected_links'],
  more: string,
): string {
  return `${JSON.stringify(listed).slice(0, -1)},"body":${bodyJson},"protected_links":${JSON.stringify(links)}${more}}`;
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

/**
 * `JSON.stringify(change)`, with the body's JSON text from `bodyJson` (remembered by the caller for a
 * body it writes again and again: infra/json-texts.ts) rather than escaped here.
 */
export function changeJson(
  change: ArticleChangeOut,
  bodyJson: (body: string) => string,
): JsonOf<ArticleChangeOut> {
  const { body, protected_links, changed, sanitized, ...listed } = change;
  return articleText(
    listed,
    bodyJson(body),
    protected_links,
    `,"changed":${changed},"sanitized":${JSON.stringify(sanitized)}`,
  );
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
