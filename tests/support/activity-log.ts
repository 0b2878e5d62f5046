import { type Expression, sql } from 'kysely';
import type { Db } from '../../infra/db/schema.ts';

/**
 * A long activity log written straight into the read model: `count` calls of `accountId`, a minute
 * apart going back from 2026-11-30 (`act_000001` the newest), each a read of an article named
 * `art_<g % articles>` when `g % articleEvery` is 0, and a staff member's look when `g % lookEvery` is.
 */
export async function insertLongLog(
  db: Db,
  accountId: string,
  count: number,
  shape: { articles?: number; articleEvery?: number; lookEvery?: number },
): Promise<void> {
  const article = shape.articleEvery
    ? sql`case when g % ${shape.articleEvery} = 0 then 'art_' || (g % ${shape.articles ?? 1}) end`
    : sql`null`;
  const operation = shape.lookEvery
    ? sql`case when g % ${shape.lookEvery} = 0 then 'staff_view' else 'get_article' end`
    : sql`'get_article'`;
  await sql`
    insert into activity (id, account_id, at, source, actor, operation, site_id, article_id, status, duration_ms)
    select 'act_' || lpad(g::text, 6, '0'), ${accountId}, timestamptz '2026-11-30T00:00:00Z' - g * interval '1 minute',
           'api', '{"type":"api_key","id":"key_1","name":"Key"}'::jsonb, ${operation}, 'site_1', ${article}, 200, 1
      from generate_series(1, ${count}::integer) g`.execute(db);
  await sql`analyze activity`.execute(db);
}

export type PlanNode = {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Actual Rows'?: number;
  Plans?: PlanNode[];
};

/** Every node of a statement's plan, depth first: as run with `analyze`, else as planned. */
export async function planNodes(
  db: Db,
  statement: Expression<unknown>,
  analyze = false,
): Promise<PlanNode[]> {
  const result = await sql<{
    'QUERY PLAN': unknown;
  }>`explain (${sql.raw(analyze ? 'analyze, ' : '')}format json) ${statement}`.execute(db);
  const plan = result.rows[0]?.['QUERY PLAN'];
  const [top] = (typeof plan === 'string' ? JSON.parse(plan) : plan) as [{ Plan: PlanNode }];
  const walk = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(walk)];
  return walk(top.Plan);
}

/** The indexes a statement's plan reads. */
export async function indexesOf(db: Db, statement: Expression<unknown>): Promise<string[]> {
  return (await planNodes(db, statement)).flatMap((n) => n['Index Name'] ?? []);
}
