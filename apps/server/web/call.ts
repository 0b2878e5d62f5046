import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Activity } from '../../application/activity.ts';
import type { Call } from '../../application/call.ts';
import { createActivityLog } from '../http/activity-log.ts';
import type { WebKit } from './kit.ts';
import type { WebSession } from './sessions.ts';

/**
 * The application call of a signed-in person's request: the account holder as actor (`user`), origin
 * `editor` (a change made on these pages is a revision of the editor), the full grant of the account.
 */
export function webCall(request: FastifyRequest, session: WebSession): Call {
  return {
    principal: {
      accountId: session.accountId,
      actor: { type: 'user', id: session.account.id, name: session.account.name },
      origin: 'editor',
      scope: 'write',
      requestId: String(request.id),
    },
  };
}

/**
 * Records every form of the scope that names an `operation` (a change: keys, webhooks, password,
 * assistants as `web`; an article's edit or restore as `editor`, by its `config.source`) in the
 * account's activity log, refused ones included, once its sender is known to be the account holder.
 * A change answered by a redirect to its result is recorded with status 200.
 */
export function recordChanges(
  app: FastifyInstance,
  kit: Pick<WebKit, 'actingOf'>,
  activity: Pick<Activity, 'record'> & Partial<Pick<Activity, 'refusal'>>,
): void {
  // A form of the scope changes something: one that names no operation would change it unrecorded.
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    if (methods.some((m) => m !== 'GET' && m !== 'HEAD') && !route.config?.operation) {
      throw new Error(
        `${methods.join(',')} ${route.url}: a change on the pages names its operation (config.operation)`,
      );
    }
  });
  const log = createActivityLog(activity, 'web', (request) => kit.actingOf(request), {
    status: (status) => (status >= 300 && status < 400 ? 200 : status),
  });
  app.addHook('onRequest', (request, reply, done) => {
    try {
      log.onRequest(request, reply);
    } catch (error) {
      // The activity log cannot take the record: the 503 page (installPageErrors), nothing changed.
      done(error as Error);
      return;
    }
    done();
  });
}
