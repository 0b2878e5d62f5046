import { type AliasedRawBuilder, sql } from 'kysely';
import { DomainError } from '../domain/errors.ts';
import type { Db } from '../infra/db/schema.ts';
import { invalidKeyError } from './accounts.ts';
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

/**
 * A site as one account sees it: queries of a site's rows return nothing for another account's site.
 * `liveKey`: the API key the read is made with, when the read must confirm it is not revoked (its
 * statement then says so, and a revoked key is refused).
 */
export type SiteScope = { accountId: string; siteId: string; liveKey?: string | undefined };

/**
 * The account that owns the scope's site, as a column of another statement: a site's read folds its
 * tenancy check into its own statement instead of running a separate lookup first.
 */
export function siteOwner(scope: SiteScope): AliasedRawBuilder<string | null, 'site_owner'> {
  return sql<string | null>`(select account_id from sites where id = ${scope.siteId})`.as('site_owner');
}

/**
 * What a site read's statement said about the scope: refuses a revoked key, then gives the result
 * when the site is the account's and undefined when not.
 */
export function inScope<T>(
  scope: SiteScope,
  said: { site_owner: string | null; key_live: boolean },
  result: () => T,
): T | undefined {
  if (!said.key_live) throw invalidKeyError();
  return said.site_owner === scope.accountId ? result() : undefined;
}

/** The result of a read of the scope's site; `not_found` when the site is not the account's. */
export async function ofOwnSite<T>(scope: SiteScope, read: Promise<T | undefined>): Promise<T> {
  const result = await read;
  if (result === undefined) throw new DomainError('not_found', `No site ${scope.siteId}`);
  return result;
}
