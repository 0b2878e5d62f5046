/*
 * A server-sent events stream read as a client reads it: its events (comments skipped) as they come,
 * and whether the server ended it.
 */

export type SseEvent = { id?: string; event?: string; data: string };

export type SseReading = {
  events: SseEvent[];
  /** Resolves when the stream ends: `ended` when the server ended it, `stopped` when `stop` did. */
  done: Promise<'ended' | 'stopped'>;
  /** Closes the stream from the client's side; resolves once reading stopped. */
  stop(): Promise<void>;
};

/** Reads the body of an SSE answer (fetched with `abort`'s signal, so that `stop` can end it). */
export function readSse(response: Response, abort: AbortController): SseReading {
  const events: SseEvent[] = [];
  const done = (async (): Promise<'ended' | 'stopped'> => {
    const decoder = new TextDecoder();
    let text = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
          const block = text.slice(0, end);
          text = text.slice(end + 2);
          const field = (name: string) => new RegExp(`^${name}: (.*)$`, 'm').exec(block)?.[1];
          const data = field('data');
          if (data === undefined) continue;
          const id = field('id');
          const event = field('event');
          events.push({
            data,
            ...(id === undefined ? {} : { id }),
            ...(event === undefined ? {} : { event }),
          });
        }
      }
      return abort.signal.aborted ? 'stopped' : 'ended';
    } catch (error) {
      if (abort.signal.aborted) return 'stopped';
      throw error;
    }
  })();
  return {
    events,
    done,
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}
