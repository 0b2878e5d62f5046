import { type Expression, type SqlBool, sql } from 'kysely';
import type { StaffSearched } from '../domain/activity/events.ts';
import type { Actor } from '../domain/event.ts';
import type { Db } from '../infra/db/schema.ts';
import { eachEvent, type Pending, type Statement } from '../infra/projection.ts';
import { inlineProjector, offsetOf, type Page, type PageQuery } from './projector.ts';

/** The search's row, inserted when `when` holds; a replay changes nothing. */
function searchStatements(event: Pending<StaffSearched>, when: Expression<SqlBool>): Statement[] {
  const d = event.data;
  return [
    sql`insert into staff_searches (id, staff_id, staff_name, at, query, account_ids, result_count, request_id)
        select ${d.searchId}::text, ${d.staff.id}::text, ${d.staff.name}::text, ${event.metadata.at}::timestamptz,
               ${d.query}::text, ${JSON.stringify(d.accountIds)}::jsonb, ${d.accountIds.length}::integer,
               ${d.requestId}::text
         where ${when}
        on conflict (id) do nothing`,
  ];
}

/** Support staff's searches for accounts: the staff-side audit (inline: a search is in it at once). */
export const staffSearchesProjector = inlineProjector({
  name: 'staff_searches@1',
  mode: 'inline',
  handles: ['StaffSearched'],
  tables: ['staff_searches'],
  project: eachEvent(searchStatements),
});

/** One entry of the staff audit: a search (its query and the accounts it listed) or a view of an account. */
export type StaffAuditEntry =
  | {
      kind: 'search';
      at: Date;
      staff: Pick<Actor, 'id' | 'name'>;
      query: string;
      accountIds: string[];
      requestId: string | null;
    }
  | {
      kind: 'view';
      at: Date;
      staff: Pick<Actor, 'id' | 'name'>;
      accountId: string;
      articleId: string | null;
      requestId: string | null;
    };

type Row = {
  kind: 'search' | 'view';
  at: Date;
  key: string;
  staff_id: string;
  staff_name: string;
  query: string | null;
  account_ids: string[] | null;
  account_id: string | null;
  article_id: string | null;
  request_id: string | null;
};

/**
 * What support staff did, newest first: their searches (this read model) and their views of accounts
 * (the `staff_view` records of the activity read model), interleaved. A query over two read models.
 */
export async function staffAudit(db: Db, q: PageQuery): Promise<Page<StaffAuditEntry>> {
  const audit = sql`
    select 'search' as kind, s.at, s.id as key, s.staff_id, s.staff_name, s.query, s.account_ids,
           null::text as account_id, null::text as article_id, s.request_id
      from staff_searches s
    union all
    select 'view', v.at, v.id, v.actor->>'id', v.actor->>'name', null, null, v.account_id, v.article_id,
           v.request_id
      from activity v
     where v.operation = 'staff_view'`;
  const [rows, count] = await Promise.all([
    sql<Row>`select t.* from (${audit}) t order by t.at desc, t.key desc limit ${q.perPage} offset ${offsetOf(q)}`.execute(
      db,
    ),
    sql<{ n: number }>`select (select count(*) from staff_searches)::integer
                            + (select count(*) from activity where operation = 'staff_view')::integer as n`.execute(
      db,
    ),
  ]);
  return { rows: rows.rows.map(entryOf), total: count.rows[0]?.n ?? 0 };
}

function entryOf(row: Row): StaffAuditEntry {
  const staff = { id: row.staff_id, name: row.staff_name };
  return row.kind === 'search'
    ? {
        kind: 'search',
        at: row.at,
        staff,
        query: row.query ?? '',
        accountIds: row.account_ids ?? [],
        requestId: row.request_id,
      }
    : {
        kind: 'view',
        at: row.at,
        staff,
        accountId: row.account_id ?? '',
        articleId: row.article_id,
        requestId: row.request_id,
      };
}
