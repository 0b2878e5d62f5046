import type { JobKind } from '../../../infra/jobs/queue.ts';
import type { SendWebhook } from '../../../infra/webhooks/send.ts';
import {
  DELIVER_JOB,
  type DeliverJobData,
  type SendDeps,
  SWEEP_JOB,
} from '../../application/webhook-delivery.ts';
import { sweepWebhooks } from '../../application/webhook-scheduling.ts';
import { deliverWebhooks } from '../../application/webhook-sending.ts';
import { webhookSubscription } from '../../application/webhook-subscription.ts';
import type { JobDeps, JobModule } from './module.ts';

/*
 * Webhooks' part of the background side (apps/application/webhook-*.ts do the work): the
 * subscription that makes deliveries from the log, the job that sends an endpoint's deliveries, and the
 * sweep that kicks every endpoint with pending ones, every minute and at start.
 */

/** How often the sweep runs. */
export const SWEEP_EVERY_MS = 60_000;

/**
 * Runs of a deliver job, and the first retry's delay. A job fails only when the database does (a send
 * that fails is an attempt recorded, not a job failure); retries reach past a lapsed claim (30 s).
 */
const DELIVER_ATTEMPTS = 6;
const DELIVER_BACKOFF_MS = 5_000;

/** The webhook job kinds, subscription, repeat and sweep. */
export function webhookJobs(
  deps: JobDeps & { retrySchedule: readonly number[]; send: SendWebhook; random?: () => number },
): JobModule {
  const sendDeps: SendDeps = {
    db: deps.db,
    jobs: deps.jobs,
    now: deps.now,
    publicUrl: deps.publicUrl,
    send: deps.send,
    retrySchedule: deps.retrySchedule,
    logger: deps.logger,
    metrics: deps.metrics,
    ...(deps.random ? { random: deps.random } : {}),
  };
  const deliver: JobKind<DeliverJobData> = {
    name: DELIVER_JOB,
    queue: 'webhooks',
    attempts: DELIVER_ATTEMPTS,
    backoffMs: DELIVER_BACKOFF_MS,
    async run(data, ctx) {
      try {
        return await deliverWebhooks(sendDeps, data.deliveryId);
      } catch (error) {
        if (!ctx.lastAttempt) throw error;
        // Kept as a failed job, its id would stop the sweep from planning the delivery again for as
        // long as the queue keeps failed jobs; finished, the sweep plans it once the queue forgets it.
        deps.logger.error(
          { err: error, delivery_id: data.deliveryId, job: ctx.id },
          'webhook delivery job failed for good; the sweep plans the delivery again',
        );
        return 0;
      }
    },
  };
  const sweep: JobKind<unknown> = {
    name: SWEEP_JOB,
    queue: 'maintenance',
    attempts: 1,
    run: () => sweepWebhooks(sendDeps),
  };
  return {
    kinds: [deliver, sweep],
    subscriptions: [webhookSubscription({ ...sendDeps, publicUrl: deps.publicUrl })],
    repeats: [{ id: SWEEP_JOB, name: SWEEP_JOB, repeat: { everyMs: SWEEP_EVERY_MS } }],
    sweep: async () => {
      await sweepWebhooks(sendDeps);
    },
  };
}
