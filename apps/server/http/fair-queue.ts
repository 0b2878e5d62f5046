/*
 * Turns shared fairly between owners (accounts): what heavy work (heavy-work.ts) waits in.
 *
 * - `atOnce` turns are held at once; the others wait, at most `waitingMax` in all and at most
 *   `waitingPerOwner` of one owner. An owner's request beyond its own cap is refused at once.
 * - A freed turn goes to the owner with waiting requests that was served least recently (an owner
 *   not served since it last had nothing waiting or running comes first, in order of arrival); within
 *   an owner, first come first served. With several owners waiting, turns go round between them: an
 *   owner's request waits behind at most one request of each other owner (and the turns running).
 * - When `waitingMax` already wait, a newcomer whose owner has at least two fewer waiting than the
 *   owner with the most takes that owner's latest place (that request is refused instead): one owner
 *   cannot fill the queue for the others, and an owner with nothing waiting is refused only when every
 *   owner waiting has a single request waiting.
 *
 * The queue remembers only owners with a request waiting or holding a turn.
 */

export type FairQueue = {
  /**
   * True once a turn is `owner`'s; false when `owner` already has `waitingPerOwner` waiting, when the
   * queue is full and `owner` may not take a place, when `signal` ends the wait first, or when a
   * newcomer of an owner with fewer waiting took this request's place.
   */
  take(owner: string, signal: AbortSignal): Promise<boolean>;
  /** Gives back a turn `owner` took: to the next owner's first waiting request, if any. */
  give(owner: string): void;
  /** How many requests wait: in all, or of one owner. */
  waiting(owner?: string): number;
};

export type FairQueueOptions = {
  /** Turns held at once. */
  atOnce: number;
  /** Requests waiting, in all. */
  waitingMax: number;
  /** Requests waiting, of one owner. */
  waitingPerOwner: number;
};

type Waiter = { grant(): void; refuse(): void };
type Owner = { waiting: Waiter[]; running: number; servedAt: number };

export function createFairQueue(opts: FairQueueOptions): FairQueue {
  let free = opts.atOnce;
  let total = 0;
  /** Counts the turns given: an owner's `servedAt` is the count when it last got one (0: not since it came). */
  let served = 0;
  /** Owners with a request waiting or holding a turn, in order of arrival. */
  const owners = new Map<string, Owner>();

  const ownerOf = (name: string): Owner => {
    let owner = owners.get(name);
    if (!owner) {
      owner = { waiting: [], running: 0, servedAt: 0 };
      owners.set(name, owner);
    }
    return owner;
  };
  const forgetIfIdle = (name: string, owner: Owner): void => {
    if (owner.running === 0 && owner.waiting.length === 0 && owners.get(name) === owner) owners.delete(name);
  };
  const serve = (owner: Owner): void => {
    owner.running++;
    served++;
    owner.servedAt = served;
  };
  /** The owner whose latest waiting request a newcomer of `newcomer` may take the place of, if any. */
  const displaceable = (newcomer: Owner | undefined): Owner | null => {
    let most: Owner | null = null;
    for (const owner of owners.values()) {
      if (!most || owner.waiting.length > most.waiting.length) most = owner;
    }
    const mine = newcomer?.waiting.length ?? 0;
    return most && most.waiting.length >= mine + 2 ? most : null;
  };

  return {
    take(name, signal) {
      if (signal.aborted) return Promise.resolve(false);
      if (free > 0) {
        free--;
        serve(ownerOf(name));
        return Promise.resolve(true);
      }
      const known = owners.get(name);
      if ((known?.waiting.length ?? 0) >= opts.waitingPerOwner) return Promise.resolve(false);
      if (total >= opts.waitingMax) {
        const displaced = displaceable(known)?.waiting.pop();
        if (!displaced) return Promise.resolve(false);
        total--;
        displaced.refuse();
      }
      const owner = ownerOf(name);
      return new Promise((resolve) => {
        const leave = (): void => {
          const at = owner.waiting.indexOf(waiter);
          if (at >= 0) {
            owner.waiting.splice(at, 1);
            total--;
          }
          forgetIfIdle(name, owner);
        };
        const gaveUp = (): void => {
          leave();
          resolve(false);
        };
        const waiter: Waiter = {
          grant() {
            signal.removeEventListener('abort', gaveUp);
            resolve(true);
          },
          refuse() {
            signal.removeEventListener('abort', gaveUp);
            forgetIfIdle(name, owner);
            resolve(false);
          },
        };
        owner.waiting.push(waiter);
        total++;
        signal.addEventListener('abort', gaveUp, { once: true });
      });
    },
    give(name) {
      const owner = owners.get(name);
      if (owner) {
        owner.running--;
        forgetIfIdle(name, owner);
      }
      let next: Owner | null = null;
      for (const candidate of owners.values()) {
        if (candidate.waiting.length > 0 && (!next || candidate.servedAt < next.servedAt)) next = candidate;
      }
      const waiter = next?.waiting.shift();
      if (!next || !waiter) {
        free++;
        return;
      }
      total--;
      serve(next);
      waiter.grant();
    },
    waiting(name) {
      return name === undefined ? total : (owners.get(name)?.waiting.length ?? 0);
    },
  };
}
