import type { ArticleCreated, ArticleStatusChanged } from '../../domain/article/events.ts';
import { DomainError, isDomainError } from '../../domain/errors.ts';
import type { Actor } from '../../domain/event.ts';
import type { Db } from '../../infra/db/schema.ts';
import { type AddOptions, type JobSink, jobIdOf } from '../../infra/jobs/queue.ts';
import type { AsyncProjector, Stored } from '../../infra/projection.ts';
import { findArticlePublication, listScheduledArticles } from '../../projections/articles.ts';
import { asyncProjector } from '../../projections/projector.ts';
import type { Commands } from './commands/index.ts';

/*
 * Scheduled publishing: an article with status `scheduled` becomes `published` once its published_at
 * has passed. A subscription to the log plans a job for every event that leaves an article scheduled,
 * delayed until its time; the job publishes the article only if it is still scheduled for that very
 * time (a changed plan has its own job, under another id); a sweep plans every scheduled article of
 * the read model again, for jobs lost with an in-process queue or a failed plan.
 */

/** The job kind that publishes one scheduled article at its time (queue `publishing`). */
export const PUBLISH_ARTICLE = 'article.publish';
/** The job kind that plans every scheduled article again (queue `publishing`, every 5 minutes). */
export const SWEEP_SCHEDULED = 'publishing.sweep';
/** How often the sweep runs besides at start. */
export const SWEEP_EVERY_MS = 5 * 60_000;

/** Who publishes a scheduled article: the service itself, named so in the revisions and the activity log. */
export const SCHEDULER_ACTOR: Actor = { type: 'system', id: 'scheduler', name: 'Scheduler' };

/** A publication job's data: the article, and the time it was scheduled for (RFC 3339, UTC). */
export type PublishJobData = { articleId: string; publishedAt: string };

/** A job to add: its data and the options that make adding it twice add it once. */
export type PlannedPublication = { data: PublishJobData; opts: Required<AddOptions> };

export type PublishingDeps = { db: Db; commands: Commands; jobs: JobSink; now: () => Date };

/** What a publication job found and did. */
export type PublishOutcome =
  /** The article was published by this run: a new revision. */
  | 'published'
  /** Nothing to do: the article is gone, or no longer scheduled for this time (published already, re-planned, unscheduled). */
  | 'not_scheduled';

/** How many times a publication reads the article again after an edit slipped in between its read and its write. */
const MAX_READS = 5;
/** Articles per page of the sweep. */
const SWEEP_PAGE = 500;

/**
 * The job that publishes `articleId` at `publishedAt`, seen at `now`: its id names the article and the
 * time (so a plan made twice is one job, and a new time is another job), its delay runs until then (none
 * when the time has passed). Pure.
 */
export function publicationOf(articleId: string, publishedAt: string | Date, now: Date): PlannedPublication {
  const at = new Date(publishedAt);
  const ms = at.getTime();
  if (Number.isNaN(ms)) throw new RangeError(`not a time: ${String(publishedAt)}`);
  return {
    data: { articleId, publishedAt: at.toISOString() },
    opts: { jobId: jobIdOf('publish', articleId, ms), delayMs: Math.max(0, ms - now.getTime()) },
  };
}

type ScheduleEvent = ArticleCreated | ArticleStatusChanged;

/** The publications that events plan: one per event that leaves its article scheduled. Pure. */
export function publicationsPlannedBy(events: readonly ScheduleEvent[], now: Date): PlannedPublication[] {
  return events.flatMap((event) => {
    const { status, publishedAt, articleId } = event.data;
    return status === 'scheduled' && publishedAt !== null ? [publicationOf(articleId, publishedAt, now)] : [];
  });
}

async function addAll(jobs: JobSink, planned: readonly PlannedPublication[]): Promise<void> {
  for (const p of planned) await jobs.add(PUBLISH_ARTICLE, p.data, p.opts);
}

/**
 * The subscription `publishing@1`: it keeps no rows; once a batch of article creations and status
 * changes is past its checkpoint, it adds the publication job of each event that leaves an article
 * scheduled. Should adding fail, the batch is done all the same: the sweep plans the article again.
 */
export function publishingSubscription(
  deps: Pick<PublishingDeps, 'jobs' | 'now'>,
): AsyncProjector<ScheduleEvent> {
  return asyncProjector({
    name: 'publishing@1',
    mode: 'async',
    handles: ['ArticleCreated', 'ArticleStatusChanged'],
    tables: [],
    project: () => [],
    async afterCommit(events: readonly Stored<ScheduleEvent>[]) {
      await addAll(deps.jobs, publicationsPlannedBy(events, deps.now()));
    },
  });
}

/**
 * Plans the publication of every article the read model holds as scheduled (the sweep: at start and
 * every 5 minutes). Adding a job whose id is taken does nothing, so a plan already made is not doubled.
 */
export async function planScheduledArticles(deps: Pick<PublishingDeps, 'db' | 'jobs' | 'now'>): Promise<{
  planned: number;
}> {
  let planned = 0;
  let after = '';
  for (;;) {
    const rows = await listScheduledArticles(deps.db, after, SWEEP_PAGE);
    const now = deps.now();
    const page = rows.flatMap((r) => (r.published_at ? [publicationOf(r.id, r.published_at, now)] : []));
    await addAll(deps.jobs, page);
    planned += page.length;
    const last = rows.at(-1);
    if (!last || rows.length < SWEEP_PAGE) return { planned };
    after = last.id;
  }
}

/**
 * The publication job: publishes the article if, read now, it is still scheduled for the job's time,
 * keeping its published_at, as a revision of origin `rewrite` by the scheduler. The change is made on
 * the revision read (expected revision), so a plan changed in between is never overruled, and of two
 * runs at once (two processes) one makes the revision: the other finds the article published and does
 * nothing. An edit that only slipped in between (a new title) is read again and published over.
 * A run before the time (a clock ahead elsewhere) throws, and the queue tries again a little later.
 */
export async function publishScheduledArticle(
  deps: Pick<PublishingDeps, 'db' | 'commands' | 'now'>,
  job: PublishJobData,
): Promise<PublishOutcome> {
  const due = Date.parse(job.publishedAt);
  if (Number.isNaN(due)) {
    throw new DomainError('invalid_request', `A publication job needs a time, not ${job.publishedAt}`);
  }
  for (let read = 1; ; read++) {
    const article = await findArticlePublication(deps.db, job.articleId);
    if (article?.status !== 'scheduled' || article.published_at?.getTime() !== due) {
      return 'not_scheduled';
    }
    const now = deps.now();
    if (now.getTime() < due) {
      throw new Error(
        `article ${job.articleId} is scheduled for ${job.publishedAt}, not yet due at ${now.toISOString()}`,
      );
    }
    try {
      const result = await deps.commands.changeArticleStatus(
        article.account_id,
        job.articleId,
        { status: 'published', expectedRevision: article.revision },
        { origin: 'rewrite', actor: SCHEDULER_ACTOR },
      );
      return result.changed ? 'published' : 'not_scheduled';
    } catch (error) {
      // Changed since it was read: read it again (published by another run, re-planned, or edited).
      if (isDomainError(error) && error.code === 'revision_mismatch' && read < MAX_READS) continue;
      throw error;
    }
  }
}
