import { describe, expect, it } from 'vitest';
import { createCommitGroup } from '../../infra/commit-group.ts';

/** A send that the test ends by hand: what each send was given, and a way to end the oldest running one. */
function manualSends() {
  const sent: number[][] = [];
  const running: (() => void)[] = [];
  return {
    sent,
    send: (items: number[]) => {
      sent.push(items);
      return new Promise<void>((resolve) => running.push(resolve));
    },
    async endOldest(): Promise<void> {
      running.shift()?.();
      // The group sends the next items when the ended send's promise settles.
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

describe('the commit group', () => {
  it('sends at once while fewer than its limit are in flight, and what waits together after', async () => {
    const sends = manualSends();
    const group = createCommitGroup({ maxInFlight: 2, maxItems: 10, send: sends.send });
    for (let i = 1; i <= 7; i++) group.add(i);
    expect(sends.sent).toEqual([[1], [2]]);
    expect(group.waiting).toBe(5);
    expect(group.inFlight).toBe(2);
    await sends.endOldest();
    expect(sends.sent).toEqual([[1], [2], [3, 4, 5, 6, 7]]);
    group.add(8);
    expect(group.waiting).toBe(1);
    await sends.endOldest();
    await sends.endOldest();
    await sends.endOldest();
    expect(sends.sent).toEqual([[1], [2], [3, 4, 5, 6, 7], [8]]);
    expect(group.inFlight).toBe(0);
    // Idle again: the next goes at once, alone.
    group.add(9);
    expect(sends.sent.at(-1)).toEqual([9]);
  });

  it('sends at most its item limit at a time', async () => {
    const sends = manualSends();
    const group = createCommitGroup({ maxInFlight: 1, maxItems: 3, send: sends.send });
    for (let i = 1; i <= 8; i++) group.add(i);
    await sends.endOldest();
    await sends.endOldest();
    await sends.endOldest();
    expect(sends.sent).toEqual([[1], [2, 3, 4], [5, 6, 7], [8]]);
  });

  it('goes on after a send that fails', async () => {
    const sent: number[][] = [];
    let fail = true;
    const group = createCommitGroup({
      maxInFlight: 1,
      maxItems: 10,
      send: async (items: number[]) => {
        sent.push(items);
        if (fail) {
          fail = false;
          throw new Error('a send that forgot to answer its items');
        }
      },
    });
    group.add(1);
    group.add(2);
    await expect.poll(() => sent).toEqual([[1], [2]]);
    await expect.poll(() => group.inFlight).toBe(0);
  });

  it('refuses limits that would send nothing', () => {
    const send = async () => {};
    expect(() => createCommitGroup({ maxInFlight: 0, maxItems: 1, send })).toThrow(RangeError);
    expect(() => createCommitGroup({ maxInFlight: 1, maxItems: 0, send })).toThrow(RangeError);
  });
});
