import { type Insertable, type Selectable, sql } from 'kysely';
import type { BacklinkAcquired, BacklinkCategory } from '../domain/backlink/events.ts';
import type { BacklinksTable } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { inTransactionOnly, type Stored, type Trx } from '../infra/projection.ts';
import { keyLive } from './accounts.ts';
import { asyncProjector, offsetOf, type Page, type PageQuery } from './projector.ts';
import { inScope, type SiteScope, siteOwner } from './sites.ts';

/** Backlinks and their per-site counts (async). Its only event is BacklinkAcquired, so it needs no switch. */
export const backlinksProjector = asyncProjector({
  name: 'backlinks@1',
  mode: 'async',
  handles: ['BacklinkAcquired'],
  tables: ['backlinks', 'backlink_counts'],
  /** Multi-row inserts; the first event of an id wins, as it does one by one. */
  project: inTransactionOnly(async (events: readonly Stored<BacklinkAcquired>[], trx) => {
    const rows = new Map<string, Insertable<BacklinksTable>>();
    for (const event of events) {
      if (!rows.has(event.data.backlinkId)) {
        rows.set(event.data.backlinkId, backlinkRow(event));
      }
    }
    const all = [...rows.values()];
    for (let i = 0; i < all.length; i += INSERT_ROWS) {
      const inserted = await trx
        .insertInto('backlinks')
        .values(all.slice(i, i + INSERT_ROWS))
        .onConflict((oc) => oc.column('id').doNothing())
        .returning(['site_id', 'category'])
        .execute();
      await countBacklinks(trx, inserted);
    }
  }),
});

/** Adds the backlinks a statement inserted (not those it skipped as already there) to backlink_counts. */
async function countBacklinks(
  trx: Trx,
  inserted: readonly { site_id: string; category: string }[],
): Promise<void> {
  const counts = new Map<string, { site_id: string; category: string; n: number }>();
  for (const row of inserted) {
    const key = `${row.site_id}\u0000${row.category}`;
    const entry = counts.get(key) ?? { site_id: row.site_id, category: row.category, n: 0 };
    entry.n++;
    counts.set(key, entry);
  }
  if (counts.size === 0) return;
  await trx
    .insertInto('backlink_counts')
    .values([...counts.values()])
    .onConflict((oc) =>
      oc.columns(['site_id', 'category']).doUpdateSet({ n: sql`backlink_counts.n + excluded.n` }),
    )
    .execute();
}

/** Rows per multi-row insert: 10 parameters each, well below PostgreSQL's 65,535 per statement. */
const INSERT_ROWS = 1000;

/** A backlink's row; it was recorded when its event was (`as_of` statistics count by that). */
function backlinkRow({ data: d, metadata }: Stored<BacklinkAcquired>): Insertable<BacklinksTable> {
  return {
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
    recorded_at: metadata.at,
  };
}

export type BacklinkRow = Selectable<BacklinksTable>;
export type BacklinkListQuery = PageQuery & {
  from?: string | undefined;
  to?: string | undefined;
  category?: BacklinkCategory | undefined;
};

/** The backlinks of one site of the account that a list's filters keep. */
function backlinksOf(db: Db, scope: SiteScope, q: BacklinkListQuery) {
  let base = db
    .selectFrom('backlinks')
    .where('site_id', '=', scope.siteId)
    .where('account_id', '=', scope.accountId);
  if (q.category) base = base.where('category', '=', q.category);
  if (q.from) base = base.where('acquired_on', '>=', q.from);
  if (q.to) base = base.where('acquired_on', '<=', q.to);
  return base;
}

/** The statement of a page of `listBacklinks` (the benchmark's floor runs it too). */
export function backlinkPage(db: Db, scope: SiteScope, q: BacklinkListQuery) {
  return backlinksOf(db, scope, q)
    .selectAll()
    .orderBy('acquired_on', 'desc')
    .orderBy('id', 'desc')
    .limit(q.perPage)
    .offset(offsetOf(q));
}

/**
 * Backlinks of one site of the account, newest acquired first, ties by id. Undefined for a site that
 * is not the account's (unknown or another account's alike).
 */
export async function listBacklinks(
  db: Db,
  scope: SiteScope,
  q: BacklinkListQuery,
): Promise<Page<BacklinkRow> | undefined> {
  const base = backlinksOf(db, scope, q);
  // Without a date range the total is a lookup in backlink_counts; with one, the range is counted.
  // The statement of the total also says whose the site is.
  const counted =
    q.from || q.to
      ? base
          .select((eb) => [eb.fn.countAll<string>().as('n'), siteOwner(scope), keyLive(scope.liveKey)])
          .executeTakeFirstOrThrow()
      : db
          .selectFrom('backlink_counts')
          .select((eb) => [
            eb.fn.coalesce(eb.fn.sum<string>('n'), sql<string>`0`).as('n'),
            siteOwner(scope),
            keyLive(scope.liveKey),
          ])
          .where('site_id', '=', scope.siteId)
          .$if(q.category !== undefined, (qb) => qb.where('category', '=', q.category as string))
          .executeTakeFirstOrThrow();
  const [rows, count] = await Promise.all([backlinkPage(db, scope, q).execute(), counted]);
  return inScope(scope, count, () => ({ rows, total: Number(count.n) }));
}
