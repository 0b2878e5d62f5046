import { ProtocolError, ResourceNotFoundError } from '@modelcontextprotocol/server';
import { DomainError } from '../../../domain/errors.ts';
import { recorded, type Served } from './recorded.ts';
import { articleUri, parseResourceUri } from './resources.ts';

/*
 * Resource subscriptions as the 2026-07-28 revision defines them: `subscriptions/listen` names the
 * resources (`notifications.resourceSubscriptions`) and its answer is an SSE stream that stays open, on
 * which the server sends `notifications/resources/updated` for them (the SDK's createMcpHandler serves
 * the stream, stamps the subscription id and filters by URI). What is ours: only articles of the
 * caller's account may be named (another account's id refused as an unknown one, before the stream
 * opens), the listen is recorded like a resource read, and every new revision of an article, appended
 * by any face in any process, is published as its article's URI (`articleNotifier`). The 2025 era's
 * `resources/subscribe` needs a session, which this stateless server does not keep: not offered there.
 */

/** Follows the appends of article events from now on (the log, in this process): the port the app composes. */
export type ArticleChanges = (onArticle: (articleId: string) => void) => {
  ready: Promise<void>;
  stop(): Promise<void>;
};

/** The resources a `subscriptions/listen` request names, or null for any other request. */
export function listenedResources(body: unknown): { id: unknown; uris: string[] } | null {
  if (typeof body !== 'object' || body === null) return null;
  const message = body as { method?: unknown; id?: unknown; params?: { notifications?: unknown } };
  if (message.method !== 'subscriptions/listen') return null;
  const filter = message.params?.notifications as { resourceSubscriptions?: unknown } | undefined;
  const named = filter?.resourceSubscriptions;
  const uris = Array.isArray(named) ? named.filter((uri): uri is string => typeof uri === 'string') : [];
  return { id: message.id ?? null, uris };
}

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
  publish: (uri: string) => void,
): { ready(): Promise<void>; stop(): Promise<void> } {
  let following: ReturnType<ArticleChanges> | undefined;
  return {
    /** Resolves once no revision appended from now on can be missed. */
    async ready() {
      following ??= changes((articleId) => publish(articleUri(articleId)));
      await following.ready;
    },
    async stop() {
      await following?.stop();
    },
  };
}
