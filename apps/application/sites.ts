import { listBacklinks } from '../../projections/backlinks.ts';
import { resolvePeriod, siteStats } from '../../projections/site-stats.ts';
import { listSites, ofOwnSite, type SiteScope } from '../../projections/sites.ts';
import type { Call } from './call.ts';
import type { ApplicationDeps } from './deps.ts';
import { type BacklinkListQuery, type Listed, type ListQuery, listed, pageOf } from './lists.ts';
import { type BacklinkOut, backlinkOut, type SiteOut, type StatsOut, siteOut, statsOut } from './wire.ts';

export type Sites = ReturnType<typeof createSites>;

/** The account's sites, a site's backlinks and its statistics for a period. */
export function createSites(deps: Pick<ApplicationDeps, 'db' | 'now'>) {
  const { db } = deps;
  /** A site of the call's account (`not_found` otherwise, answered by the read itself), noted on the call. */
  const scopeOf = (call: Call, siteId: string): SiteScope => {
    call.touched.siteId = siteId;
    return { accountId: call.principal.accountId, siteId, liveKey: call.principal.liveKey };
  };
  return {
    /** A page of the account's sites, oldest first. */
    async list(call: Call, query: ListQuery): Promise<Listed<SiteOut>> {
      return listed(await listSites(db, call.principal.accountId, pageOf(query)), query, siteOut);
    },

    /** A page of a site's backlinks, newest first, filtered by date and category. */
    async backlinks(call: Call, siteId: string, query: BacklinkListQuery): Promise<Listed<BacklinkOut>> {
      const scope = scopeOf(call, siteId);
      const { from, to, category } = query;
      const page = await ofOwnSite(scope, listBacklinks(db, scope, { ...pageOf(query), from, to, category }));
      return listed(page, query, backlinkOut);
    },

    /** Articles published and backlinks acquired in a period (this_month, last_month, last_30_days, YYYY-MM). */
    async stats(call: Call, siteId: string, period: string): Promise<StatsOut> {
      const scope = scopeOf(call, siteId);
      const resolved = resolvePeriod(period, deps.now());
      return statsOut(siteId, resolved, await ofOwnSite(scope, siteStats(db, scope, resolved)));
    },
  };
}
