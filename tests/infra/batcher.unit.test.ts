import { describe, expect, it, vi } from 'vitest';
import { createBatcher } from '../../infra/batcher.ts';

/** A batcher whose first flush is held until `release()`; every flush's items in `batches`. */
function withHeldFirstFlush(opts: { maxItems: number; maxDelayMs: number }) {
  const batches: number[][] = [];
  let release: () => void = () => {};
  const batcher = createBatcher<number>(async (items) => {
    batches.push(items);
    if (batches.length === 1) await new Promise<void>((r) => (release = r));
  }, opts);
  return { batcher, batches, release: () => release() };
}

describe('batcher', () => {
  it('flushes items added together as one batch, and each add resolves with its batch', async () => {
    const batches: number[][] = [];
    const b = createBatcher<number>(async (items) => void batches.push(items), {
      maxItems: 100,
      maxDelayMs: 5,
    });
    await Promise.all([b.add(1), b.add(2), b.add(3)]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('flushes at maxItems without waiting, and one flush at a time in order', async () => {
    const batches: number[][] = [];
    let inFlight = 0;
    const b = createBatcher<number>(
      async (items) => {
        inFlight++;
        expect(inFlight).toBe(1);
        await new Promise((r) => setTimeout(r, 2));
        batches.push(items);
        inFlight--;
      },
      { maxItems: 2, maxDelayMs: 10_000 },
    );
    await Promise.all([1, 2, 3, 4].map((n) => b.add(n)));
    expect(batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
  });

  it('rejects every add of a failed batch, and later batches still run', async () => {
    let fail = true;
    const b = createBatcher<number>(
      async () => {
        if (fail) throw new Error('down');
      },
      { maxItems: 10, maxDelayMs: 1 },
    );
    const results = await Promise.allSettled([b.add(1), b.add(2)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    await expect(b.add(3)).resolves.toBeUndefined();
  });

  it('rejects only the adds the flush names as failed; the others resolve', async () => {
    const b = createBatcher<number>(
      async (items) => items.map((n) => (n === 2 ? new Error('bad 2') : null)),
      {
        maxItems: 10,
        maxDelayMs: 1,
      },
    );
    const results = await Promise.allSettled([b.add(1), b.add(2), b.add(3)]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toEqual(new Error('bad 2'));
  });

  it('gathers what comes during a slow flush into the next batch, not a queue of small ones', async () => {
    const { batcher: b, batches, release } = withHeldFirstFlush({ maxItems: 3, maxDelayMs: 1 });
    const first = b.add(1);
    await new Promise((r) => setTimeout(r, 10)); // the first flush is running, held
    // One at a time, each more than a delay after the one before: nothing more is flushed meanwhile.
    const rest: Promise<void>[] = [];
    for (const n of [2, 3, 4, 5, 6, 7]) {
      rest.push(b.add(n));
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(batches).toEqual([[1]]);
    release();
    await Promise.all([first, ...rest]);
    // Then the waiting items go together, at most maxItems a batch.
    expect(batches).toEqual([[1], [2, 3, 4], [5, 6, 7]]);
  });

  it('flushNow stores what was added before it without waiting for the delay', async () => {
    const batches: number[][] = [];
    const b = createBatcher<number>(async (items) => void batches.push(items), {
      maxItems: 100,
      maxDelayMs: 60_000,
    });
    const added = [b.add(1), b.add(2)];
    await b.flushNow();
    expect(batches).toEqual([[1, 2]]);
    await Promise.all(added);
    await b.flushNow(); // nothing waiting: resolves at once
    expect(batches).toEqual([[1, 2]]);
  });
  it('under a steady stream, a flush shorter than the delay does not make a queue of small ones: each batch holds what came in the delay', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const batches: number[][] = [];
      // Each flush takes 5 ms.
      const b = createBatcher<number>(
        async (items) => {
          batches.push(items);
          await new Promise((r) => setTimeout(r, 5));
        },
        { maxItems: 1000, maxDelayMs: 20 },
      );
      const added: Promise<void>[] = [];
      // One item a millisecond for 100 ms.
      for (let n = 0; n < 100; n++) {
        added.push(b.add(n));
        await vi.advanceTimersByTimeAsync(1);
      }
      await vi.advanceTimersByTimeAsync(30);
      await Promise.all(added);
      expect(batches.flat()).toEqual(Array.from({ length: 100 }, (_, n) => n));
      // A batch goes 20 ms after its first item: five batches of twenty, not a hundred of one.
      expect(batches.map((batch) => batch.length)).toEqual([20, 20, 20, 20, 20]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('what came during a flush goes when its first item has waited the delay, not before', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const { batcher: b, batches, release } = withHeldFirstFlush({ maxItems: 100, maxDelayMs: 50 });
      const added = [b.add(1)];
      await vi.advanceTimersByTimeAsync(50); // the first batch is flushing, held
      expect(batches).toEqual([[1]]);
      added.push(b.add(2));
      await vi.advanceTimersByTimeAsync(10);
      release(); // ends 10 ms after 2 came: 2 waits 40 ms more
      await vi.advanceTimersByTimeAsync(39);
      expect(batches).toEqual([[1]]);
      await vi.advanceTimersByTimeAsync(1);
      expect(batches).toEqual([[1], [2]]);
      await Promise.all(added);
    } finally {
      vi.useRealTimers();
    }
  });
});
