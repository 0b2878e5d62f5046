import { type RawBuilder, sql } from 'kysely';
import { STAFF_SEARCH_MAX } from '../domain/activity/events.ts';
import type { Actor } from '../domain/event.ts';
import type { Db } from '../infra/db/schema.ts';
import { activityTotal } from './activity.ts';
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

/** Where a timeline's filters start and end: instants of UTC midnights, the end exclusive. */
function spanOf(q: TimelineQuery): { from: Date | null; to: Date | null } {
  return {
    from: q.from ? new Date(`${q.from}T00:00:00Z`) : null,
    to: q.to ? new Date(Date.parse(`${q.to}T00:00:00Z`) + 86_400_000) : null,
  };
}

/**
 * A page of an account's revisions and activity records, interleaved by time, newest first; with the
 * number of the staff's looks the other filters match, listed or not (`staffLooks`).
 *
 * Each side gives its newest `offset + perPage` entries (the activity records from the account's
 * newest-first index, or the article's), and the page is cut from the two merged: a page reads what
 * comes before it, not the account's whole log. The total is the revisions counted (an account has few
 * next to its calls), the activity records summed from `activity_counts` by UTC day, less the staff's
 * looks when they are not listed, counted from their own index (`activity_staff_looks`): the activity
 * list's total (`activityTotal`), an article's records counted from its index (`activity_article`).
 */
export async function accountTimeline(
  db: Db,
  accountId: string,
  q: TimelineQuery,
): Promise<Page<TimelineEntry> & { staffLooks: number }> {
  const statements = timelineStatements(db, accountId, q);
  const [rows, revisions, records, looks] = await Promise.all([
    statements.page.execute(db),
    countOf(db, statements.revisions),
    statements.records ? statements.records.executeTakeFirstOrThrow().then((r) => Number(r.n)) : 0,
    countOf(db, statements.looks),
  ]);
  return {
    rows: rows.rows.map(entryOf),
    total: revisions + records - (q.staffLooks ? 0 : looks),
    staffLooks: looks,
  };
}

/**
 * The statements of a page of the timeline (accountTimeline): the page, and the counts of the
 * revisions, of the activity records (staff's looks included) and of the staff's looks its filters
 * keep (`null`: none, the kind filtered out).
 */
export function timelineStatements(
  db: Db,
  accountId: string,
  q: TimelineQuery,
): {
  page: RawBuilder<Row>;
  revisions: RawBuilder<{ n: number }> | null;
  records: ReturnType<typeof activityTotal> | null;
  looks: RawBuilder<{ n: number }> | null;
} {
  const { from, to } = spanOf(q);
  const revisionsToo = q.kind !== 'activity';
  const activityToo = q.kind !== 'revision';
  const upTo = offsetOf(q) + q.perPage;
  // As literals: a partial index's predicate is matched against the statement's own text, in any plan.
  const look = sql`v.operation in (${sql.join(STAFF_LOOKS.map((o) => sql.lit(o)))})`;
  const revisionsIn = sql`
      from revisions r join articles a on a.id = r.article_id
     where a.account_id = ${accountId}
       ${from ? sql`and r.created_at >= ${from}` : sql``} ${to ? sql`and r.created_at < ${to}` : sql``}
       ${q.articleId ? sql`and r.article_id = ${q.articleId}` : sql``}`;
  const activityIn = sql`
      from activity v
     where v.account_id = ${accountId}
       ${from ? sql`and v.at >= ${from}` : sql``} ${to ? sql`and v.at < ${to}` : sql``}
       ${q.articleId ? sql`and v.article_id = ${q.articleId}` : sql``}`;
  const sides = [
    ...(revisionsToo
      ? [
          sql`(select 'revision' as kind, r.created_at as at, r.article_id || ':' || r.revision as key,
           r.article_id, a.site_id, r.revision, r.origin, r.actor, r.reason, r.title, r.restored_from,
           null::text as source, null::text as operation, null::integer as status, null::text as request_id,
           null::text as client_request_id
          ${revisionsIn}
          order by r.created_at desc, r.article_id || ':' || r.revision desc limit ${upTo})`,
        ]
      : []),
    ...(activityToo
      ? [
          sql`(select 'activity' as kind, v.at, v.id as key, v.article_id, v.site_id, null::integer as revision,
           null::text as origin, v.actor, null::text as reason, null::text as title, null::integer as restored_from,
           v.source, v.operation, v.status, v.request_id, v.client_request_id
          ${activityIn} ${q.staffLooks ? sql`` : sql`and not ${look}`}
          order by v.at desc, v.id desc limit ${upTo})`,
        ]
      : []),
  ];
  return {
    page: sql<Row>`select t.* from (${sql.join(sides, sql` union all `)}) t
      order by t.at desc, t.key desc limit ${q.perPage} offset ${offsetOf(q)}`,
    revisions: revisionsToo ? sql`select count(*)::integer as n ${revisionsIn}` : null,
    // The activity log's own total (its kept counts, or the article's records).
    records: activityToo
      ? activityTotal(db, accountId, { page: 1, perPage: 1, from: q.from, to: q.to, articleId: q.articleId })
      : null,
    looks: activityToo ? sql`select count(*)::integer as n ${activityIn} and ${look}` : null,
  };
}

async function countOf(db: Db, statement: RawBuilder<{ n: number }> | null): Promise<number> {
  return statement ? ((await statement.execute(db)).rows[0]?.n ?? 0) : 0;
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
