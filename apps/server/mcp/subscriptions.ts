import { ProtocolError, ResourceNotFoundError, type Server } from '@modelcontextprotocol/server';
import { DomainError } from '../../../domain/errors.ts';
import type { ArticleChanges, ArticleChangesSince } from './notifications.ts';
import { recorded, type Served } from './recorded.ts';
import { articleUri, parseResourceUri } from './resources.ts';

/*
 * Resource subscriptions as the 2026-07-28 revision defines them: `subscriptions/listen` names the
 * resources (`notifications.resourceSubscriptions`) and its answer is an SSE stream that stays open, on
 * which the server sends `notifications/resources/updated` for them (the SDK's createMcpHandler serves
 * the stream, stamps the subscription id and filters by URI). What is ours: only articles of the
 * caller's account may be named (another account's id refused as an unknown one, before the stream
 * opens), the listen is recorded like a resource read, and every new revision of an article, appended
 * by any face in any process, is published as its article's URI (`articleNotifier`).
 *
 * The 2025 era's `resources/subscribe` and `resources/unsubscribe` act on the request's session (made at
 * `initialize`, kept in the database: apps/application/subscriptions.ts), with the same refusals; the
 * notifications go out on the session's GET stream (`sessionStreams`), on whichever process holds it,
 * for the articles the session subscribed to as the database says when the revision is seen.
 * What /mcp needs before the SDK is loaded (a listen's URIs, the session streams) is in notifications.ts.
 */

/**
 * Checks the resources a listen names before its stream opens: each an article of the caller's account,
 * else the error a read of it gets (-32602 with `data: {uri}`); recorded as `subscribe_resources`.
 * Returns the JSON-RPC error response to answer, or null to serve the listen.
 */
export async function refuseListen(
  served: Served,
  id: unknown,
  uris: readonly string[],
): Promise<object | null> {
  if (uris.length === 0) return null;
  let at = '';
  const known = uris.length === 1 ? parseResourceUri(uris[0] as string) : null;
  try {
    await recorded(
      served,
      'subscribe_resources',
      { articleId: known?.kind === 'article' ? known.articleId : null },
      async ({ call, settle }) => {
        for (const uri of uris) {
          at = uri;
          const named = parseResourceUri(uri);
          if (named?.kind !== 'article')
            throw new DomainError('not_found', `No subscribable resource ${uri}`);
          settle(await served.services.application.subscriptions.articles(call, [named.articleId]));
        }
      },
      (detail) => new ResourceNotFoundError(at, detail),
    );
    return null;
  } catch (error) {
    if (!(error instanceof ProtocolError)) throw error;
    return { jsonrpc: '2.0', id, error: { code: error.code, message: error.message, data: error.data } };
  }
}

/**
 * Publishes `notifications/resources/updated` for an article's URI on every new revision of it, from
 * the first listen on: the log is followed only once someone listens, then until the server closes.
 */
export function articleNotifier(
  changes: ArticleChanges,
  publish: (uri: string, at: string) => void,
): { ready(): Promise<void>; stop(): Promise<void> } {
  let following: ReturnType<ArticleChanges> | undefined;
  return {
    /** Resolves once no revision appended from now on can be missed. */
    async ready() {
      following ??= changes((articleId, at) => publish(articleUri(articleId), at));
      await following.ready;
    },
    async stop() {
      await following?.stop();
    },
  };
}

/**
 * What a session's stream missed since the event `at` its client last had (`Last-Event-ID`): for each
 * article it subscribes to (`uris`) with a revision since, that article's URI and its newest revision's
 * event id, in the log's order; null when `at` is no event id of this service.
 */
export async function missedSince(
  uris: readonly string[],
  at: string,
  changesSince: ArticleChangesSince,
): Promise<Array<{ uri: string; at: string }> | null> {
  const articles = new Map<string, string>();
  for (const uri of uris) {
    const named = parseResourceUri(uri);
    if (named?.kind === 'article') articles.set(named.articleId, uri);
  }
  const changed = await changesSince(at, [...articles.keys()]);
  return changed?.map((c) => ({ uri: articles.get(c.articleId) as string, at: c.at })) ?? null;
}

/** The refusal of resources/subscribe or resources/unsubscribe sent without a session. */
const NO_SESSION =
  'Resource subscriptions need a session: send the Mcp-Session-Id header that the answer to initialize carried';

/**
 * resources/subscribe and resources/unsubscribe of the 2025 era, on the request's session: a subscription
 * only to an article of the caller's account (refused as a read of it is, -32602 with `data: {uri}`),
 * recorded as `subscribe_resources` and `unsubscribe_resources`.
 */
export function registerSessionSubscriptions(server: Server, served: Served): void {
  const { application } = served.services;
  const session = served.request.session ?? null;
  server.setRequestHandler('resources/subscribe', async (subscribing) => {
    const { uri } = subscribing.params;
    const named = parseResourceUri(uri);
    return recorded(
      served,
      'subscribe_resources',
      { articleId: named?.kind === 'article' ? named.articleId : null },
      async ({ call, settle }) => {
        if (named?.kind !== 'article') throw new DomainError('not_found', `No subscribable resource ${uri}`);
        if (session === null) throw new DomainError('invalid_request', NO_SESSION);
        settle(await application.subscriptions.sessions.subscribe(call, session, named.articleId, uri));
        return {};
      },
      (detail) => new ResourceNotFoundError(uri, detail),
    );
  });
  server.setRequestHandler('resources/unsubscribe', async (unsubscribing) => {
    const { uri } = unsubscribing.params;
    const named = parseResourceUri(uri);
    return recorded(
      served,
      'unsubscribe_resources',
      { articleId: named?.kind === 'article' ? named.articleId : null },
      async ({ call, settle }) => {
        if (session === null) throw new DomainError('invalid_request', NO_SESSION);
        settle(await application.subscriptions.sessions.unsubscribe(call, session, uri));
        return {};
      },
    );
  });
}
