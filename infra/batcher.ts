/**
 * Collects items and hands them to `flush` together: when `maxItems` are waiting or `maxDelayMs`
 * after the first one, one flush at a time. Each `add` resolves (or rejects) with its batch.
 */
export function createBatcher<T>(
  flush: (items: T[]) => Promise<void>,
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
        await flush(batch.map((w) => w.item));
        for (const w of batch) w.resolve();
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
