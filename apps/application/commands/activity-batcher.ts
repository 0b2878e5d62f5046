import { sql, type Transaction } from 'kysely';
import {
  activityStream,
  type CallRecorded,
  type StaffSearched,
  staffSearchStream,
} from '../../../domain/activity/events.ts';
import { createBatcher } from '../../../infra/batcher.ts';
import type { Database } from '../../../infra/db/schema.ts';
import { newId } from '../../../infra/ids.ts';
import type { CommandContext } from './handler.ts';

/*
 * The activity log's records. Calls are appended together, at most 100 ms after the first of them:
 * under load one append (a transaction of a few statements, the activity rows written by it) carries
 * hundreds of calls, and the log is a moment behind the calls. Each account's records are one append;
 * should one fail, its records are appended one by one, so that a record the store refuses takes no
 * other record down with it: only its own call's promise rejects.
 *
 * Their transactions commit without waiting for the WAL flush (synchronous_commit off, for them only):
 * a batch of many accounts is as many commits (docs/reliability.md, soak). A database crash can lose
 * the last fraction of a second of records, as a killed server loses those still in this batcher; it
 * never loses or reorders a change, and a record never lands without the rest of its transaction.
 */

const asyncCommit = (trx: Transaction<Database>) =>
  sql`select set_config('synchronous_commit', 'off', true)`.execute(trx).then(() => undefined);

export function activityCommands({ store, now, meta, metrics }: CommandContext) {
  const delay = metrics?.activityBatchDelay;
  const calls = createBatcher<CallRecorded>(
    async (events) => {
      const failures: unknown[] = events.map(() => null);
      const byAccount = Map.groupBy(
        events.map((event, index) => ({ event, index })),
        (e) => e.event.data.accountId,
      );
      for (const [accountId, group] of byAccount) {
        const stream = activityStream(accountId);
        try {
          await store.append(
            stream,
            group.map((e) => e.event),
            { expectedVersion: 'any', alongside: asyncCommit },
          );
        } catch {
          for (const { event, index } of group) {
            try {
              await store.append(stream, [event], { expectedVersion: 'any', alongside: asyncCommit });
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
      const at = (input.at ?? now()).toISOString();
      const data: CallRecorded['data'] = {
        activityId,
        accountId: input.accountId,
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
      if (typeof input.revision === 'number') data.revision = input.revision;
      await calls.add({
        type: 'CallRecorded',
        data,
        metadata: input.requestId ? { at, requestId: input.requestId } : { at },
      });
      return { activityId };
    },
  };
}
