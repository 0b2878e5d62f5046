/*
 * Group commit: work that arrives while the database is busy with earlier work goes to it together.
 * An item added while fewer than `maxInFlight` sends are running is sent at once, alone (no timer, no
 * wait: an idle service answers as fast as without the group). Items added while that many are running
 * wait, and go together, up to `maxItems` at a time, as soon as one of them ends: the busier the
 * database, the larger the groups, never a queue of small sends.
 *
 * `send` settles every item it is given (each item carries its own way to answer); the group only
 * decides which items go together.
 */
export type CommitGroup<T> = { add(item: T): void; readonly waiting: number; readonly inFlight: number };

export function createCommitGroup<T>(opts: {
  maxInFlight: number;
  maxItems: number;
  send: (items: T[]) => Promise<void>;
}): CommitGroup<T> {
  const { maxInFlight, maxItems, send } = opts;
  if (!Number.isSafeInteger(maxInFlight) || maxInFlight < 1) {
    throw new RangeError(`a commit group needs at least one send in flight, not ${maxInFlight}`);
  }
  if (!Number.isSafeInteger(maxItems) || maxItems < 1) {
    throw new RangeError(`a commit group needs at least one item a send, not ${maxItems}`);
  }
  let waiting: T[] = [];
  let inFlight = 0;
  const pump = (): void => {
    while (inFlight < maxInFlight && waiting.length > 0) {
      const items = waiting.length <= maxItems ? waiting : waiting.slice(0, maxItems);
      waiting = waiting.length <= maxItems ? [] : waiting.slice(maxItems);
      inFlight++;
      // `send` answers each item; a throw of its own is a bug, and must not stop the group.
      send(items)
        .catch(() => undefined)
        .finally(() => {
          inFlight--;
          pump();
        });
    }
  };
  return {
    add(item) {
      waiting.push(item);
      pump();
    },
    get waiting() {
      return waiting.length;
    },
    get inFlight() {
      return inFlight;
    },
  };
}
