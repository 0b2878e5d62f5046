import type { Kysely } from 'kysely';
import { type Article, type ArticleState, evolve, initialState } from '../../domain/article/decider.ts';
import type { ArticleEvent } from '../../domain/article/events.ts';
import type { BacklinkAcquired } from '../../domain/backlink/events.ts';
import type { Actor, Origin } from '../../domain/event.ts';
import type { MonthlyReportReady } from '../../domain/report/events.ts';
import type { WebhookEventType } from '../../domain/vocabulary.ts';
import type { Database } from '../../infra/db/schema.ts';
import type { Stored } from '../../infra/projection.ts';
import {
  type ArticleSourceRow,
  readArticleRows,
  readArticleStream,
  readWordCounts,
} from '../../infra/webhooks/sources.ts';
import type { SnapshotMemory } from '../../projections/article-snapshots.ts';
import { articleRowOf } from '../../projections/articles.ts';
import { ArticleListItem, type ArticleListItemOut, articleListItemOut } from './articles.ts';
import { rfc3339 } from './contract.ts';
import { Backlink, type BacklinkOut, backlinkOut, Stats, type StatsOut, statsOut } from './sites.ts';

/*
 * Webhook messages from the log (CONTRACT "Webhooks"): which event makes which message type, and the
 * message's body `{id, type, created_at, data}`. The id is the log's event id, so a message made twice
 * (a replay, a redelivery) carries the same `webhook-id` and a receiver can drop the copy. An article's
 * data is the article as it was at the event's revision, not as it is when the message is made.
 */

/** The event types that make webhook messages: every article event, a backlink, a monthly report. */
export const WEBHOOK_SOURCE_TYPES = [
  'ArticleCreated',
  'ArticleEdited',
  'FeaturedImageReplaced',
  'ArticleRestored',
  'ArticleStatusChanged',
  'BacklinkAcquired',
  'MonthlyReportReady',
] as const;
/** The type of an event that makes a webhook message. */
export type WebhookSourceType = (typeof WEBHOOK_SOURCE_TYPES)[number];

/** An event that makes a webhook message. */
export type WebhookSource = ArticleEvent | BacklinkAcquired | MonthlyReportReady;

// A new article event type is a compile error here until it is given a message type.
const _everyArticleEventMakesAMessage: Exclude<ArticleEvent['type'], WebhookSourceType> extends never
  ? true
  : false = true;
void _everyArticleEventMakesAMessage;

/** An article message's data: the article list item at the event's revision, with who made it and where. */
export type ArticleMessageData = ArticleListItemOut & { origin: Origin; actor: Actor };
/** A report message's data: the month's stats and where the report is read. */
export type ReportMessageData = StatsOut & { report_url: string };

/** The body of a webhook delivery. */
export type WebhookMessage = {
  /** The log's event id: also the `webhook-id` header, the same on every attempt and every copy. */
  id: string;
  type: WebhookEventType;
  /** When the event happened (RFC 3339, UTC). */
  created_at: string;
  data: ArticleMessageData | BacklinkOut | ReportMessageData;
};

/** The message type an event makes. A status change to `published` is `article.published`; any other revision is an update. */
export function webhookTypeOf(event: WebhookSource): WebhookEventType {
  switch (event.type) {
    case 'ArticleCreated':
      return 'article.created';
    case 'ArticleEdited':
    case 'ArticleRestored':
      return 'article.updated';
    case 'ArticleStatusChanged':
      return event.data.status === 'published' ? 'article.published' : 'article.updated';
    case 'FeaturedImageReplaced':
      return 'article.featured_image_replaced';
    case 'BacklinkAcquired':
      return 'backlink.acquired';
    case 'MonthlyReportReady':
      return 'report.ready';
    default: {
      const unknown: never = event;
      throw new Error(`no webhook message for ${JSON.stringify(unknown)}`);
    }
  }
}

/** The source types that can make a message of one of `types` (a replay reads only those from the log). */
export function sourceTypesOf(types: readonly string[]): WebhookSourceType[] {
  const wanted = new Set(types);
  const makes: Record<WebhookSourceType, readonly WebhookEventType[]> = {
    ArticleCreated: ['article.created'],
    ArticleEdited: ['article.updated'],
    ArticleRestored: ['article.updated'],
    ArticleStatusChanged: ['article.updated', 'article.published'],
    FeaturedImageReplaced: ['article.featured_image_replaced'],
    BacklinkAcquired: ['backlink.acquired'],
    MonthlyReportReady: ['report.ready'],
  };
  return WEBHOOK_SOURCE_TYPES.filter((source) => makes[source].some((type) => wanted.has(type)));
}

/** The account an event belongs to, when the event says (every one but an article's revisions after its creation). */
export function accountNamedBy(event: WebhookSource): string | undefined {
  switch (event.type) {
    case 'ArticleCreated':
    case 'BacklinkAcquired':
    case 'MonthlyReportReady':
      return event.data.accountId;
    default:
      return undefined;
  }
}

/** An article message's data: the list item at the event's revision plus the revision's origin and actor. */
export function articleMessageData(item: ArticleListItemOut, event: ArticleEvent): ArticleMessageData {
  return { ...item, origin: event.data.origin, actor: event.data.actor };
}

/** A backlink message's data: the backlink as the API shows it. */
export function backlinkMessageData(d: BacklinkAcquired['data']): BacklinkOut {
  return backlinkOut({
    id: d.backlinkId,
    site_id: d.siteId,
    account_id: d.accountId,
    acquired_on: d.acquiredOn,
    source_domain: d.sourceDomain,
    source_url: d.sourceUrl,
    target_url: d.targetUrl,
    anchor_text: d.anchorText,
    anchor_type: d.anchorType,
    category: d.category,
  });
}

/** A report message's data: the month's stats as the API shows them, and the report page's address. */
export function reportMessageData(d: MonthlyReportReady['data'], publicUrl: string): ReportMessageData {
  const stats = statsOut(
    d.siteId,
    { key: d.period, from: d.from, to: d.to, grain: 'month' },
    {
      articles_published: d.articlesPublished,
      backlinks_industry: d.backlinksIndustry,
      backlinks_local: d.backlinksLocal,
    },
  );
  const base = publicUrl.replace(/\/+$/, '');
  return {
    ...stats,
    report_url: `${base}/sites/${encodeURIComponent(d.siteId)}/report?period=${encodeURIComponent(d.period)}`,
  };
}

/** The message an event makes, given its data. */
export function messageOf(
  event: Pick<Stored<WebhookSource>, 'eventId' | 'metadata'> & WebhookSource,
  data: WebhookMessage['data'],
): WebhookMessage {
  return {
    id: event.eventId,
    type: webhookTypeOf(event),
    created_at: rfc3339(new Date(event.metadata.at)),
    data,
  };
}

/** The order of the fields of nested objects, as the API shows them. */
const NESTED_ORDER: Readonly<Record<string, readonly string[]>> = {
  featured_image: ['url', 'alt', 'width', 'height'],
  actor: ['type', 'id', 'name'],
  period: ['key', 'from', 'to'],
  articles: ['published'],
  backlinks: ['total', 'industry', 'local'],
};
const ARTICLE_ORDER = [...Object.keys(ArticleListItem.shape), 'origin', 'actor'];
const BACKLINK_ORDER = Object.keys(Backlink.shape);
const REPORT_ORDER = [...Object.keys(Stats.shape), 'report_url'];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The object with the keys of `order` first, in that order (nested objects likewise), then any others. */
function reorder(value: unknown, order: readonly string[]): unknown {
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of order) {
    if (!Object.hasOwn(value, key)) continue;
    const nested = NESTED_ORDER[key];
    out[key] = nested ? reorder(value[key], nested) : value[key];
  }
  for (const [key, inner] of Object.entries(value)) if (!Object.hasOwn(out, key)) out[key] = inner;
  return out;
}

/**
 * A message with its fields in the order the documentation and the API show them. The stored message
 * (jsonb) keeps its keys in the database's order; JSON does not care, people reading one do.
 */
export function inDocumentedOrder(message: WebhookMessage): WebhookMessage {
  const order = message.type.startsWith('article.')
    ? ARTICLE_ORDER
    : message.type === 'backlink.acquired'
      ? BACKLINK_ORDER
      : REPORT_ORDER;
  return {
    id: message.id,
    type: message.type,
    created_at: message.created_at,
    data: reorder(message.data, order) as WebhookMessage['data'],
  };
}

/** An event placed: its message type and its account. */
export type Located = { event: Stored<WebhookSource>; type: WebhookEventType; accountId: string };

type ArticleListItemSource = Parameters<typeof articleListItemOut>[0];

/** An article's list item at a folded state, with the word count its revision's row holds. */
function itemOf(state: Article, wordCount: number | undefined): ArticleListItemSource {
  if (wordCount === undefined)
    throw new Error(`article ${state.articleId} has no revision ${state.revision} in revisions`);
  return articleRowOf(state, wordCount);
}

function isArticleEvent(event: WebhookSource): event is ArticleEvent {
  return event.type !== 'BacklinkAcquired' && event.type !== 'MonthlyReportReady';
}

/**
 * Makes the messages of a batch of events, reading with `executor` (the batch's transaction: on the
 * embedded database, whose pool has one connection, nothing may be read beside it). In two steps, so
 * that only events some endpoint wants cost more than a read of their article rows:
 * `locate` gives each event its type and account; `messages` builds the bodies of the events asked for.
 * An article's item at an event's revision is its read-model row when the row is at that revision,
 * else the article's stream folded up to it, once per article for the whole batch, with the word
 * count of its row in `revisions`. With `folds` (the subscription's), a fold starts from the state an
 * earlier batch reached, so that following the log costs each event once, not each article's whole
 * stream per batch (states at a stream version never change; they are kept without their body).
 */
export function createMessageMaker(
  executor: Kysely<Database>,
  publicUrl: string,
  folds?: SnapshotMemory,
): {
  locate(events: readonly Stored<WebhookSource>[]): Promise<Located[]>;
  messages(located: readonly Located[]): Promise<Map<string, WebhookMessage>>;
} {
  const rows = new Map<string, ArticleSourceRow>();
  /** Folded article states by article id and revision. */
  const folded = new Map<string, Map<number, Article>>();

  const readRows = async (ids: readonly string[]): Promise<void> => {
    const missing = [...new Set(ids)].filter((id) => !rows.has(id));
    for (const row of await readArticleRows(executor, missing)) rows.set(row.id, row);
  };

  /** Folds each article's stream once, up to the highest revision asked for, keeping the states asked for. */
  const fold = async (wanted: ReadonlyMap<string, ReadonlySet<number>>): Promise<void> => {
    for (const [articleId, revisions] of wanted) {
      const known = folded.get(articleId) ?? new Map<number, Article>();
      folded.set(articleId, known);
      const todo = [...revisions].filter((r) => !known.has(r));
      if (todo.length === 0) continue;
      const upTo = Math.max(...todo);
      // Where an earlier batch's fold ended, when that is before every revision asked for. Kept
      // without its body, which the messages do not need (their word count comes from `revisions`).
      const earlier = folds?.recall(articleId);
      const start = earlier !== undefined && earlier.version < Math.min(...todo) ? earlier : undefined;
      const stream = await readArticleStream(executor, articleId, start?.version ?? 0, upTo);
      let state: ArticleState = start
        ? { ...(start.state as Omit<Article, 'body'>), body: '' }
        : initialState;
      let version = start?.version ?? 0;
      for (const event of stream) {
        state = evolve(state, event);
        version = event.version;
        if (state.exists && revisions.has(state.revision)) known.set(state.revision, state);
      }
      if (folds && state.exists && version > (start?.version ?? 0)) {
        const { body: _, ...withoutBody } = state;
        folds.remember(articleId, { version, state: withoutBody });
      }
    }
  };

  /** Word counts by `<article id>:<revision>`, from the revisions read model. */
  const wordCounts = (events: readonly ArticleEvent[]): Promise<Map<string, number>> =>
    readWordCounts(
      executor,
      events.map((e) => ({ articleId: e.data.articleId, revision: e.data.revision })),
    );

  const stateAt = (articleId: string, revision: number): Article => {
    const state = folded.get(articleId)?.get(revision);
    if (!state) throw new Error(`article ${articleId} has no revision ${revision} in the log`);
    return state;
  };

  const revisionsWanted = (events: readonly ArticleEvent[]): Map<string, Set<number>> => {
    const wanted = new Map<string, Set<number>>();
    for (const event of events) {
      const set = wanted.get(event.data.articleId) ?? new Set<number>();
      set.add(event.data.revision);
      wanted.set(event.data.articleId, set);
    }
    return wanted;
  };

  return {
    async locate(events) {
      const articleEvents = events.filter((e): e is Stored<ArticleEvent> => isArticleEvent(e));
      await readRows(articleEvents.map((e) => e.data.articleId));
      // An article without a read-model row (never, while articles@1 is inline): its stream says whose it is.
      const unknown = articleEvents.filter(
        (e) => accountNamedBy(e) === undefined && !rows.has(e.data.articleId),
      );
      if (unknown.length > 0) {
        await fold(revisionsWanted(articleEvents.filter((e) => !rows.has(e.data.articleId))));
      }
      return events.map((event) => {
        const accountId =
          accountNamedBy(event) ??
          (isArticleEvent(event)
            ? (rows.get(event.data.articleId)?.account_id ??
              stateAt(event.data.articleId, event.data.revision).accountId)
            : undefined);
        if (accountId === undefined) throw new Error(`no account for event ${event.eventId}`);
        return { event, type: webhookTypeOf(event), accountId };
      });
    },

    async messages(located) {
      const atRow = (event: ArticleEvent): ArticleSourceRow | undefined => {
        const row = rows.get(event.data.articleId);
        return row?.revision === event.data.revision ? row : undefined;
      };
      const articleEvents = located
        .map((l) => l.event)
        .filter((e): e is Stored<ArticleEvent> => isArticleEvent(e));
      const folded = articleEvents.filter((e) => atRow(e) === undefined);
      await fold(revisionsWanted(folded));
      const counts = await wordCounts(folded);
      const out = new Map<string, WebhookMessage>();
      for (const { event } of located) {
        if (isArticleEvent(event)) {
          const row = atRow(event);
          const item = articleListItemOut(
            row ??
              itemOf(
                stateAt(event.data.articleId, event.data.revision),
                counts.get(`${event.data.articleId}:${event.data.revision}`),
              ),
          );
          out.set(event.eventId, messageOf(event, articleMessageData(item, event)));
        } else if (event.type === 'BacklinkAcquired') {
          out.set(event.eventId, messageOf(event, backlinkMessageData(event.data)));
        } else {
          out.set(event.eventId, messageOf(event, reportMessageData(event.data, publicUrl)));
        }
      }
      return out;
    },
  };
}
