import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ActivitySource } from '../../../domain/activity/events.ts';
import { isId } from '../../../domain/input.ts';
import type { Activity } from '../../application/activity.ts';
import type { Touched } from '../../application/call.ts';
import type { AuthState } from './auth.ts';
import { clientRequestIdOf } from './request-ids.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The site and article a call touched and the revision it created, for its activity record
     * (routes and use cases fill in what params do not say).
     */
    activity: Touched;
  }
}

type Logger = { error(obj: object, msg: string): void };

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
 * Records every call made with a known key (refused ones included) as a `CallRecorded` event. It
 * hooks the response's `close`, which fires whether the response was sent or the client hung up
 * early (then the status is 499), and the append is not tied to the connection. Pending records
 * are awaited on shutdown.
 */
export function createActivityLog(
  activity: Pick<Activity, 'record'>,
  source: ActivitySource,
  resolveAuth: (request: FastifyRequest) => Promise<AuthState>,
  log: Logger,
) {
  const pending = new Set<Promise<unknown>>();
  const refusedKeys = oncePerWindow(60_000, 10_000);
  return {
    onRequest: async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
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
        const operation = request.routeOptions.config.operation;
        if (!operation) return;
        const status = reply.raw.writableFinished ? reply.statusCode : 499;
        const durationMs = Math.round(performance.now() - started);
        const record = ({ accountId, actor, principal }: AuthState): Promise<unknown> | undefined => {
          if (!accountId || !actor) return;
          // A key that names an account but is refused (revoked: before the route, or by the route's
          // own statement): a leaked key must not flood the account's log, so its calls are recorded
          // at most once a minute per key.
          if ((!principal || status === 401) && !refusedKeys.take(actor.id, Date.now())) return;
          return activity.record({
            accountId,
            source,
            actor,
            operation,
            siteId: request.activity.siteId,
            articleId: request.activity.articleId,
            revision: request.activity.revision,
            status,
            requestId: String(request.id),
            clientRequestId: clientRequestIdOf(request),
            durationMs,
          });
        };
        // The key is resolved by the time most requests end (request.auth); one that ends before
        // (a client gone during authentication) waits for it. One promise per call: this runs on all.
        const stored = request.auth ? record(request.auth) : resolveAuth(request).then(record);
        if (!stored) return;
        const settled: Promise<void> = stored.then(
          () => {
            pending.delete(settled);
          },
          (error: unknown) => {
            pending.delete(settled);
            log.error({ err: error }, 'could not record activity');
          },
        );
        pending.add(settled);
      });
    },
    /** Resolves when every record started so far is stored. */
    async drain(): Promise<void> {
      await Promise.all([...pending]);
    },
  };
}
