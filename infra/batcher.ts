/**
 * What a flush says of each item, by index: `null` (or nothing) when it was stored, else its error.
 * A flush that returns nothing, or an array without failures, stored them all.
 */
type Failures = readonly unknown[] | undefined;

/**
 * Collects items and hands them to `flush` together: when `maxItems` are waiting or `maxDelayMs`
 * after the first one, one flush at a time. Each `add` resolves with its batch, or rejects with its
 * own failure (the flush's answer) or the whole flush's error.
 */
export function createBatcher<T>(
  // biome-ignore lint/suspicious/noConfusingVoidType: a flush that stored everything may return nothing.
  flush: (items: T[]) => Promise<Failures | void>,
  opts: { maxItems: number; maxDelayMs: number },
): { add(item: T): Promise<void>; flushNow(): Promise<void> } {
  type Waiting = { item: T; resolve: () => void; reject: (error: unknown) => void };
  let waiting: Waiting[] = [];
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> = Promise.resolve();

  const run = (): Promise<void> => {
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
    const batch = waiting;
    waiting = [];
    if (batch.length === 0) return running;
    running = running.then(async () => {
      try {
        const failures = await flush(batch.map((w) => w.item));
        batch.forEach((w, i) => {
          const failure = failures?.[i];
          if (failure === null || failure === undefined) w.resolve();
          else w.reject(failure);
        });
      } catch (error) {
        for (const w of batch) w.reject(error);
      }
    });
    return running;
  };

  return {
    add(item) {
      return new Promise<void>((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        if (waiting.length >= opts.maxItems) void run();
        else if (!timer) {
          timer = setTimeout(() => void run(), opts.maxDelayMs);
          timer.unref();
        }
      });
    },
    flushNow: run,
  };
}
