import type { Db } from '../infra/db/schema.ts';
import { offsetOf, type Page, type PageQuery, type Projector } from './projector.ts';

export const sitesProjector: Projector = {
  name: 'sites@1',
  mode: 'inline',
  handles: ['SiteAdded'],
  tables: ['sites'],
  async apply(event, trx) {
    if (event.type !== 'SiteAdded') return;
    const d = event.data;
    await trx
      .insertInto('sites')
      .values({
        id: d.siteId,
        account_id: d.accountId,
        name: d.name,
        domain: d.domain,
        url: d.url,
        created_at: event.metadata.at,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  },
};

export type SiteRow = {
  id: string;
  account_id: string;
  name: string;
  domain: string;
  url: string;
  created_at: Date;
};

const siteColumns = ['id', 'account_id', 'name', 'domain', 'url', 'created_at'] as const;

/** The account's sites, oldest first (ties by id), so that pages are stable as sites are added. */
export async function listSites(db: Db, accountId: string, q: PageQuery): Promise<Page<SiteRow>> {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('sites')
      .select(siteColumns)
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'asc')
      .orderBy('id', 'asc')
      .limit(q.perPage)
      .offset(offsetOf(q))
      .execute(),
    db
      .selectFrom('sites')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}

/** A site of the account, or undefined for an unknown id and for another account's id alike. */
export async function findSite(db: Db, accountId: string, siteId: string): Promise<SiteRow | undefined> {
  return db
    .selectFrom('sites')
    .select(siteColumns)
    .where('id', '=', siteId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
}
