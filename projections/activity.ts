import { type Insertable, type Selectable, sql } from 'kysely';
import type { ActivitySource, CallRecorded, CallsRecorded, RecordedCall } from '../domain/activity/events.ts';
import { type ArticleEvent, articleEventTypes } from '../domain/article/events.ts';
import type { ActivityTable } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { newIdPattern } from '../infra/ids.ts';
import { IN_TRANSACTION, type Pending, type Statement, type Trx } from '../infra/projection.ts';
import { inlineProjector, offsetOf, type Page, type PageQuery } from './projector.ts';

const operationOf = {
  ArticleCreated: 'create_article',
  ArticleEdited: 'update_article',
  FeaturedImageReplaced: 'replace_featured_image',
  ArticleRestored: 'restore_revision',
  ArticleStatusChanged: 'change_article_status',
} as const satisfies Record<ArticleEvent['type'], string>;

/**
 * The activity log: every call through a face of the service (`CallsRecorded`, a batch of one
 * account's calls; `CallRecorded`, one call, in the log's earlier events), and the changes the
 * service's own pipeline makes (article events with origin `rewrite`), which arrive through no call.
 *
 * Inline: a batch of calls' records and their rows are written by one transaction, and a pipeline
 * change's row by the change's own (an async projection would read every record back from the log
 * in a second transaction, which costs a call as much again; `retireCheckpoint` applies what an
 * async runner of an older version left unapplied when a database moves over). Its rows are keyed by the event
 * (`activityId`, `act_<event id>`) and inserted with `on conflict do nothing`: applying an event
 * twice changes nothing.
 */
export const activityProjector = inlineProjector({
  name: 'activity@1',
  mode: 'inline',
  handles: ['CallRecorded', 'CallsRecorded', ...articleEventTypes],
  tables: ['activity', 'activity_counts'],
  /**
   * An article change through a face leaves no row (its call's record does), so changes of one
   * article or of several (a commit group's) give no statement. A pipeline change reads its article's
   * owner, and calls' records come in batches: both in a transaction, with one lookup of the articles
   * and one insert per 1,000 rows.
   */
  project(events, at) {
    if (at.trx !== undefined) return insertRowsOf(events, at.trx);
    return events.every((event) => !isCalls(event) && !isPipelineChange(event)) ? [] : IN_TRANSACTION;
  },
});

async function insertRowsOf(
  events: readonly Pending<ActivityEvent>[],
  trx: Trx,
): Promise<readonly Statement[]> {
  await insertRows(trx, await rowsOf(events, trx));
  return [];
}

type ActivityEvent = CallRecorded | CallsRecorded | ArticleEvent;

function isCalls(event: ActivityEvent): event is CallRecorded | CallsRecorded {
  return event.type === 'CallRecorded' || event.type === 'CallsRecorded';
}

const INSERT_ROWS = 1000;

/** A request id the service made (`newId('req')`). */
const SERVICE_REQUEST_ID = newIdPattern('req');

/**
 * Whether a call's record names the client's own id as its request id. A record without
 * `clientRequestId` was made when a client's valid `X-Request-Id` became the request id: a value there
 * that the service could not have made is the client's, and is kept as such (search by request id
 * never finds it).
 */
function clientIdAsRequestId(d: Pick<RecordedCall, 'requestId' | 'clientRequestId'>): boolean {
  return d.clientRequestId === undefined && d.requestId !== null && !SERVICE_REQUEST_ID.test(d.requestId);
}

/** A call's activity row: a call of a batch, or of an earlier event of its own (its time the event's). */
function callRow(accountId: string, c: RecordedCall): ActivityInsert {
  const clientsOwn = clientIdAsRequestId(c);
  return {
    id: c.activityId,
    account_id: accountId,
    at: c.at,
    source: c.source,
    actor: c.actor,
    operation: c.operation,
    site_id: c.siteId,
    article_id: c.articleId,
    revision: c.revision ?? null,
    status: c.status,
    request_id: clientsOwn ? null : c.requestId,
    client_request_id: clientsOwn ? c.requestId : (c.clientRequestId ?? null),
    duration_ms: c.durationMs,
  };
}

/** An article change the service's own pipeline made (origin `rewrite`): it arrives through no call. */
function isPipelineChange<E extends ActivityEvent>(event: E): event is E & ArticleEvent {
  return !isCalls(event) && event.data.origin === 'rewrite';
}

/** The activity rows of events, in order: calls as recorded, pipeline changes (`rewrite`) with their article's owner. */
async function rowsOf(events: readonly Pending<ActivityEvent>[], trx: Trx): Promise<ActivityInsert[]> {
  // The owner of an article never changes, so reading it from the (inline, current) article rows is
  // as good as reading it at the event's time, and a rebuild comes out the same.
  const articleIds = [
    ...new Set(
      events
        .filter(isPipelineChange)
        .filter((e) => e.type !== 'ArticleCreated')
        .map((e) => e.data.articleId),
    ),
  ];
  const owners = new Map<string, { account_id: string; site_id: string }>();
  if (articleIds.length > 0) {
    const found = await trx
      .selectFrom('articles')
      .select(['id', 'account_id', 'site_id'])
      .where('id', 'in', articleIds)
      .execute();
    for (const row of found) owners.set(row.id, row);
  }
  const rows: ActivityInsert[] = [];
  for (const event of events) {
    if (event.type === 'CallsRecorded') {
      for (const call of event.data.calls) rows.push(callRow(event.data.accountId, call));
      continue;
    }
    if (event.type === 'CallRecorded') {
      rows.push(callRow(event.data.accountId, { ...event.data, at: event.metadata.at }));
      continue;
    }
    if (!isPipelineChange(event)) continue;
    const d = event.data;
    const owner = event.type === 'ArticleCreated' ? undefined : owners.get(d.articleId);
    const accountId = event.type === 'ArticleCreated' ? event.data.accountId : owner?.account_id;
    if (!accountId) continue;
    rows.push({
      id: `act_${event.eventId}`,
      account_id: accountId,
      at: event.metadata.at,
      source: 'rewrite',
      actor: d.actor,
      operation: operationOf[event.type],
      site_id: event.type === 'ArticleCreated' ? event.data.siteId : (owner?.site_id ?? null),
      article_id: d.articleId,
      revision: event.version,
      status: 200,
      request_id: event.metadata.requestId ?? null,
      client_request_id: null,
      duration_ms: 0,
    });
  }
  return rows;
}

/** An activity row as it is inserted: `at` as the event's timestamp text, `actor` as its JSON value. */
type ActivityInsert = Omit<Insertable<ActivityTable>, 'actor' | 'at'> & { at: string; actor: unknown };

/**
 * The rows as one JSON parameter (`jsonb_to_recordset`): one statement text for any number of rows,
 * prepared once, and nothing for the query builder to build per row. The rows it inserts (not those
 * already there) are added to `activity_counts` by the table's trigger (migration 024), whoever inserts
 * them: a process of the release before, during a rolling upgrade, too.
 */
async function insertRows(trx: Trx, rows: readonly ActivityInsert[]): Promise<void> {
  for (let i = 0; i < rows.length; i += INSERT_ROWS) {
    await sql`
      insert into activity (id, account_id, at, source, actor, operation, site_id, article_id, revision, status, request_id, client_request_id, duration_ms)
      select * from jsonb_to_recordset(${JSON.stringify(rows.slice(i, i + INSERT_ROWS))}::jsonb) as r (
        id text, account_id text, at timestamptz, source text, actor jsonb, operation text, site_id text,
        article_id text, revision integer, status integer, request_id text, client_request_id text, duration_ms integer)
      on conflict (id) do nothing`.execute(trx);
  }
}

/** A record of the activity log as its list reads it: its row without the account. */
export type ActivityRow = Omit<Selectable<ActivityTable>, 'account_id'>;
export type ActivityQuery = PageQuery & {
  from?: string | undefined;
  to?: string | undefined;
  source?: ActivitySource | undefined;
  siteId?: string | undefined;
  articleId?: string | undefined;
};

/** The account's activity records that a list's filters keep. */
function activityOf(db: Db, accountId: string, q: ActivityQuery) {
  let base = db.selectFrom('activity').where('account_id', '=', accountId);
  if (q.source) base = base.where('source', '=', q.source);
  if (q.siteId) base = base.where('site_id', '=', q.siteId);
  if (q.articleId) base = base.where('article_id', '=', q.articleId);
  if (q.from) base = base.where('at', '>=', new Date(`${q.from}T00:00:00Z`));
  if (q.to) base = base.where('at', '<', new Date(new Date(`${q.to}T00:00:00Z`).getTime() + 86_400_000));
  return base;
}

/** The statement of a page of `listActivity` (the benchmark's floor runs it too). */
export function activityPage(db: Db, accountId: string, q: ActivityQuery) {
  return activityOf(db, accountId, q)
    .select([
      'id',
      'at',
      'source',
      'actor',
      'operation',
      'site_id',
      'article_id',
      'revision',
      'status',
      'request_id',
      'client_request_id',
      'duration_ms',
    ])
    .orderBy('at', 'desc')
    .orderBy('id', 'desc')
    .limit(q.perPage)
    .offset(offsetOf(q));
}

/**
 * How many of the account's records a list's filters keep: a sum over `activity_counts` (days,
 * sources, sites), whatever the log's length; with an article, that article's records counted (from
 * its own index, `activity_article`).
 */
export function activityTotal(db: Db, accountId: string, q: ActivityQuery) {
  if (q.articleId) return activityOf(db, accountId, q).select((eb) => eb.fn.countAll<string>().as('n'));
  let counts = db
    .selectFrom('activity_counts')
    .select((eb) => eb.fn.coalesce(eb.fn.sum<string>('n'), sql<string>`0`).as('n'))
    .where('account_id', '=', accountId);
  if (q.source) counts = counts.where('source', '=', q.source);
  if (q.siteId) counts = counts.where('site_id', '=', q.siteId);
  if (q.from) counts = counts.where('day', '>=', q.from);
  if (q.to) counts = counts.where('day', '<=', q.to);
  return counts;
}

/** The account's activity, newest first, ties by id, and how many records the filters keep. */
export async function listActivity(db: Db, accountId: string, q: ActivityQuery): Promise<Page<ActivityRow>> {
  const [rows, count] = await Promise.all([
    activityPage(db, accountId, q).execute(),
    activityTotal(db, accountId, q).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

/** What a page of activity names, by id: the sites' names and the articles' titles. */
export type ActivitySubjects = { sites: Map<string, string>; articles: Map<string, string> };

/**
 * The names of the account's sites and the titles of its articles among the ids given, for showing a
 * page of activity; another account's ids and unknown ones are left out.
 */
export async function activitySubjects(
  db: Db,
  accountId: string,
  ids: { siteIds: readonly string[]; articleIds: readonly string[] },
): Promise<ActivitySubjects> {
  const [sites, articles] = await Promise.all([
    ids.siteIds.length === 0
      ? []
      : db
          .selectFrom('sites')
          .select(['id', 'name'])
          .where('account_id', '=', accountId)
          .where('id', 'in', [...ids.siteIds])
          .execute(),
    ids.articleIds.length === 0
      ? []
      : db
          .selectFrom('articles')
          .select(['id', 'title'])
          .where('account_id', '=', accountId)
          .where('id', 'in', [...ids.articleIds])
          .execute(),
  ]);
  return {
    sites: new Map(sites.map((s) => [s.id, s.name])),
    articles: new Map(articles.map((a) => [a.id, a.title])),
  };
}
