import { detached } from './telemetry/spans.ts';

/**
 * What a flush says of each item, by index: `null` (or nothing) when it was stored, else its error.
 * A flush that returns nothing, or an array without failures, stored them all.
 */
type Failures = readonly unknown[] | undefined;

/**
 * Collects items and hands them to `flush` together, one flush at a time, in the order added.
 *
 * A batch goes `maxDelayMs` after its first item, or at once when `maxItems` are waiting; while a
 * flush runs, what arrives waits for it to end, and then goes as the next batch (at most `maxItems`)
 * at once if its first item has waited `maxDelayMs` already, else when it has. So a flush slower than
 * the items come makes the batches bigger, never a queue of small flushes (group commit), and a fast
 * flush under a steady stream does not either: each batch holds what came in `maxDelayMs` at least
 * (a batch's cost is mostly its own, not its items': the transaction, its round trips, its commit).
 * Each `add` resolves with its batch, or rejects with its own failure (the flush's answer) or the
 * whole flush's error.
 */
export function createBatcher<T>(
  // biome-ignore lint/suspicious/noConfusingVoidType: a flush that stored everything may return nothing.
  flush: (items: T[]) => Promise<Failures | void>,
  opts: {
    maxItems: number;
    maxDelayMs: number;
    /** Told, for each item stored, how many milliseconds it waited from `add` to the end of its flush. */
    onStored?: (waitedMs: number) => void;
  },
): { add(item: T): Promise<void>; flushNow(): Promise<void>; size(): number } {
  type Waiting = { item: T; at: number; resolve: () => void; reject: (error: unknown) => void };
  const { onStored } = opts;
  let waiting: Waiting[] = [];
  let timer: NodeJS.Timeout | null = null;
  let flushing: Promise<void> | null = null;
  /** Items added so far, and items whose batch has ended (stored or failed): both only grow. */
  let added = 0;
  let settled = 0;

  const flushBatch = async (batch: Waiting[]): Promise<void> => {
    try {
      const failures = await flush(batch.map((w) => w.item));
      const end = performance.now();
      batch.forEach((w, i) => {
        const failure = failures?.[i];
        if (failure === null || failure === undefined) {
          onStored?.(end - w.at);
          w.resolve();
        } else w.reject(failure);
      });
    } catch (error) {
      for (const w of batch) w.reject(error);
    }
  };

  const start = (): void => {
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
    if (flushing || waiting.length === 0) return;
    const batch = waiting.length <= opts.maxItems ? waiting : waiting.slice(0, opts.maxItems);
    waiting = batch === waiting ? [] : waiting.slice(opts.maxItems);
    // A batch holds the items of many callers: it is none of their traces' (detached).
    flushing = detached(async () => {
      await flushBatch(batch);
      settled += batch.length;
      flushing = null;
      // What came meanwhile goes once its first item has waited the delay, or at once when full.
      later();
    });
  };

  /** Starts the next batch at once if it is due (full, or its first item has waited the delay), else when it is. */
  const later = (): void => {
    const first = waiting[0];
    if (first === undefined) return;
    const left = opts.maxDelayMs - (performance.now() - first.at);
    if (waiting.length >= opts.maxItems || left <= 0) start();
    else if (!timer) {
      timer = setTimeout(start, left);
      timer.unref();
    }
  };

  return {
    add(item) {
      added++;
      return new Promise<void>((resolve, reject) => {
        waiting.push({ item, at: performance.now(), resolve, reject });
        if (!flushing) later();
      });
    },
    /** Flushes what was added before this call without waiting for the delay; resolves once its batches ended. */
    async flushNow() {
      const upTo = added;
      while (settled < upTo) {
        start();
        await flushing;
      }
    },
    /** Items added whose batch has not ended yet: waiting for their batch, or in the flush running. */
    size: () => added - settled,
  };
}
