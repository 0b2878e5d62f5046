import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createEventStore,
  type EventStore,
  type LogPosition,
  type NewEvent,
  readBatch,
  readCheckpoint,
} from '../../infra/event-store.ts';
import type { AsyncProjector } from '../../infra/projection.ts';
import { applyNextBatch, startAsyncProjections } from '../../infra/projection-runner.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { openAppendingTransaction } from '../support/log.ts';
import { PATIENCE } from '../support/wait.ts';

const event = (type: string): NewEvent => ({ type, data: {}, metadata: { at: '2026-11-21T10:00:00.000Z' } });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** An async projector of `types` that remembers the ids of the events it applied. */
function recorder(types: string[]): AsyncProjector<NewEvent> & { seen: string[] } {
  const seen: string[] = [];
  return {
    name: `test-${randomUUID()}`,
    mode: 'async',
    handles: types,
    tables: [],
    seen,
    project(events) {
      seen.push(...events.map((event) => event.eventId));
      return [];
    },
  };
}

const atOrAfter = (a: LogPosition, b: LogPosition): boolean =>
  a.transactionId > b.transactionId || (a.transactionId === b.transactionId && a.position >= b.position);

async function until(
  check: () => Promise<boolean> | boolean,
  what: string,
  ms = PATIENCE.timeout,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe.each(backends)('async projection runner on %s', (backend) => {
  let testDb: TestDatabase;
  let store: EventStore<NewEvent>;
  beforeAll(async () => {
    testDb = await createTestDatabase(backend);
    store = createEventStore<NewEvent>({ db: testDb.handle.db, handle: testDb.handle, validate: () => {} });
  }, 60_000);
  afterAll(async () => testDb?.drop());

  it("moves a projector's checkpoint past the events it does not handle", async () => {
    const { db } = testDb.handle;
    const projector = recorder([`Rare${randomUUID().slice(0, 8)}`]);
    const { events } = await store.append(`article-${randomUUID()}`, [event('Other'), event('Other')], {
      expectedVersion: 'no_stream',
    });
    const last = events.at(-1);
    if (!last) throw new Error('nothing appended');
    // Its next read starts after them: it does not scan them again on every batch.
    await until(async () => {
      expect((await applyNextBatch(db, projector)).applied).toBe(0);
      return atOrAfter(await readCheckpoint(db, projector.name), last);
    }, 'the checkpoint to move');
    expect(projector.seen).toEqual([]);
  });

  // PostgreSQL only: PGlite has one connection, so no transaction can stay open while another appends.
  it.runIf(backend === 'postgres')(
    'applies an event its wake-up found held back behind an open transaction once that ends, with no other wake-up',
    async () => {
      const { db } = testDb.handle;
      const a = recorder([`A${randomUUID().slice(0, 8)}`]);
      const type = a.handles[0] as string;
      // One wake-up for the event, the append's own: the NOTIFY that echoes it later is not passed on.
      let woken = false;
      const runner = startAsyncProjections({
        handle: {
          db,
          onAppended: (listener) =>
            testDb.handle.onAppended((types) => {
              if (woken || !types?.includes(type)) return;
              woken = true;
              listener(types);
            }),
        },
        projectors: [a],
        pollMs: 600_000,
        settleMs: 0,
      });
      // A transaction appending to the log (another stream), open while the event is appended and its
      // wake-up read: the event's transaction is younger, so it waits for that one to end.
      await runner.idle();
      const open = await openAppendingTransaction(db);
      try {
        const appended = await store.append(`article-${randomUUID()}`, [event(type)], {
          expectedVersion: 'no_stream',
        });
        expect(woken).toBe(true);
        // The wake-up's read sees the event held back (its checkpoint stays before it).
        await until(async () => {
          const { heldBack } = await readBatch(db, await readCheckpoint(db, a.name), 10, a.handles);
          return heldBack;
        }, 'the event to be held back');
        expect(a.seen).toEqual([]);
        await open.rollback().execute();
        await until(() => a.seen.length === 1, 'the projector to apply the event the transaction held back');
        expect(a.seen).toEqual([appended.events[0]?.eventId]);
      } finally {
        await open
          .rollback()
          .execute()
          .catch(() => {});
        await runner.stop();
      }
    },
  );

  it('wakes a projector for appends of the types it handles, not for others', async () => {
    const { db } = testDb.handle;
    const a = recorder([`A${randomUUID().slice(0, 8)}`]);
    const b = recorder([`B${randomUUID().slice(0, 8)}`]);
    // No poll within the test: only wake-ups run the projectors.
    const runner = startAsyncProjections({
      handle: testDb.handle,
      projectors: [a, b],
      pollMs: 600_000,
      settleMs: 0,
    });
    try {
      await runner.idle();
      const bBefore = await readCheckpoint(db, b.name);
      const appended = await store.append(`article-${randomUUID()}`, [event(a.handles[0] as string)], {
        expectedVersion: 'no_stream',
      });
      await until(() => a.seen.length === 1, 'the projector of A to apply its event');
      expect(a.seen).toEqual([appended.events[0]?.eventId]);
      await sleep(200);
      // b was not woken, so it has not read past the A event.
      expect(await readCheckpoint(db, b.name)).toEqual(bBefore);

      const forB = await store.append(`article-${randomUUID()}`, [event(b.handles[0] as string)], {
        expectedVersion: 'no_stream',
      });
      await until(() => b.seen.length === 1, 'the projector of B to apply its event');
      expect(b.seen).toEqual([forB.events[0]?.eventId]);
      expect(a.seen).toHaveLength(1);
    } finally {
      await runner.stop();
    }
  });
});
