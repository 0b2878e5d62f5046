import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ActivitySource } from '../../../domain/activity/events.ts';
import type { Commands } from '../../../infra/commands.ts';
import type { AuthState } from './auth.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The site and article a call touched, for its activity record (routes fill in what params do not say). */
    activity: { siteId: string | null; articleId: string | null };
  }
}

type Logger = { error(obj: object, msg: string): void };

/**
 * Records every call made with a known key (refused ones included) as a `CallRecorded` event. It
 * hooks the response's `close`, which fires whether the response was sent or the client hung up
 * early (then the status is 499), and the append is not tied to the connection. Pending records
 * are awaited on shutdown.
 */
export function createActivityLog(
  commands: Commands,
  source: ActivitySource,
  resolveAuth: (request: FastifyRequest) => Promise<AuthState>,
  log: Logger,
) {
  const pending = new Set<Promise<unknown>>();
  return {
    onRequest: async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
      const started = performance.now();
      const id = (request.params as { id?: unknown } | undefined)?.id;
      const subject = typeof id === 'string' ? request.routeOptions.config.subject : undefined;
      request.activity = {
        siteId: subject === 'site' ? (id as string) : null,
        articleId: subject === 'article' ? (id as string) : null,
      };
      reply.raw.once('close', () => {
        const operation = request.routeOptions.config.operation;
        if (!operation) return;
        const status = reply.raw.writableFinished ? reply.statusCode : 499;
        const durationMs = Math.round(performance.now() - started);
        const record = ({ accountId, actor }: AuthState): Promise<unknown> | undefined => {
          if (!accountId || !actor) return;
          return commands.recordCall({
            accountId,
            source,
            actor,
            operation,
            siteId: request.activity.siteId,
            articleId: request.activity.articleId,
            status,
            requestId: String(request.id),
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
