import {
  collectMedia,
  mergeSearchPending,
  purgeExpiredSessions,
  purgeIdempotency,
  removeUnusedOAuthClients,
} from '../../../infra/jobs/housekeeping.ts';
import type { JobKind, Repeat } from '../../../infra/jobs/queue.ts';
import type { JobDeps, JobModule } from './module.ts';

/*
 * Housekeeping as a background area: repeatable jobs on the `maintenance` queue, each a function of
 * infra/jobs/housekeeping.ts that decides what to delete in the statement that deletes it, so that two
 * processes running one at once delete each row (or file) once.
 */

const HOUR_MS = 3_600_000;

/** Idempotency records older than 24 hours: hourly. */
export const PURGE_IDEMPOTENCY = 'housekeeping.idempotency';
/** Stored images no revision refers to, after the grace period: every 6 hours. */
export const COLLECT_MEDIA = 'housekeeping.media';
/** OAuth clients registered over 30 days ago and never connected: daily. */
export const REMOVE_UNUSED_OAUTH_CLIENTS = 'housekeeping.oauth-clients';
/** Ended web sessions, stale sign-in failure counts, expired OAuth rows: hourly. */
export const PURGE_EXPIRED_SESSIONS = 'housekeeping.sessions';
/** The search indexes' pending entries merged into them: every 10 seconds. */
export const MERGE_SEARCH_PENDING = 'housekeeping.search-index';

/** How often the search indexes' pending lists are merged: a few seconds of edits at most wait there. */
export const MERGE_SEARCH_PENDING_EVERY_MS = 10_000;

/** The housekeeping jobs and their schedules. */
export function housekeepingJobs(deps: JobDeps): JobModule {
  // `quiet`: a run whose counts are all 0 found nothing to do, and is not logged (the search indexes'
  // merge runs every 10 seconds).
  // `retriedByNextRun`: the merge's next run, 10 seconds on, merges what a failed one left (queue.ts).
  const jobs: {
    name: string;
    every: Repeat;
    work: () => Promise<object>;
    quiet?: boolean;
    retriedByNextRun?: boolean;
  }[] = [
    { name: PURGE_IDEMPOTENCY, every: { everyMs: HOUR_MS }, work: () => purgeIdempotency(deps) },
    { name: COLLECT_MEDIA, every: { everyMs: 6 * HOUR_MS }, work: () => collectMedia(deps) },
    {
      name: REMOVE_UNUSED_OAUTH_CLIENTS,
      every: { everyMs: 24 * HOUR_MS },
      work: () => removeUnusedOAuthClients(deps),
    },
    { name: PURGE_EXPIRED_SESSIONS, every: { everyMs: HOUR_MS }, work: () => purgeExpiredSessions(deps) },
    {
      name: MERGE_SEARCH_PENDING,
      every: { everyMs: MERGE_SEARCH_PENDING_EVERY_MS },
      work: () => mergeSearchPending(deps),
      quiet: true,
      retriedByNextRun: true,
    },
  ];
  return {
    kinds: jobs.map(
      ({ name, work, quiet, retriedByNextRun }): JobKind<unknown> => ({
        name,
        queue: 'maintenance',
        ...(retriedByNextRun ? { retriedByNextRun } : {}),
        async run() {
          const summary = await work();
          const idle = quiet === true && Object.values(summary).every((count) => count === 0);
          if (!idle) deps.logger.info({ job: name, summary }, 'housekeeping done');
          return summary;
        },
      }),
    ),
    repeats: jobs.map(({ name, every }) => ({ id: name, name, repeat: every })),
  };
}
