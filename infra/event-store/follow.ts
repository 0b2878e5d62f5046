import type { Kysely } from 'kysely';
import type { DbHandle } from '../db/open.ts';
import type { Database } from '../db/schema.ts';
import { headPosition, readBatch } from './log.ts';
import type { LogPosition, NewEvent, StoredEvent } from './types.ts';

/*
 * A follower of the global log in this process, from its head when it starts: no checkpoint, nothing
 * replayed, each event of its types handed over once, in log order, never skipped (readBatch's horizon).
 * For what only needs to know of appends while it runs (the MCP server's change notifications); a
 * read model that must see every event is an async projector instead.
 */

export type LogFollower = {
  /** Resolves once the follower knows where the log's head was when it started. */
  ready: Promise<void>;
  stop(): Promise<void>;
};

const BATCH = 500;
/** How soon a read that saw events held back looks again. */
const HELD_BACK_MS = 50;

/**
 * Follows the log from its head now: woken by the appends' wake-ups (this process's and the others',
 * `onAppended`), and polled every `pollMs` for events whose wake-up came before they could be read (held
 * back behind an older transaction still appending).
 */
export function followLog<E extends NewEvent>(opts: {
  handle: Pick<DbHandle, 'onAppended'> & { db: Kysely<Database> };
  types: readonly string[];
  onEvent: (event: StoredEvent<E>) => void;
  onError: (error: unknown) => void;
  pollMs?: number;
}): LogFollower {
  const { handle, types, onEvent, onError } = opts;
  const pollMs = opts.pollMs ?? 1000;
  let stopped = false;
  let dirty = true;
  let wake: (() => void) | null = null;
  const unsubscribe = handle.onAppended((appended) => {
    if (appended === null || appended.some((type) => types.includes(type))) {
      dirty = true;
      wake?.();
    }
  });
  let position: LogPosition | null = null;
  const ready = headPosition(handle.db).then((head) => {
    position = head;
  });
  const loop = (async () => {
    await ready.catch(onError);
    while (!stopped) {
      let heldBack = false;
      let failed = false;
      if (position === null) {
        position = await headPosition(handle.db).catch((error: unknown) => {
          onError(error);
          return null;
        });
      } else if (dirty) {
        dirty = false;
        try {
          const from: LogPosition = position;
          const batch = await readBatch<E>(handle.db, from, BATCH, types);
          for (const event of batch.events) {
            try {
              onEvent(event);
            } catch (error) {
              onError(error);
            }
          }
          position = batch.through;
          if (batch.events.length === BATCH) dirty = true;
          heldBack = batch.heldBack;
        } catch (error) {
          dirty = true;
          failed = true;
          onError(error);
        }
      }
      // Woken while reading (or a full batch): read again at once; after a failure, at the next poll.
      if (stopped || (dirty && position !== null && !failed)) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(
          () => {
            dirty = true;
            resolve();
          },
          heldBack ? HELD_BACK_MS : pollMs,
        );
        timer.unref();
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  })();
  return {
    ready,
    async stop() {
      stopped = true;
      unsubscribe();
      wake?.();
      await loop;
    },
  };
}
