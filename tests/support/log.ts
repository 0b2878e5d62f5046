import { randomUUID } from 'node:crypto';
import type { ControlledTransaction, Kysely } from 'kysely';
import type { Database } from '../../infra/db/schema.ts';

/**
 * A transaction that has appended an event (of a stream of its own) to the log and stays open: the
 * log's followers wait for it, and read nothing committed after it began appending, until it ends.
 * The caller commits or rolls it back.
 */
export async function openAppendingTransaction(
  db: Kysely<Database>,
): Promise<ControlledTransaction<Database>> {
  const trx = await db.startTransaction().execute();
  try {
    await trx
      .insertInto('events')
      .values({
        event_id: randomUUID(),
        stream_id: `article-${randomUUID()}`,
        version: 1,
        type: 'Other',
        data: '{}',
        metadata: '{}',
      })
      .execute();
    return trx;
  } catch (error) {
    await trx.rollback().execute();
    throw error;
  }
}
