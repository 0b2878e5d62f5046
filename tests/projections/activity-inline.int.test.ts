import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { readBatch, readCheckpoint, writeCheckpoint } from '../../infra/event-store.ts';
import { projectionStatus, retireCheckpoint } from '../../infra/projection-runner.ts';
import { activityProjector, listActivity } from '../../projections/activity.ts';
import { backends } from '../support/db.ts';
import { openAppendingTransaction } from '../support/log.ts';
import { apiKeyActor, createTestRuntime, setUpAccount } from '../support/runtime.ts';

const call = (accountId: string, requestId: string) => ({
  accountId,
  source: 'api' as const,
  actor: apiKeyActor,
  operation: 'get_article',
  siteId: null,
  articleId: null,
  status: 200,
  requestId,
  durationMs: 3,
});

describe.each(backends)('the activity log, inline, on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  }, 60_000);
  afterAll(async () => drop?.());

  it('a recorded call is in the log once its record is stored: no projector to wait for', async () => {
    const { accountId } = await setUpAccount(runtime);
    const { activityId } = await runtime.commands.recordCall(call(accountId, 'req_inline'));
    const page = await listActivity(runtime.db, accountId, { page: 1, perPage: 100 });
    expect(page.rows.map((r) => r.id)).toContain(activityId);
    const [status] = await projectionStatus(runtime.db, [activityProjector]);
    expect(status).toMatchObject({ mode: 'inline', checkpoint: null, lag: 0 });
  });

  it("one event for a batch of an account's calls: the log grows by one row a batch, the activity by one a call", async () => {
    const { accountId } = await setUpAccount(runtime, 'Batched Ltd');
    const recorded = await Promise.all(
      ['req_batch_1', 'req_batch_2', 'req_batch_3'].map((requestId) =>
        runtime.commands.recordCall({
          ...call(accountId, requestId),
          clientRequestId: `client-${requestId}`,
        }),
      ),
    );
    const events = await sql<{ type: string; data: { accountId: string; calls: { activityId: string }[] } }>`
      select type, data from events where stream_id = ${`activity-${accountId}`} order by version`
      .execute(runtime.db)
      .then((r) => r.rows);
    expect(events).toHaveLength(1);
    expect(events[0]?.type).toBe('CallsRecorded');
    expect(events[0]?.data.accountId).toBe(accountId);
    expect(events[0]?.data.calls.map((c) => c.activityId)).toEqual(recorded.map((r) => r.activityId));
    const rows = (await listActivity(runtime.db, accountId, { page: 1, perPage: 100 })).rows;
    expect(rows.map((r) => [r.request_id, r.client_request_id]).sort()).toEqual([
      ['req_batch_1', 'client-req_batch_1'],
      ['req_batch_2', 'client-req_batch_2'],
      ['req_batch_3', 'client-req_batch_3'],
    ]);
  });

  it("a record the store refuses takes no other record down: its account's others and other accounts' are stored", async () => {
    const a = await setUpAccount(runtime, 'Refused Ltd');
    const b = await setUpAccount(runtime, 'Bystander Ltd');
    // PostgreSQL refuses U+0000 in JSON text; everything else in the batch is fine.
    const results = await Promise.allSettled([
      runtime.commands.recordCall(call(b.accountId, 'req_b_1')),
      runtime.commands.recordCall(call(a.accountId, 'req_a_good')),
      runtime.commands.recordCall({ ...call(a.accountId, 'req_a_bad'), articleId: 'art_\u0000' }),
      runtime.commands.recordCall(call(b.accountId, 'req_b_2')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    const requests = async (accountId: string): Promise<(string | null)[]> =>
      (await listActivity(runtime.db, accountId, { page: 1, perPage: 100 })).rows
        .map((r) => r.request_id)
        .sort();
    expect(await requests(a.accountId)).toEqual(['req_a_good']);
    expect(await requests(b.accountId)).toEqual(['req_b_1', 'req_b_2']);
  });

  it('stores one batch of many accounts’ records, appended a few accounts at a time, a refused one alone failing', async () => {
    const accounts = [];
    for (let i = 0; i < 10; i++) accounts.push(await setUpAccount(runtime, `Many ${i} Ltd`));
    const results = await Promise.allSettled(
      accounts.flatMap(({ accountId }, i) => [
        runtime.commands.recordCall(call(accountId, `req_${i}_1`)),
        i === 6
          ? runtime.commands.recordCall({ ...call(accountId, `req_${i}_bad`), articleId: 'art_\u0000' })
          : runtime.commands.recordCall(call(accountId, `req_${i}_2`)),
      ]),
    );
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1);
    for (const [i, { accountId }] of accounts.entries()) {
      const rows = (await listActivity(runtime.db, accountId, { page: 1, perPage: 100 })).rows;
      expect(rows.map((r) => r.request_id).sort()).toEqual(
        i === 6 ? ['req_6_1'] : [`req_${i}_1`, `req_${i}_2`],
      );
    }
  });

  it('retireCheckpoint applies what an async runner left unapplied, once, and removes the checkpoint', async () => {
    const { accountId } = await setUpAccount(runtime, 'Retired Ltd');
    const first = await runtime.commands.recordCall(call(accountId, 'req_before'));
    // On PostgreSQL, a transaction appending to the log held open (an import, a slow append): the
    // records after it are above the log's horizon, where a subscriber's read (readBatch) stops. They
    // are committed, and retiring applies them all the same.
    const appending = backend === 'postgres' ? await openAppendingTransaction(runtime.db) : null;
    try {
      await retireWhatWasLeft(first, accountId, appending !== null);
    } finally {
      await appending?.rollback().execute();
    }
  });

  /** The retirement of a checkpoint an async runner left after `first`; `held`: behind a transaction still appending. */
  async function retireWhatWasLeft(
    first: { activityId: string },
    accountId: string,
    held: boolean,
  ): Promise<void> {
    const { db } = runtime;
    // The database as the async projector left it: checkpoint after the first record, the next two
    // appended but not applied (their rows are not there).
    const [event] = await sql<{ position: string; transaction_id: string }>`
      select position, transaction_id::text as transaction_id from events
      where type = 'CallsRecorded' and data->'calls' @> ${JSON.stringify([{ activityId: first.activityId }])}::jsonb`
      .execute(db)
      .then((r) => r.rows);
    if (!event) throw new Error('the first record was not stored');
    const later = [
      await runtime.commands.recordCall(call(accountId, 'req_lost_1')),
      await runtime.commands.recordCall(call(accountId, 'req_lost_2')),
    ];
    await db
      .deleteFrom('activity')
      .where(
        'id',
        'in',
        later.map((l) => l.activityId),
      )
      .execute();
    const checkpoint = { transactionId: BigInt(event.transaction_id), position: BigInt(event.position) };
    await db.transaction().execute((trx) => writeCheckpoint(trx, activityProjector.name, checkpoint));
    if (held) {
      // What an async runner would read now: nothing yet.
      const batch = await readBatch(db, checkpoint, 100, activityProjector.handles);
      expect(batch).toMatchObject({ events: [], heldBack: true });
    }

    const applied = await retireCheckpoint(db, activityProjector);
    expect(applied).toBeGreaterThanOrEqual(2);
    const ids = (await listActivity(db, accountId, { page: 1, perPage: 100 })).rows.map((r) => r.id);
    expect(ids.filter((id) => id === first.activityId)).toHaveLength(1);
    for (const l of later) expect(ids.filter((id) => id === l.activityId)).toHaveLength(1);
    const left = await db
      .selectFrom('checkpoints')
      .select('name')
      .where('name', '=', activityProjector.name)
      .execute();
    expect(left).toEqual([]);
    expect(await readCheckpoint(db, activityProjector.name)).toEqual({ transactionId: 0n, position: 0n });
    // Nothing left to do the next time the service starts.
    expect(await retireCheckpoint(db, activityProjector)).toBe(0);
  }
});
