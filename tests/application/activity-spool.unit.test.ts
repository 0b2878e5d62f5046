import { describe, expect, it, vi } from 'vitest';
import { type CallEntry, createActivity } from '../../apps/application/activity.ts';
import { ActivityAbandoned, activityCommands } from '../../apps/application/commands/activity-batcher.ts';
import type { CommandContext } from '../../apps/application/commands/handler.ts';
import type { Commands } from '../../apps/application/commands/index.ts';
import { isDatabaseUnavailable } from '../../infra/db/unavailable.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * The activity records' spool: while the database cannot be reached, records wait in the process and
 * are written, in order, once it is back; at the spool's bound calls are to be refused; at shutdown
 * what the database has not taken by the deadline is given up and counted in one log line.
 */

type Appended = { stream: string; requestIds: (string | null)[] };

/** An event store whose database can be taken away: while `down`, an append fails as a refused connection. */
function storeWithOutage() {
  const state = { down: false, attempts: 0, appended: [] as Appended[] };
  const store = {
    async append(stream: string, events: Array<{ data: { calls: Array<{ requestId: string | null }> } }>) {
      state.attempts++;
      if (state.down) {
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      }
      state.appended.push({
        stream,
        requestIds: events.flatMap((e) => e.data.calls.map((c) => c.requestId)),
      });
      return [];
    },
  };
  return { state, store };
}

function commandsOn(store: ReturnType<typeof storeWithOutage>['store'], spoolMax?: number) {
  const context = {
    store,
    now: () => new Date('2026-11-05T12:00:00Z'),
    meta: () => ({ at: '2026-11-05T12:00:00.000Z' }),
    ...(spoolMax ? { activitySpoolMax: spoolMax } : {}),
  } as unknown as CommandContext;
  return activityCommands(context);
}

const call = (accountId: string, requestId: string) => ({
  accountId,
  source: 'api' as const,
  actor: { type: 'api_key' as const, id: 'key_1', name: 'Production' },
  operation: 'get_article',
  siteId: null,
  articleId: null,
  status: 503,
  requestId,
  durationMs: 2,
});

const entry = (accountId: string, requestId: string): CallEntry => ({
  ...call(accountId, requestId),
  subject: { siteId: null, articleId: null, revision: null },
});

/** Which of `promises` have settled so far. */
function watch(promises: Promise<unknown>[]): { settled: () => number } {
  let n = 0;
  for (const p of promises)
    p.then(
      () => n++,
      () => n++,
    );
  return { settled: () => n };
}

describe('the activity spool', () => {
  it('keeps the records of calls made while the database is away and writes them all, in order, once it is back', async () => {
    const { state, store } = storeWithOutage();
    const commands = commandsOn(store);
    state.down = true;
    const first = ['req_1', 'req_2', 'req_3'].map((id) => commands.recordCall(call('acc_a', id)));
    // Tried, refused, and tried again: the outage is being waited out.
    await vi.waitFor(() => expect(state.attempts).toBeGreaterThanOrEqual(3), PATIENCE);
    const later = [commands.recordCall(call('acc_b', 'req_4')), commands.recordCall(call('acc_a', 'req_5'))];
    const all = [...first, ...later];
    const seen = watch(all);
    expect(commands.unstoredCalls()).toBe(5);
    expect(seen.settled()).toBe(0);
    expect(state.appended).toEqual([]);

    state.down = false;
    await Promise.all(all);
    expect(state.appended.flatMap((a) => a.requestIds)).toEqual([
      'req_1',
      'req_2',
      'req_3',
      'req_4',
      'req_5',
    ]);
    expect(state.appended.map((a) => a.stream)).toEqual([
      'activity-acc_a',
      'activity-acc_b',
      'activity-acc_a',
    ]);
    expect(commands.unstoredCalls()).toBe(0);
  });

  it('is bounded: at its bound calls are to be refused as the database being away, until it takes the records', async () => {
    const { state, store } = storeWithOutage();
    const commands = commandsOn(store, 3);
    state.down = true;
    const records = [
      commands.recordCall(call('acc_a', 'req_1')),
      commands.recordCall(call('acc_a', 'req_2')),
    ];
    await vi.waitFor(() => expect(state.attempts).toBeGreaterThanOrEqual(1), PATIENCE);
    expect(commands.callsRefusal()).toBeNull();
    records.push(commands.recordCall(call('acc_a', 'req_3')));
    const refusal = commands.callsRefusal();
    expect(refusal).not.toBeNull();
    // Every face answers it as it answers the database being away: 503 with Retry-After.
    expect(isDatabaseUnavailable(refusal)).toBe(true);
    expect(refusal?.cause).toMatchObject({ code: 'ECONNREFUSED' });
    // A record of a call already running is still kept (it was admitted before the bound).
    records.push(commands.recordCall(call('acc_a', 'req_4')));
    expect(commands.unstoredCalls()).toBe(4);

    state.down = false;
    await Promise.all(records);
    expect(state.appended.flatMap((a) => a.requestIds)).toEqual(['req_1', 'req_2', 'req_3', 'req_4']);
    expect(commands.callsRefusal()).toBeNull();
  });

  it('a shutdown waits for the records while the database comes back within its time, and loses none', async () => {
    const { state, store } = storeWithOutage();
    const log = { error: vi.fn() };
    const activity = createActivity({
      db: undefined as never,
      commands: commandsOn(store) as unknown as Commands,
      log,
    });
    state.down = true;
    const record = activity.record(entry('acc_a', 'req_1'));
    const drained = activity.drain(PATIENCE.timeout);
    await vi.waitFor(() => expect(state.attempts).toBeGreaterThanOrEqual(2), PATIENCE);
    state.down = false;
    await drained;
    await record;
    expect(state.appended.flatMap((a) => a.requestIds)).toEqual(['req_1']);
    expect(log.error).not.toHaveBeenCalled();
  });

  it('a shutdown gives up what the database has not taken by its deadline, and logs how many in one line', async () => {
    const { state, store } = storeWithOutage();
    const log = { error: vi.fn() };
    const activity = createActivity({
      db: undefined as never,
      commands: commandsOn(store) as unknown as Commands,
      log,
    });
    state.down = true;
    const records = ['req_1', 'req_2', 'req_3'].map((id) => activity.record(entry('acc_a', id)));
    await activity.drain(50);
    expect(log.error).toHaveBeenCalledWith(
      { records: 3 },
      '3 activity records could not be written before shutdown: the database did not take them',
    );
    for (const r of records) await expect(r).rejects.toBeInstanceOf(ActivityAbandoned);
    // Given up, not tried again; and not logged one by one.
    const attempts = state.attempts;
    await activity.drain();
    expect(state.attempts).toBe(attempts);
    expect(log.error).toHaveBeenCalledTimes(1);
    expect(state.appended).toEqual([]);
  });
});
