/** Slots handed out in order of asking, a bounded number waiting: what runs at most N at once. */
export type Slots = {
  /** True once a slot is this caller's; false when `waitingMax` already wait or `signal` ends the wait first. */
  take(signal: AbortSignal): Promise<boolean>;
  /** Gives a taken slot back (to the next waiting, if any). */
  give(): void;
};

/**
 * `size` slots; `take` waits for one (true) unless `waitingMax` wait already or `signal` ends the wait
 * first (false); `give` hands a taken slot to the next waiting.
 */
export function createSlots(size: number, waitingMax: number): Slots {
  let free = size;
  const waiting: Array<() => void> = [];
  return {
    take(signal: AbortSignal): Promise<boolean> {
      if (free > 0) {
        free--;
        return Promise.resolve(true);
      }
      if (waiting.length >= waitingMax || signal.aborted) return Promise.resolve(false);
      return new Promise((resolve) => {
        const granted = (): void => {
          signal.removeEventListener('abort', gaveUp);
          resolve(true);
        };
        const gaveUp = (): void => {
          const at = waiting.indexOf(granted);
          if (at >= 0) waiting.splice(at, 1);
          resolve(false);
        };
        waiting.push(granted);
        signal.addEventListener('abort', gaveUp, { once: true });
      });
    },
    give(): void {
      const next = waiting.shift();
      if (next) next();
      else free++;
    },
  };
}
