import type { DomainEvent } from '../../../domain/events.ts';
import type { Db } from '../../../infra/db/schema.ts';
import type { JobKind, JobSink, Repeat } from '../../../infra/jobs/queue.ts';
import type { MediaStore } from '../../../infra/media/store.ts';
import type { Metrics } from '../../../infra/metrics.ts';
import type { AsyncProjector } from '../../../infra/projection.ts';
import type { Commands } from '../../application/commands/index.ts';

/*
 * The background side, area by area (webhooks, publishing, reports, housekeeping): each gives its job
 * kinds, the subscriptions to the log that feed them, the repeatable jobs it declares, and a start-up
 * sweep. apps/worker/background.ts puts them together for the server (RUN_JOBS) and the worker.
 */

/** What the job kinds and subscriptions of every area are made from. */
export type JobDeps = {
  db: Db;
  commands: Commands;
  media: MediaStore;
  /** Where a job adds jobs (to chain a delivery, to plan a publication). */
  jobs: JobSink;
  publicUrl: string;
  now: () => Date;
  /** The process's metrics (webhook attempts and delays); without them nothing is counted. */
  metrics?: Metrics | undefined;
  logger: {
    info(obj: object, msg: string): void;
    warn(obj: object, msg: string): void;
    error(obj: object, msg: string): void;
  };
};

/** One area's part of the background side. */
export type JobModule = {
  kinds: JobKind<never>[];
  /** Checkpointed subscriptions to the log (run beside the async projectors, never rebuilt). */
  subscriptions?: AsyncProjector<DomainEvent>[];
  /** Repeatable jobs: `id` names the schedule (processes declaring one share it). */
  repeats?: { id: string; name: string; repeat: Repeat; data?: unknown }[];
  /**
   * Run once when the workers start, and free to run again: plans what the database says is due (jobs
   * lost with an in-process queue, or with Redis, are planned again).
   */
  sweep?: () => Promise<void>;
};
