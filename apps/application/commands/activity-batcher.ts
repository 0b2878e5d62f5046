import { sql, type Transaction } from 'kysely';
import {
  activityStream,
  type CallRecorded,
  type CallsRecorded,
  type RecordedCall,
  type StaffSearched,
  staffSearchStream,
} from '../../../domain/activity/events.ts';
import { createBatcher } from '../../../infra/batcher.ts';
import type { Database } from '../../../infra/db/schema.ts';
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
 * Their transactions commit without waiting for the WAL flush (synchronous_commit off, for them only):
 * a batch of many accounts is as many commits (docs/reliability.md, soak). A database crash can lose
 * the last fraction of a second of records, as a killed server loses those still in this batcher; it
 * never loses or reorders a change, and a record never lands without the rest of its transaction.
 */

const asyncCommit = (trx: Transaction<Database>) =>
  sql`select set_config('synchronous_commit', 'off', true)`.execute(trx).then(() => undefined);

/** One call waiting for its batch: its account and its record. */
type Waiting = { accountId: string; call: RecordedCall };

export function activityCommands({ store, now, meta, metrics }: CommandContext) {
  const delay = metrics?.activityBatchDelay;
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
          await store.append(
            stream,
            [
              recorded(
                accountId,
                group.map((w) => w.call),
              ),
            ],
            {
              expectedVersion: 'any',
              alongside: asyncCommit,
            },
          );
        } catch {
          for (const { call, index } of group) {
            try {
              await store.append(stream, [recorded(accountId, [call])], {
                expectedVersion: 'any',
                alongside: asyncCommit,
              });
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
