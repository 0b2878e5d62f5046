import {
  activityStream,
  type CallRecorded,
  type CallsRecorded,
  type RecordedCall,
  type StaffSearched,
  staffSearchStream,
} from '../../../domain/activity/events.ts';
import { createBatcher } from '../../../infra/batcher.ts';
import { ACTIVITY_SPOOL_MAX } from '../../../infra/config.ts';
import { isDatabaseUnavailable } from '../../../infra/db/unavailable.ts';
import { newId } from '../../../infra/ids.ts';
import type { CommandContext } from './handler.ts';

/*
 * The activity log's records. Calls are appended together, at most 100 ms after the first of them:
 * under load one append (a transaction of a few statements) carries hundreds of calls, and the log is
 * a moment behind the calls. Each account's records of a batch are one event (`CallsRecorded`), and
 * its activity rows are written from it by the same transaction; should that append fail, its calls
 * are appended one by one, each an event of its own, so that a record the store refuses takes no
 * other record down with it: only its own call's promise rejects.
 *
 * While the database cannot be reached (isDatabaseUnavailable: a restart, a failover, a full disk),
 * an append is tried again, 50 ms after the failure and then twice as long each time up to 1 s, until
 * it is stored: the batch waits, and the records that come meanwhile wait behind it in this process
 * (the spool), in order; none is given up and no caller is told of the outage. At `spoolMax` records
 * waiting, `callsRefusal` says that calls that would be recorded are to be refused (503) before they
 * run, until the database takes them again; records of calls already running are still kept, so the
 * spool holds at most `spoolMax` and the calls in flight. A record cut off in its commit may have been
 * stored: it is appended again, and its activity row stays one (by its id). At shutdown `abandonCalls`
 * gives up what is left, once the shutdown's time for it is spent (apps/application/activity.ts).
 *
 * Their transactions commit without waiting for the WAL flush (synchronous_commit off, for them only):
 * a batch of many accounts is as many commits (docs/reliability.md, soak). A database crash can lose
 * the last fraction of a second of records, as a killed server loses those still in this batcher; it
 * never loses or reorders a change, and a record never lands without the rest of its transaction.
 */

/** One call waiting for its batch: its account and its record. */
type Waiting = { accountId: string; call: RecordedCall };

/** The first wait before an append the database could not take is tried again, and the longest. */
const RETRY_FIRST_MS = 50;
const RETRY_MAX_MS = 1_000;

/**
 * Calls that would be recorded are refused while the activity records waiting to be stored reach the
 * spool's bound. Its cause is the database's own failure (or, for a database that takes records more
 * slowly than they come, a class 53 "insufficient resources" one): every face answers it as the
 * database being away, 503 with Retry-After.
 */
export class ActivitySpoolFull extends Error {
  constructor(records: number, cause: unknown) {
    super(`${records} activity records are waiting for the database; calls are refused until it takes them`, {
      cause,
    });
    this.name = 'ActivitySpoolFull';
  }
}

/** The failure of a record given up at shutdown, the database still not taking it: counted once, not logged each. */
export class ActivityAbandoned extends Error {
  constructor() {
    super('the activity record was given up at shutdown: the database did not take it in time');
    this.name = 'ActivityAbandoned';
  }
}

export function activityCommands({ store, now, meta, metrics, activitySpoolMax }: CommandContext) {
  const delay = metrics?.activityBatchDelay;
  const spoolMax = activitySpoolMax ?? ACTIVITY_SPOOL_MAX;
  /** The database's last failure to take records, until it takes one again. */
  let away: unknown = null;
  let abandoned = false;
  /** Ends the wait before the next try at once (abandonCalls). */
  let wake: (() => void) | null = null;
  const pause = (ms: number): Promise<void> =>
    new Promise<void>((resolve) => {
      // Unref'd: a server's listener keeps the process; a process that has nothing else to do ends.
      const timer = setTimeout(resolve, ms);
      timer.unref();
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => {
      wake = null;
    });
  /** One append, tried again while the database cannot be reached; anything else is its failure. */
  const append = async (stream: string, events: CallsRecorded[]): Promise<void> => {
    for (let wait = RETRY_FIRST_MS; ; wait = Math.min(wait * 2, RETRY_MAX_MS)) {
      if (abandoned) throw new ActivityAbandoned();
      try {
        await store.append(stream, events, { expectedVersion: 'any', synchronousCommit: false });
        away = null;
        return;
      } catch (error) {
        if (!isDatabaseUnavailable(error)) throw error;
        away = error;
        await pause(wait);
      }
    }
  };
  const recorded = (accountId: string, calls: RecordedCall[]): CallsRecorded => ({
    type: 'CallsRecorded',
    data: { accountId, calls },
    metadata: meta(),
  });
  const calls = createBatcher<Waiting>(
    async (waiting) => {
      const failures: unknown[] = waiting.map(() => null);
      const byAccount = Map.groupBy(
        waiting.map((w, index) => ({ ...w, index })),
        (w) => w.accountId,
      );
      for (const [accountId, group] of byAccount) {
        const stream = activityStream(accountId);
        try {
          await append(stream, [
            recorded(
              accountId,
              group.map((w) => w.call),
            ),
          ]);
        } catch {
          for (const { call, index } of group) {
            try {
              await append(stream, [recorded(accountId, [call])]);
            } catch (error) {
              failures[index] = error;
            }
          }
        }
      }
      return failures;
    },
    {
      maxItems: 1000,
      maxDelayMs: 100,
      ...(delay ? { onStored: (waitedMs: number) => delay.observe(waitedMs / 1000) } : {}),
    },
  );

  return {
    /** Records a support staff member's search in the staff-side audit (`StaffSearched`). */
    async recordStaffSearch(data: Omit<StaffSearched['data'], 'searchId'>): Promise<{ searchId: string }> {
      const searchId = newId('srch');
      await store.append(
        staffSearchStream(data.staff.id),
        [
          {
            type: 'StaffSearched',
            data: { searchId, ...data },
            metadata: meta({ requestId: data.requestId ?? undefined }),
          },
        ],
        { expectedVersion: 'any' },
      );
      return { searchId };
    },

    /** Stores the calls recorded so far now, without waiting for their batch's delay. */
    flushCalls: (): Promise<void> => calls.flushNow(),

    /** Records not stored yet: waiting for their batch, being appended, or held while the database is away. */
    unstoredCalls: (): number => calls.size(),

    /** Null while records can be taken; at the spool's bound, the refusal of a call that would be recorded. */
    callsRefusal(): ActivitySpoolFull | null {
      const waiting = calls.size();
      if (waiting < spoolMax) return null;
      return new ActivitySpoolFull(
        waiting,
        away ??
          Object.assign(new Error('the database takes activity records more slowly than they come'), {
            code: '53000',
          }),
      );
    },

    /**
     * Stops trying: the records not stored yet fail with `ActivityAbandoned` (at shutdown, once its
     * time for them is spent). Returns how many there were.
     */
    abandonCalls(): number {
      abandoned = true;
      wake?.();
      return calls.size();
    },

    /**
     * One call through a face of the service, for the activity log. Calls are appended in batches
     * (one append per account every few milliseconds): an account's calls share one stream, and one
     * append per call would make every request of the account queue on that stream's row. The promise
     * resolves once the record is stored.
     */
    async recordCall(
      input: Omit<CallRecorded['data'], 'activityId' | 'revision' | 'clientRequestId'> & {
        revision?: number | null;
        /** The client's own X-Request-Id (validated by the face); none by default. */
        clientRequestId?: string | null;
        at?: Date;
      },
    ): Promise<{ activityId: string }> {
      // Field by field rather than spread: this runs on every call.
      const activityId = newId('act');
      const call: RecordedCall = {
        activityId,
        at: (input.at ?? now()).toISOString(),
        source: input.source,
        actor: input.actor,
        operation: input.operation,
        siteId: input.siteId,
        articleId: input.articleId,
        status: input.status,
        requestId: input.requestId,
        clientRequestId: input.clientRequestId ?? null,
        durationMs: input.durationMs,
      };
      // Only a call that created a revision names one: the others' records keep their shape.
      if (typeof input.revision === 'number') call.revision = input.revision;
      await calls.add({ accountId: input.accountId, call });
      return { activityId };
    },
  };
}
