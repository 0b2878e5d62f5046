import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { latenessBySecond, perSecond, startLateness } from '../../bench/write.ts';

describe('the write benchmark: how late the server thread kept a timer, by second', () => {
  it('takes the longest lateness of each second from the start of the measured part', () => {
    const from = performance.timeOrigin + 1_000;
    const at = (msAfterStart: number): number => from + msAfterStart - performance.timeOrigin;
    const late = latenessBySecond(
      [
        { at: at(-5), lateMs: 90 },
        { at: at(10), lateMs: 0.04 },
        { at: at(990), lateMs: 3.26 },
        { at: at(1_005), lateMs: 80.04 },
        { at: at(1_500), lateMs: 2 },
      ],
      from,
    );
    expect([...late]).toEqual([
      [0, 3.3],
      [1, 80],
    ]);
    const seconds = perSecond([4, 5, 90], [100, 200, 1_200], new Map(), late);
    expect(seconds.map((s) => [s.second, s.max_ms, s.thread_late_ms])).toEqual([
      [0, 5, 3.3],
      [1, 90, 80],
    ]);
  });

  it('sees a stretch in which the thread runs without a break', async () => {
    const lateness = startLateness();
    await new Promise((resolve) => setTimeout(resolve, 30));
    const busyUntil = performance.now() + 60;
    while (performance.now() < busyUntil) {
      // the thread held for 60 ms
    }
    await new Promise((resolve) => setTimeout(resolve, 30));
    const samples = lateness.stop();
    expect(Math.max(...samples.map((s) => s.lateMs))).toBeGreaterThanOrEqual(40);
  });
});
