import { PassThrough } from 'node:stream';

/*
 * What the /mcp route needs of resource subscriptions before the MCP SDK is loaded (a start loads it
 * with the first MCP request, not before: docs/operations.md, "Start"): the port that follows article
 * changes, the URIs a 2026-07-28 `subscriptions/listen` names, and the 2025-era sessions' GET streams.
 * The rest (refusals, the notifier, the session handlers) is in subscriptions.ts, loaded with the SDK.
 */

/**
 * Follows the appends of article events from now on (the log, in this process): the port the app
 * composes. `at` names the event's place in the log, as text: a session stream's event id.
 */
export type ArticleChanges = (onArticle: (articleId: string, at: string) => void) => {
  ready: Promise<void>;
  stop(): Promise<void>;
};

/**
 * Of these articles, those with an event after the place `at` names (an event id this service sent),
 * each with the place of its newest, in the log's order; null when `at` is not such a place.
 */
export type ArticleChangesSince = (
  at: string,
  articleIds: readonly string[],
) => Promise<Array<{ articleId: string; at: string }> | null>;

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

/** How often an idle session stream carries a comment, so that proxies in between keep it open. */
const KEEPALIVE_MS = 15_000;

/** The open GET streams of 2025-era sessions on this process, and what is sent on them. */
export type SessionStreams = {
  /** The stream of a session, or null when the session has one open on this process already. */
  open(sessionId: string): PassThrough | null;
  /**
   * Sends `notifications/resources/updated` for the URI on the streams of the sessions subscribed to
   * it, as the SSE event with the id `at` (the revision's place in the log).
   */
  publish(uri: string, at: string): Promise<void>;
  /** Sends the notification for the URI on the session's stream here, if it has one (a replay). */
  send(sessionId: string, uri: string, at: string): void;
  /** Ends the session's stream (the session ended). */
  end(sessionId: string): void;
  /** Ends every stream (the server closes): clients open their next one on another process. */
  endAll(): void;
};

/**
 * The GET streams of this process: one per session at a time. On a new revision the sessions with a
 * stream here are looked up together, in one query, for a subscription to its URI. The lookups of
 * revisions that follow each other run side by side, and their notifications are sent in the order
 * of the revisions: a stream's event ids rise, so that the last id a client had is the newest it had.
 */
export function sessionStreams(
  subscribedTo: (sessionIds: readonly string[], uri: string) => Promise<Set<string>>,
  onError: (error: unknown) => void,
): SessionStreams {
  const open = new Map<string, { stream: PassThrough; keepalive: NodeJS.Timeout }>();
  /** The publication being sent: the next waits for it. */
  let sending: Promise<void> = Promise.resolve();
  const send = (sessionId: string, uri: string, at: string): void => {
    const message = { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } };
    open.get(sessionId)?.stream.write(`id: ${at}\nevent: message\ndata: ${JSON.stringify(message)}\n\n`);
  };
  const end = (sessionId: string): void => {
    const entry = open.get(sessionId);
    if (!entry) return;
    open.delete(sessionId);
    clearInterval(entry.keepalive);
    entry.stream.end();
  };
  return {
    open(sessionId) {
      if (open.has(sessionId)) return null;
      const stream = new PassThrough();
      const keepalive = setInterval(() => stream.write(': keepalive\n\n'), KEEPALIVE_MS);
      keepalive.unref();
      open.set(sessionId, { stream, keepalive });
      stream.once('close', () => {
        if (open.get(sessionId)?.stream === stream) end(sessionId);
      });
      // Sent at once: the client knows the stream is open.
      stream.write(': open\n\n');
      return stream;
    },
    publish(uri, at) {
      if (open.size === 0) return sending;
      // Settled here, so that a lookup refused while an earlier one is sent is not left unhandled.
      const lookup = subscribedTo([...open.keys()], uri).then(
        (subscribed) => ({ subscribed }),
        (error: unknown) => ({ error }),
      );
      sending = sending.then(async () => {
        const found = await lookup;
        if ('error' in found) return onError(found.error);
        for (const sessionId of found.subscribed) send(sessionId, uri, at);
      });
      return sending;
    },
    send,
    end,
    endAll() {
      for (const sessionId of [...open.keys()]) end(sessionId);
    },
  };
}
