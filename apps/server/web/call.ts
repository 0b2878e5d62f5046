import type { FastifyRequest } from 'fastify';
import type { Call } from '../../application/call.ts';
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
    touched: { siteId: null, articleId: null, revision: null },
  };
}
