import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { activityStream, type CallRecorded } from '../../domain/activity/events.ts';
import * as migration from '../../infra/db/migrations/2026-11-26-016-request-ids-and-staff-searches.ts';
import { newId } from '../../infra/ids.ts';
import { rebuild } from '../../infra/projection-runner.ts';
import { activityProjector, listActivity } from '../../projections/activity.ts';
import { backends } from '../support/db.ts';
import { apiKeyActor, createTestRuntime, setUpAccount } from '../support/runtime.ts';

/*
 * Records made when a client's valid X-Request-Id became the request id (their events carry no
 * `clientRequestId`): a value the service could not have made is the client's. Migration 016 moves it
 * to `client_request_id` in the rows there are, and the projector does the same on a replay.
 */
describe.each(backends)('request ids of older records (migration 016) on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  }, 60_000);
  afterAll(async () => drop?.());

  it("keeps a client's id out of request_id, in the migrated rows and in a rebuild alike", async () => {
    const { accountId } = await setUpAccount(runtime);
    const serviceMade = newId('req');
    const recorded = (requestId: string | null): CallRecorded => ({
      type: 'CallRecorded',
      data: {
        activityId: newId('act'),
        accountId,
        source: 'api',
        actor: apiKeyActor,
        operation: 'list_sites',
        siteId: null,
        articleId: null,
        status: 200,
        requestId,
        durationMs: 1,
      },
      metadata: { at: new Date().toISOString() },
    });
    await runtime.store.append(
      activityStream(accountId),
      [recorded(serviceMade), recorded('req_victim123'), recorded('checkout-7f3a'), recorded(null)],
      { expectedVersion: 'any' },
    );
    const ids = async (): Promise<[string | null, string | null][]> =>
      (await listActivity(runtime.db, accountId, { page: 1, perPage: 100 })).rows
        .map((r): [string | null, string | null] => [r.request_id, r.client_request_id])
        .sort((a, b) => String(a).localeCompare(String(b)));
    const older = [
      [serviceMade, null],
      [null, 'req_victim123'],
      [null, 'checkout-7f3a'],
      [null, null],
    ];
    const projected = await ids();
    expect(projected).toHaveLength(4);
    expect(projected).toEqual(expect.arrayContaining(older));

    // As before the migration (the rows as an older service wrote them), then migrated.
    await migration.down(runtime.db);
    await migration.up(runtime.db);
    expect(await ids()).toEqual(projected);

    // A record of today names both; a rebuild gives every row again.
    await runtime.commands.recordCall({
      ...recorded(newId('req')).data,
      clientRequestId: 'req_06h017my4x3zamww4jk51y2p4c',
    });
    const all = await ids();
    expect(all).toHaveLength(5);
    expect(all).toEqual(
      expect.arrayContaining([...older, [expect.stringMatching(/^req_/), 'req_06h017my4x3zamww4jk51y2p4c']]),
    );
    await rebuild(runtime.db, activityProjector);
    expect(await ids()).toEqual(all);
  });
});
