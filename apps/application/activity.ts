import { type ActivityQuery, listActivity } from '../../projections/activity.ts';
import type { Page } from '../../projections/projector.ts';
import type { Call } from './call.ts';
import type { ApplicationDeps } from './deps.ts';
import { type ActivityOut, activityOut } from './wire.ts';

export type Activity = ReturnType<typeof createActivity>;

/** The account's activity log: every call through a face and every change, newest first. */
export function createActivity(deps: Pick<ApplicationDeps, 'db' | 'commands'>) {
  const { db, commands } = deps;
  return {
    async list(call: Call, query: ActivityQuery): Promise<Page<ActivityOut>> {
      const page = await listActivity(db, call.principal.accountId, query);
      return { rows: page.rows.map(activityOut), total: page.total };
    },
    /** Stores one call's record (batched; resolves once stored). */
    record: commands.recordCall,
    /** Stores the records of calls so far now, without waiting for their batch's delay. */
    flush: commands.flushCalls,
  };
}
