import { z } from 'zod';
import { ActivitySource } from '../../domain/activity/events.ts';
import type { Actor } from '../../domain/event.ts';
import { type ActivitySubjects, activitySubjects, listActivity } from '../../projections/activity.ts';
import { type Call, type Outcome, outcomeOf, type Subject } from './call.ts';
import { ActivityAbandoned } from './commands/activity-batcher.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { type Listed, listed, pageOf } from './lists.ts';
import { dateRange, fromParam, idParam, pageParam, perPageParam, toParam } from './requests.ts';
import { type ActivityOut, activityOut } from './wire.ts';

/* What the activity log is asked with. */

export const ActivityQuery = z
  .strictObject({
    from: fromParam,
    to: toParam,
    source: ActivitySource.optional().meta({
      description:
        'Only records of this source (`editor`: article changes on the web pages; `web`: other changes on the web pages; `rewrite`: the content pipeline; `system`: the service and support staff).',
    }),
    site_id: idParam.optional().meta({ description: 'Only records about this site.' }),
    article_id: idParam.optional().meta({ description: 'Only records about this article.' }),
    page: pageParam,
    per_page: perPageParam,
  })
  .superRefine(dateRange);
export type ActivityListQuery = z.output<typeof ActivityQuery>;

export type Activity = ReturnType<typeof createActivity>;

/** One call through a face (or a change the CLI made), as its activity record tells it. */
export type CallEntry = {
  accountId: string;
  source: ActivitySource;
  actor: Actor;
  operation: string;
  /** What it touched and the revision it created (a use case's outcome says). */
  subject: Subject;
  /** The HTTP status it was answered with (a CLI change: 200, or its refusal's). */
  status: number;
  requestId: string | null;
  /** The client's own X-Request-Id, if a valid one. */
  clientRequestId?: string | null;
  durationMs: number;
};

/**
 * The account's activity log: every call through a face and every change, newest first. `record` is
 * the one way a call reaches it, for every face (API, MCP, web pages, staff views, CLI).
 */
export function createActivity(deps: Pick<ApplicationDeps, 'db' | 'reads' | 'commands' | 'log'>) {
  const { commands } = deps;
  const reads = readsOf(deps);
  const pending = new Set<Promise<void>>();
  return {
    /** A page of the account's calls and changes, newest first, filtered by date, source, site and article. */
    list(call: Call, query: ActivityListQuery): Promise<Outcome<Listed<ActivityOut>>> {
      return outcomeOf({}, async () => {
        const { from, to, source } = query;
        const filters = { from, to, source, siteId: query.site_id, articleId: query.article_id };
        const { accountId } = call.principal;
        const page = await reads.read(accountId, (db) =>
          listActivity(db, accountId, { ...pageOf(query), ...filters }),
        );
        return listed(page, query, activityOut);
      });
    },
    /**
     * The names of what records name: the sites' names and the articles' titles, of the call's
     * account only (another account's ids and unknown ones are left out).
     */
    subjects(call: Call, records: readonly ActivityOut[]): Promise<Outcome<ActivitySubjects>> {
      return outcomeOf({}, async () => {
        const siteIds = [...new Set(records.flatMap((r) => (r.site_id ? [r.site_id] : [])))];
        const articleIds = [...new Set(records.flatMap((r) => (r.article_id ? [r.article_id] : [])))];
        const { accountId } = call.principal;
        return reads.read(accountId, (db) => activitySubjects(db, accountId, { siteIds, articleIds }));
      });
    },
    /**
     * Stores one call's record (batched with others): resolves once stored. A caller may leave it
     * unawaited: a failure is logged, and `drain` waits for it.
     */
    record(entry: CallEntry): Promise<void> {
      const stored = commands
        .recordCall({
          accountId: entry.accountId,
          source: entry.source,
          actor: entry.actor,
          operation: entry.operation,
          siteId: entry.subject.siteId,
          articleId: entry.subject.articleId,
          revision: entry.subject.revision,
          status: entry.status,
          requestId: entry.requestId,
          clientRequestId: entry.clientRequestId ?? null,
          durationMs: entry.durationMs,
        })
        .then(() => undefined);
      const settled: Promise<void> = stored.then(
        () => {
          pending.delete(settled);
        },
        (error: unknown) => {
          pending.delete(settled);
          // Those given up at shutdown are counted in one line by `drain`.
          if (!(error instanceof ActivityAbandoned))
            deps.log?.error({ err: error }, 'could not record activity');
        },
      );
      pending.add(settled);
      return stored;
    },
    /**
     * Null while calls can be recorded; else (the database away long enough for the spool to fill) the
     * error to refuse a call that would be recorded with, before it runs: a 503 with Retry-After on
     * every face. A call so refused is not recorded.
     */
    refusal: (): Error | null => commands.callsRefusal(),
    /**
     * Resolves when every record started so far is stored (or has failed and been logged). Given
     * `withinMs` (a shutdown's), it waits that long at most: the records the database has not taken
     * by then are given up, and their number logged in one line.
     */
    async drain(withinMs?: number): Promise<void> {
      const all = Promise.all([...pending]).then(() => true);
      if (withinMs === undefined) {
        await all;
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), withinMs);
      });
      const stored = await Promise.race([all, deadline]);
      clearTimeout(timer);
      if (stored) return;
      const lost = commands.abandonCalls();
      deps.log?.error(
        { records: lost },
        `${lost} activity records could not be written before shutdown: the database did not take them`,
      );
    },
    /** Stores the records of calls so far now, without waiting for their batch's delay. */
    flush: commands.flushCalls,
  };
}
