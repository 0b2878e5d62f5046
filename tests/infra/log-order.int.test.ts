import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headPosition, readAllEvents, START } from '../../infra/event-store.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';

/*
 * The global log is ordered by transaction id as a number. Transaction ids come back as text; ordering
 * by that text would put 10 before 9 (and 100000 before 99999): readers would re-read some events and
 * never read others. Events are written here with chosen (old, hence visible) transaction ids.
 */
describe.each(backends)('the global log orders transaction ids as numbers on %s', (backend) => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase(backend);
  });
  afterAll(async () => test.drop());

  it('reads 9 before 10, and 10 is the head', async () => {
    const db = test.handle.db;
    for (const [xid, stream] of [
      ['10', 'order-b'],
      ['9', 'order-a'],
    ] as const) {
      await sql`insert into events (event_id, stream_id, version, type, data, metadata, transaction_id)
        values (gen_random_uuid(), ${stream}, 1, 'Probe', '{}', ${JSON.stringify({ at: new Date().toISOString() })}, ${xid}::xid8)`.execute(
        db,
      );
    }
    const events = await readAllEvents(db, START, 10, { types: ['Probe'] });
    expect(events.map((e) => e.transactionId)).toEqual([9n, 10n]);
    const after9 = await readAllEvents(db, { transactionId: 9n, position: events[0]?.position ?? 0n }, 10, {
      types: ['Probe'],
    });
    expect(after9.map((e) => e.streamId)).toEqual(['order-b']);
    const head = await headPosition(db);
    expect(head.transactionId).toBeGreaterThanOrEqual(10n);
  });
});
