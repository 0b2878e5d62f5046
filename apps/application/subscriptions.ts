import { DomainError } from '../../domain/errors.ts';
import { newId } from '../../infra/ids.ts';
import {
  deleteMcpSession,
  deleteSubscription,
  hasMcpSession,
  insertMcpSession,
  insertSubscription,
  keepMcpSessions,
  type SessionOwner,
  sessionSubscriptions,
  sessionsSubscribedTo,
  touchMcpSession,
} from '../../infra/mcp-sessions.ts';
import { findArticleSite } from '../../projections/articles.ts';
import { type Call, type Outcome, outcomeOf } from './call.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';

/*
 * Subscribing to changes of articles (MCP's resource subscriptions): only to the account's own, so that
 * another account's id is refused exactly as an unknown one.
 *
 * The 2025 era's subscriptions belong to a session (`sessions`): made at `initialize` for the account and
 * the OAuth client of the call, kept in the database so that any process of the service answers it, and
 * gone once not seen for 24 hours (a request carrying it, or its stream open on a process; housekeeping
 * deletes it then; infra/mcp-sessions.ts). A session is only ever found, changed or ended by the account
 * and client that made it: anyone else's call finds nothing.
 */

export type Subscriptions = ReturnType<typeof createSubscriptions>;

/** The owner of the call's sessions: its account and OAuth client. */
function ownerOf(call: Call): SessionOwner {
  return { accountId: call.principal.accountId, clientId: call.principal.actor.id };
}

export function createSubscriptions(deps: Pick<ApplicationDeps, 'db' | 'reads' | 'now'>) {
  const reads = readsOf(deps);
  const { db } = deps;

  /** Each article is the account's; `not_found` naming the first that is not. */
  function articles(call: Call, articleIds: readonly string[]): Promise<Outcome<void>> {
    return outcomeOf(articleIds.length === 1 ? { articleId: articleIds[0] } : {}, async (note) => {
      const { accountId, liveKey } = call.principal;
      await reads.read(accountId, async (db) => {
        for (const articleId of articleIds) {
          const siteId = await findArticleSite(db, accountId, articleId, liveKey);
          if (!siteId) throw new DomainError('not_found', `No article ${articleId}`);
          if (articleIds.length === 1) note.site(siteId);
        }
      });
    });
  }

  const sessionEnded = (): DomainError =>
    new DomainError(
      'invalid_request',
      'The session has ended: initialize again to start a new one, then subscribe again',
    );

  return {
    articles,
    sessions: {
      /** A new session of the call's account and client: its id. */
      async open(call: Call): Promise<string> {
        const id = newId('mcps');
        await insertMcpSession(db, id, ownerOf(call), deps.now());
        return id;
      },

      /** Whether the session is the call's account's and client's and alive; if so, it is seen now. */
      touch: (call: Call, sessionId: string): Promise<boolean> =>
        touchMcpSession(db, ownerOf(call), sessionId, deps.now()),

      /** Ends the session (with its subscriptions); false when the caller has no such session. */
      end: (call: Call, sessionId: string): Promise<boolean> =>
        deleteMcpSession(db, ownerOf(call), sessionId, deps.now()),

      /** Subscribes the session to an article (of the call's account) under its URI. */
      subscribe(call: Call, sessionId: string, articleId: string, uri: string): Promise<Outcome<void>> {
        return outcomeOf({ articleId }, async (note) => {
          const known = await articles(call, [articleId]);
          if (!known.ok) throw known.error;
          if (known.subject.siteId) note.site(known.subject.siteId);
          if (!(await hasMcpSession(db, ownerOf(call), sessionId, deps.now()))) throw sessionEnded();
          await insertSubscription(db, sessionId, uri);
        });
      },

      /** Ends the session's subscription to a URI (nothing to do when it had none). */
      unsubscribe(call: Call, sessionId: string, uri: string): Promise<Outcome<void>> {
        return outcomeOf({}, async () => {
          if (!(await hasMcpSession(db, ownerOf(call), sessionId, deps.now()))) throw sessionEnded();
          await deleteSubscription(db, sessionId, uri);
        });
      },

      /** The URIs the session subscribes to; none when the caller has no such session. */
      async subscriptionsOf(call: Call, sessionId: string): Promise<string[]> {
        if (!(await hasMcpSession(db, ownerOf(call), sessionId, deps.now()))) return [];
        return sessionSubscriptions(db, sessionId);
      },

      /**
       * Of these sessions, each with a stream open on this process (opened by its owner), those still
       * live; they are seen now (hourly at most), so that a session whose client only listens never expires.
       */
      keep: (sessionIds: readonly string[]): Promise<Set<string>> =>
        keepMcpSessions(db, sessionIds, deps.now()),

      /** Which of these sessions are subscribed to the URI. */
      subscribedTo: (sessionIds: readonly string[], uri: string): Promise<Set<string>> =>
        sessionsSubscribedTo(db, sessionIds, uri),
    },
  };
}
