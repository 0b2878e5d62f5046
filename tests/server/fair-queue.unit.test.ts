import { describe, expect, it } from 'vitest';
import { createFairQueue, type FairQueue } from '../../apps/server/http/fair-queue.ts';

/*
 * The heavy-work queue shares its turns between owners (accounts): each owner has a bounded number of
 * requests waiting, turns go round between the owners with requests waiting, and one owner's requests
 * never fill the queue for another.
 */

const never = (): AbortSignal => new AbortController().signal;

/** Asks for a turn as `owner`, recording it in `order` when granted and in `refused` when not. */
function ask(
  queue: FairQueue,
  owner: string,
  name: string,
  log: { order: string[]; refused: string[] },
  signal = never(),
): Promise<boolean> {
  return queue.take(owner, signal).then((granted) => {
    (granted ? log.order : log.refused).push(name);
    return granted;
  });
}

/** Lets the promises settled so far run their callbacks. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('the fair queue of heavy work', () => {
  it('hands turns round between owners, first come first served within each', async () => {
    const queue = createFairQueue({ atOnce: 1, waitingMax: 64, waitingPerOwner: 4 });
    const log = { order: [] as string[], refused: [] as string[] };
    void ask(queue, 'a', 'a0', log);
    for (const name of ['a1', 'a2', 'a3', 'a4']) void ask(queue, 'a', name, log);
    void ask(queue, 'b', 'b1', log);
    void ask(queue, 'b', 'b2', log);
    void ask(queue, 'c', 'c1', log);
    await settle();
    expect(log.order).toEqual(['a0']);
    expect(queue.waiting()).toBe(7);
    // Each turn given back goes to the owner served least recently (b and c were never served).
    const owners: Record<string, string> = { a: 'a', b: 'b', c: 'c' };
    for (let i = 0; i < 7; i++) {
      const last = log.order.at(-1) ?? '';
      queue.give(owners[last.slice(0, 1)] ?? '');
      await settle();
    }
    expect(log.order).toEqual(['a0', 'b1', 'c1', 'a1', 'b2', 'a2', 'a3', 'a4']);
    expect(log.refused).toEqual([]);
    expect(queue.waiting()).toBe(0);
  });

  it("refuses an owner's requests beyond its own cap at once, and no other owner's", async () => {
    const queue = createFairQueue({ atOnce: 1, waitingMax: 64, waitingPerOwner: 4 });
    const log = { order: [] as string[], refused: [] as string[] };
    void ask(queue, 'a', 'a0', log);
    for (let i = 1; i <= 10; i++) void ask(queue, 'a', `a${i}`, log);
    void ask(queue, 'b', 'b1', log);
    await settle();
    expect(log.refused).toEqual(['a5', 'a6', 'a7', 'a8', 'a9', 'a10']);
    expect(queue.waiting('a')).toBe(4);
    expect(queue.waiting('b')).toBe(1);
    // The next turn is b's, though a's four were waiting before it.
    queue.give('a');
    await settle();
    expect(log.order).toEqual(['a0', 'b1']);
  });

  it('never refuses an owner with nothing waiting while another owner has several waiting: that owner gives up its latest place', async () => {
    // A full queue of 8: four owners' 2 each would leave no room; here a alone has 4 and b, c 2 each.
    const queue = createFairQueue({ atOnce: 1, waitingMax: 8, waitingPerOwner: 4 });
    const log = { order: [] as string[], refused: [] as string[] };
    void ask(queue, 'x', 'x0', log);
    for (const name of ['a1', 'a2', 'a3', 'a4']) void ask(queue, 'a', name, log);
    for (const name of ['b1', 'b2']) void ask(queue, 'b', name, log);
    for (const name of ['c1', 'c2']) void ask(queue, 'c', name, log);
    await settle();
    expect(queue.waiting()).toBe(8);
    void ask(queue, 'd', 'd1', log);
    await settle();
    // a, with the most waiting, lost its latest place to d.
    expect(log.refused).toEqual(['a4']);
    expect(queue.waiting('a')).toBe(3);
    expect(queue.waiting('d')).toBe(1);
    // With a's 3 against b's 2, a newcomer of b is refused: taking a's place would not even the shares.
    void ask(queue, 'b', 'b3', log);
    await settle();
    expect(log.refused).toEqual(['a4', 'b3']);
  });

  it('refuses a newcomer when every owner waiting has a single request waiting and the queue is full', async () => {
    const queue = createFairQueue({ atOnce: 1, waitingMax: 2, waitingPerOwner: 4 });
    const log = { order: [] as string[], refused: [] as string[] };
    void ask(queue, 'x', 'x0', log);
    void ask(queue, 'a', 'a1', log);
    void ask(queue, 'b', 'b1', log);
    void ask(queue, 'c', 'c1', log);
    await settle();
    expect(log.refused).toEqual(['c1']);
  });

  it('lets a request that gives up leave its place, and forgets owners with nothing waiting or running', async () => {
    const queue = createFairQueue({ atOnce: 1, waitingMax: 64, waitingPerOwner: 1 });
    const log = { order: [] as string[], refused: [] as string[] };
    void ask(queue, 'a', 'a0', log);
    const leaving = new AbortController();
    void ask(queue, 'a', 'a1', log, leaving.signal);
    await settle();
    expect(queue.waiting('a')).toBe(1);
    leaving.abort();
    await settle();
    expect(log.refused).toEqual(['a1']);
    expect(queue.waiting()).toBe(0);
    // Its place is free again for the same owner.
    void ask(queue, 'a', 'a2', log);
    queue.give('a');
    await settle();
    expect(log.order).toEqual(['a0', 'a2']);
    queue.give('a');
    // All turns back: the next request runs at once.
    expect(await queue.take('b', never())).toBe(true);
  });

  it('with no turns and no places, refuses everything', async () => {
    const queue = createFairQueue({ atOnce: 0, waitingMax: 0, waitingPerOwner: 4 });
    expect(await queue.take('a', never())).toBe(false);
    expect(queue.waiting()).toBe(0);
  });
});
