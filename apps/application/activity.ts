import { type ActivitySubjects, activitySubjects, listActivity } from '../../projections/activity.ts';
import type { Call } from './call.ts';
import type { ApplicationDeps } from './deps.ts';
import { type ActivityListQuery, type Listed, listed, pageOf } from './lists.ts';
import { type ActivityOut, activityOut } from './wire.ts';

export type Activity = ReturnType<typeof createActivity>;

/** The account's activity log: every call through a face and every change, newest first. */
export function createActivity(deps: Pick<ApplicationDeps, 'db' | 'commands'>) {
  const { db, commands } = deps;
  return {
    /** A page of the account's calls and changes, newest first, filtered by date, source, site and article. */
    async list(call: Call, query: ActivityListQuery): Promise<Listed<ActivityOut>> {
      const { from, to, source } = query;
      const filters = { from, to, source, siteId: query.site_id, articleId: query.article_id };
      const page = await listActivity(db, call.principal.accountId, { ...pageOf(query), ...filters });
      return listed(page, query, activityOut);
    },
    /**
     * The names of what records name: the sites' names and the articles' titles, of the call's
     * account only (another account's ids and unknown ones are left out).
     */
    async subjects(call: Call, records: readonly ActivityOut[]): Promise<ActivitySubjects> {
      const siteIds = [...new Set(records.flatMap((r) => (r.site_id ? [r.site_id] : [])))];
      const articleIds = [...new Set(records.flatMap((r) => (r.article_id ? [r.article_id] : [])))];
      return activitySubjects(db, call.principal.accountId, { siteIds, articleIds });
    },
    /** Stores one call's record (batched; resolves once stored). */
    record: commands.recordCall,
    /** Stores the records of calls so far now, without waiting for their batch's delay. */
    flush: commands.flushCalls,
  };
}
