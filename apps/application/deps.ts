import { isDomainError } from '../../domain/errors.ts';
import { primaryReads, type Reads } from '../../infra/db/replicas.ts';
import type { Db } from '../../infra/db/schema.ts';
import type { JobSink } from '../../infra/jobs/queue.ts';
import type { FetchImage } from '../../infra/media/fetch.ts';
import type { MediaStore } from '../../infra/media/store.ts';
import type { BodyDiff } from '../../infra/sanitize-pool.ts';
import type { EditLimit } from './call.ts';
import type { Commands } from './commands/index.ts';

/** What the use cases are given by a composition root (apps/server/app.ts, the CLI, the tests). */
export type ApplicationDeps = {
  /** The primary: writes, and the reads of a use case that writes. */
  db: Db;
  /**
   * Where the reads of an account's data run (lists, articles, backlinks, stats, activity, revisions):
   * a read replica that has the account's last write, or the primary (infra/db/replicas.ts). Default:
   * every read on `db`.
   */
  reads?: Reads;
  commands: Commands;
  /** The text search configuration of article search, the one the search vectors are made with (SEARCH_LANGUAGE; default english). */
  searchLanguage?: string;
  /** The service's public address: stored images are referred to under it. */
  publicUrl: string;
  /** The clock of periods such as this_month. */
  now: () => Date;
  editLimit: EditLimit;
  media: MediaStore;
  fetchImage: FetchImage;
  /**
   * Where use cases add background jobs (a webhook delivery to send now). Without one, the workers'
   * sweep finds the work in the database a little later.
   */
  jobs?: JobSink;
  /**
   * Private addresses outgoing requests may reach besides public ones (OUTBOUND_ALLOW_NETWORKS): a
   * webhook URL whose host is such an address may be http. Default: none.
   */
  allowOutbound?: (ip: string) => boolean;
  /**
   * The word diff of two article bodies within the diff budget (Runtime.diff: on the worker pool when
   * there is one). Default: in this thread, within the size budget.
   */
  diff?: (before: string, after: string, context?: number) => Promise<BodyDiff>;
  /** Where failures nobody awaits are reported (an activity record that could not be stored). */
  log?: { error(obj: object, msg: string): void };
};

/**
 * Where a use case's reads run: `reads` as given, or the primary. A read that a replica refuses for
 * its API key is run again on the primary, which decides: the key may have been made a moment ago (by
 * the CLI, say), and the replica not have it yet. (A revocation is the account's write: its reads after
 * it are on a replica that has it.)
 */
export function readsOf(deps: Pick<ApplicationDeps, 'db' | 'reads'>): Reads {
  const { reads, db } = deps;
  if (reads === undefined) return primaryReads(db);
  return {
    wrote: reads.wrote,
    async read(accountId, work) {
      try {
        return await reads.read(accountId, work);
      } catch (error) {
        if (isDomainError(error) && error.code === 'unauthenticated') return work(db);
        throw error;
      }
    },
  };
}
