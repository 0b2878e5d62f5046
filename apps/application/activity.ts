import { z } from 'zod';
import { ActivitySource } from '../../domain/activity/events.ts';
import type { Actor } from '../../domain/event.ts';
import {
  type ActivityRow,
  type ActivitySubjects,
  activitySubjects,
  listActivity,
} from '../../projections/activity.ts';
import { type Call, type Outcome, outcomeOf, type Subject } from './call.ts';
import { ActivityAbandoned } from './commands/activity-batcher.ts';
import {
  dateRange,
  fromParam,
  wireId as id,
  idParam,
  pageParam,
  perPageParam,
  rfc3339,
  timestamp,
  toolFields,
  toParam,
  WireActor,
} from './contract.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { type Listed, listed, pageOf } from './lists.ts';

/*
 * The activity log's contract: a record as it is asked for and answered; then the use cases.
 */

export const ActivityRecord = z
  .object({
    id,
    at: timestamp,
    source: ActivitySource,
    actor: WireActor,
    operation: z.string().meta({
      description:
        'What was done: the MCP tool names (`list_sites`, `get_article`, ...); `articles.preview` for a preview of an edit (any face); `articles.put_back_protected_links` (source `editor`) when the web editor put an article’s protected links back into a refused draft (nothing saved); `staff_view` and `staff_search` (source `system`) when support staff opened the account or listed it in a search.',
    }),
    site_id: z.string().nullable(),
    article_id: z.string().nullable(),
    revision: z.number().int().min(1).nullable().meta({
      description:
        'The article revision the call created (open it at /articles/{article_id}/revisions/{revision}); null when it created none.',
    }),
    status: z.number().int().meta({ description: 'The HTTP status answered (499 when the client hung up).' }),
    request_id: z.string().nullable().meta({
      description:
        'The id the service gave the request (`req_...`, its `X-Request-Id` response header): quote it to support.',
    }),
    client_request_id: z.string().nullable().meta({
      description:
        'The `X-Request-Id` the client sent with the request, if a valid one: kept for correlation, never the request id.',
    }),
    duration_ms: z.number().int().min(0),
  })
  .meta({
    id: 'ActivityRecord',
    description:
      'One call through the API or MCP (refused ones included), or a change the content pipeline made.',
    example: {
      id: 'act_06h017my4x3zamww4jk51y2p4c',
      at: '2026-11-05T14:00:00Z',
      source: 'api',
      actor: { type: 'api_key', id: 'key_06h0...', name: 'Reporting key' },
      operation: 'list_articles',
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      article_id: null,
      revision: null,
      status: 200,
      request_id: 'req_06h017my4x3zamww4jk51y2p4c',
      client_request_id: 'checkout-7f3a',
      duration_ms: 14,
    },
  });

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

/* The tool's input: the same fields, described for a model. */

export const ListActivityInput = z
  .strictObject({
    from: toolFields.from('Only records'),
    to: toolFields.to('Only records'),
    source: ActivityQuery.shape.source.meta({
      description:
        'Only records from api, mcp (assistants), editor (the web app), rewrite (the content pipeline) or system.',
    }),
    site_id: ActivityQuery.shape.site_id.meta({ description: 'Only records about this site.' }),
    article_id: ActivityQuery.shape.article_id.meta({ description: 'Only records about this article.' }),
    page: toolFields.page,
    per_page: toolFields.perPage,
  })
  .superRefine(dateRange);

export type ActivityOut = z.infer<typeof ActivityRecord>;

export function activityOut(row: ActivityRow): ActivityOut {
  return {
    id: row.id,
    at: rfc3339(row.at),
    source: row.source,
    actor: row.actor,
    operation: row.operation,
    site_id: row.site_id,
    article_id: row.article_id,
    revision: row.revision,
    status: row.status,
    request_id: row.request_id,
    client_request_id: row.client_request_id,
    duration_ms: row.duration_ms,
  };
}

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
