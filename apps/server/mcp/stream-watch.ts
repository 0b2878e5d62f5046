import type { RequestPrincipal } from '../http/auth.ts';

/*
 * A notification stream lasts only as long as what opened it holds. A request is checked once, when it
 * comes; a stream (a 2025-era session's GET stream, a 2026-07-28 `subscriptions/listen`) stays open for
 * hours, so every open stream on this process is checked again every `everyMs`: its access token as a
 * request's is checked (not expired, not revoked, its assistant not disconnected, its account there),
 * and a session's stream its session (not ended by a DELETE on another process, not expired). A stream
 * that fails is ended: its client opens it again with a token that is valid, or learns that it may not.
 * A check also marks the sessions of open streams seen, so that a session whose client only listens
 * never expires under its stream. When the database cannot answer, the streams stay as they are and the
 * next round tries again.
 */

/** An open stream: the token it was opened with, its session (2025 era) or none, and how to end it. */
export type WatchedStream = {
  token: string;
  session: string | null;
  /** Ends the stream; `why` is logged. */
  end(why: string): void;
};

export type StreamWatch = {
  /** Watches a stream until the returned function is called (the stream closed). */
  hold(stream: WatchedStream): () => void;
  /** Checks every open stream now (after a disconnect on this process); resolves when done. */
  check(): Promise<void>;
  /** How many streams are watched. */
  readonly size: number;
  /** Stops the timer (the server closes). */
  stop(): void;
};

/** How often the open streams are checked, by default. */
export const STREAM_CHECK_MS = 15_000;

export const TOKEN_ENDED = 'its access token is no longer valid (expired, revoked or disconnected)';
export const SESSION_ENDED = 'its session has ended or expired';

export function streamWatch(deps: {
  /** The request's token check: the principal, or null when the token is refused. */
  verify: (token: string) => Promise<RequestPrincipal | null>;
  /** Of these sessions, those still live; each is marked seen (at most so often: the store decides). */
  keepSessions: (sessionIds: readonly string[]) => Promise<Set<string>>;
  everyMs: number;
  onError: (error: unknown) => void;
}): StreamWatch {
  const held = new Set<WatchedStream>();
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let again = false;

  const ended = (stream: WatchedStream, why: string): void => {
    if (!held.delete(stream)) return;
    stream.end(why);
  };

  const round = async (): Promise<void> => {
    const byToken = Map.groupBy(held, (s) => s.token);
    for (const [token, streams] of byToken) {
      let principal: RequestPrincipal | null;
      try {
        principal = await deps.verify(token);
      } catch (error) {
        // The database away: every other token would fail alike; the next round tries again.
        deps.onError(error);
        return;
      }
      if (principal === null) for (const s of streams) ended(s, TOKEN_ENDED);
    }
    const sessions = [...held].filter((s) => s.session !== null);
    if (sessions.length === 0) return;
    let live: Set<string>;
    try {
      live = await deps.keepSessions([...new Set(sessions.map((s) => s.session as string))]);
    } catch (error) {
      deps.onError(error);
      return;
    }
    for (const s of sessions) if (!live.has(s.session as string)) ended(s, SESSION_ENDED);
  };

  /** One round at a time; a check asked for during a round runs once more after it. */
  const check = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await round();
      } while (again);
    })().finally(() => {
      running = null;
    });
    return running;
  };

  const stopTimer = (): void => {
    if (timer) clearInterval(timer);
    timer = null;
  };

  return {
    hold(stream) {
      held.add(stream);
      if (!timer) {
        timer = setInterval(() => {
          if (!running) void check();
        }, deps.everyMs);
        timer.unref();
      }
      return () => {
        held.delete(stream);
        if (held.size === 0) stopTimer();
      };
    },
    check: () => (held.size === 0 ? Promise.resolve() : check()),
    get size() {
      return held.size;
    },
    stop: stopTimer,
  };
}
