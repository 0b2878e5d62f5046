import { sql } from 'kysely';
import { STAFF_SEARCH_MAX } from '../domain/activity/events.ts';
import type { Actor } from '../domain/event.ts';
import type { Db } from '../infra/db/schema.ts';
import { offsetOf, type Page, type PageQuery } from './projector.ts';

/*
 * An account's timeline for support staff: its revisions (from the revisions read model) and its
 * activity records (from the activity read model) in one list, newest first. Not a read model of its
 * own: a query over two.
 */

export type TimelineEntry =
  | {
      kind: 'revision';
      at: Date;
      articleId: string;
      siteId: string;
      revision: number;
      origin: string;
      actor: Actor;
      reason: string | null;
      title: string;
      restoredFrom: number | null;
    }
  | {
      kind: 'activity';
      at: Date;
      id: string;
      source: string;
      actor: Actor;
      operation: string;
      siteId: string | null;
      articleId: string | null;
      status: number;
      requestId: string | null;
      clientRequestId: string | null;
    };

export type TimelineQuery = PageQuery & {
  /** Inclusive UTC dates. */
  from?: string | undefined;
  to?: string | undefined;
  /** Only revisions, or only activity records. */
  kind?: 'revision' | 'activity' | undefined;
  articleId?: string | undefined;
  /**
   * Whether the support staff's own looks (`staff_view` and `staff_search` records) are listed: they
   * are recorded on every staff page, so a staff member's browsing would otherwise bury the rest.
   */
  staffLooks?: boolean | undefined;
};

/** The operations of the records support staff's looks leave in an account's activity log. */
export const STAFF_LOOKS = ['staff_view', 'staff_search'] as const;

type Row = {
  kind: 'revision' | 'activity';
  at: Date;
  key: string;
  article_id: string | null;
  site_id: string | null;
  revision: number | null;
  origin: string | null;
  actor: Actor;
  reason: string | null;
  title: string | null;
  restored_from: number | null;
  source: string | null;
  operation: string | null;
  status: number | null;
  request_id: string | null;
  client_request_id: string | null;
};

/**
 * A page of an account's revisions and activity records, interleaved by time, newest first; with the
 * number of the staff's looks the other filters match, listed or not (`staffLooks`).
 */
export async function accountTimeline(
  db: Db,
  accountId: string,
  q: TimelineQuery,
): Promise<Page<TimelineEntry> & { staffLooks: number }> {
  const from = q.from ? sql`and t.at >= ${q.from}::date` : sql``;
  const to = q.to ? sql`and t.at < ${q.to}::date + 1` : sql``;
  const kind = q.kind ? sql`and t.kind = ${q.kind}` : sql``;
  const article = q.articleId ? sql`and t.article_id = ${q.articleId}` : sql``;
  const timeline = sql`
    select 'revision' as kind, r.created_at as at, r.article_id || ':' || r.revision as key,
           r.article_id, a.site_id, r.revision, r.origin, r.actor, r.reason, r.title, r.restored_from,
           null::text as source, null::text as operation, null::integer as status, null::text as request_id,
           null::text as client_request_id
      from revisions r join articles a on a.id = r.article_id
     where a.account_id = ${accountId}
    union all
    select 'activity', v.at, v.id, v.article_id, v.site_id, null, null, v.actor, null, null, null,
           v.source, v.operation, v.status, v.request_id, v.client_request_id
      from activity v
     where v.account_id = ${accountId}`;
  const look = sql`coalesce(t.operation in (${sql.join([...STAFF_LOOKS])}), false)`;
  const looks = q.staffLooks ? sql`` : sql`and not ${look}`;
  const matched = sql`from (${timeline}) t where true ${from} ${to} ${kind} ${article}`;
  const [rows, count] = await Promise.all([
    sql<Row>`select t.* ${matched} ${looks} order by t.at desc, t.key desc limit ${q.perPage} offset ${offsetOf(q)}`.execute(
      db,
    ),
    sql<{ n: number; looks: number }>`select count(*) filter (where true ${looks})::integer as n,
      count(*) filter (where ${look})::integer as looks ${matched}`.execute(db),
  ]);
  return {
    rows: rows.rows.map(entryOf),
    total: count.rows[0]?.n ?? 0,
    staffLooks: count.rows[0]?.looks ?? 0,
  };
}

function entryOf(row: Row): TimelineEntry {
  if (row.kind === 'revision') {
    return {
      kind: 'revision',
      at: row.at,
      articleId: row.article_id ?? '',
      siteId: row.site_id ?? '',
      revision: row.revision ?? 0,
      origin: row.origin ?? '',
      actor: row.actor,
      reason: row.reason,
      title: row.title ?? '',
      restoredFrom: row.restored_from,
    };
  }
  return {
    kind: 'activity',
    at: row.at,
    id: row.key,
    source: row.source ?? '',
    actor: row.actor,
    operation: row.operation ?? '',
    siteId: row.site_id,
    articleId: row.article_id,
    status: row.status ?? 0,
    requestId: row.request_id,
    clientRequestId: row.client_request_id,
  };
}

/** An account a support search found, and by what. */
export type FoundAccount = { id: string; name: string; email: string; matched: string };

/**
 * Accounts a support search finds: by email (part of it), a site's domain, an article id or a request
 * id (the service's: a client's own `client_request_id` is never searched).
 */
export async function findAccounts(db: Db, term: string): Promise<FoundAccount[]> {
  const like = `%${term.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const result = await sql<FoundAccount>`
    select a.id, a.name, a.email, m.matched from accounts a join (
      select id as account_id, 'email' as matched from accounts where lower(email) like ${like}
      union select account_id, 'site domain' from sites where lower(domain) like ${like}
      union select account_id, 'article id' from articles where id = ${term}
      union select account_id, 'request id' from activity where request_id = ${term}
    ) m on m.account_id = a.id
    order by a.email, m.matched
    limit ${STAFF_SEARCH_MAX}`.execute(db);
  return result.rows;
}
