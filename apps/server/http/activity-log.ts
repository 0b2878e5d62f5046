import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ActivitySource } from '../../../domain/activity/events.ts';
import type { Actor } from '../../../domain/event.ts';
import { isId } from '../../../domain/input.ts';
import type { Activity } from '../../application/activity.ts';
import type { Outcome, Subject } from '../../application/call.ts';
import { clientRequestIdOf } from './request-ids.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** What the call's activity record names: from the route's `:id`, then from its use case's outcome. */
    activity: Subject;
    /**
     * The operation the record names when the request says more than its route's `config.operation`
     * (the editor's form sent to put the protected links back: `articles.put_back_protected_links`).
     */
    activityOperation?: string;
  }
  interface FastifyContextConfig {
    /** The operation name in the activity log (the MCP tool names: list_sites, get_article, ...). */
    operation?: string;
    /** What the route's `:id` names, for the activity record: a site or an article. */
    subject?: 'site' | 'article';
    /** The source of the route's records when it is not the face's own (the web's article changes: `editor`). */
    source?: ActivitySource;
  }
}

/** Who a request acts for, once known; `refused`: credentials that name an account but were refused. */
export type Acting = { accountId: string; actor: Actor; refused: boolean };

/**
 * Notes a use case's outcome on its request, for the activity record: what it touched and the revision
 * it created (a route's `:id` stays when the outcome names nothing).
 */
export function noteOutcome(request: FastifyRequest, outcome: Outcome<unknown>): void {
  const { subject } = outcome;
  const known = request.activity;
  request.activity = {
    siteId: subject.siteId ?? known?.siteId ?? null,
    articleId: subject.articleId ?? known?.articleId ?? null,
    revision: subject.revision,
  };
}

/**
 * `take(key, now)` is true at most once per `windowMs` for each key, in this process; it remembers at
 * most `maxKeys` keys (the oldest forgotten first), so a flood of keys costs bounded memory.
 */
function oncePerWindow(windowMs: number, maxKeys: number): { take(key: string, now: number): boolean } {
  const last = new Map<string, number>();
  return {
    take(key, now) {
      const at = last.get(key);
      if (at !== undefined && now - at < windowMs) return false;
      last.delete(key);
      last.set(key, now);
      if (last.size > maxKeys) {
        const oldest = last.keys().next().value;
        if (oldest !== undefined) last.delete(oldest);
      }
      return true;
    },
  };
}

/**
 * Records every call of a route that names an `operation` (refused ones included) through the
 * application's activity log, as `source` (or the route's own `config.source`). While the activity
 * log cannot take more records (the database away long enough to fill its spool), such a call is
 * refused before it runs, with the log's refusal (thrown: a 503 with Retry-After), and not recorded:
 * no call is answered whose record would be lost. It hooks the
 * response's `close`, which fires whether the response was sent or the client hung up early (then the
 * status is 499), and the record is not tied to the connection. `actingOf` says whom the request acts
 * for (nobody: no record); credentials that name an account but were refused are recorded at most once
 * a minute per actor, so that a leaked key cannot flood the account's log.
 */
export function createActivityLog(
  activity: Pick<Activity, 'record'> & Partial<Pick<Activity, 'refusal'>>,
  source: ActivitySource,
  actingOf: (request: FastifyRequest) => Acting | null | Promise<Acting | null>,
  opts: { status?: (status: number) => number } = {},
) {
  const refused = oncePerWindow(60_000, 10_000);
  return {
    onRequest: (request: FastifyRequest, reply: FastifyReply): void => {
      const { operation } = request.routeOptions.config;
      if (!operation) return;
      const full = activity.refusal?.();
      if (full) throw full;
      const started = performance.now();
      // Only a well-formed id is recorded: a path's `%00` is refused by the route and named nowhere.
      const id = (request.params as { id?: unknown } | undefined)?.id;
      const subject = isId(id) ? request.routeOptions.config.subject : undefined;
      request.activity = {
        siteId: subject === 'site' ? (id as string) : null,
        articleId: subject === 'article' ? (id as string) : null,
        revision: null,
      };
      reply.raw.once('close', () => {
        const answered = reply.raw.writableFinished ? reply.statusCode : 499;
        const status = opts.status ? opts.status(answered) : answered;
        const durationMs = Math.round(performance.now() - started);
        const record = (acting: Acting | null): void => {
          if (!acting) return;
          if ((acting.refused || status === 401) && !refused.take(acting.actor.id, Date.now())) return;
          void activity.record({
            accountId: acting.accountId,
            source: request.routeOptions.config.source ?? source,
            actor: acting.actor,
            operation: request.activityOperation ?? operation,
            subject: request.activity,
            status,
            requestId: String(request.id),
            clientRequestId: clientRequestIdOf(request),
            durationMs,
          });
        };
        const acting = actingOf(request);
        if (acting instanceof Promise) void acting.then(record, () => undefined);
        else record(acting);
      });
    },
  };
}
