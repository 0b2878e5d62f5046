import type { Config } from '../../infra/config.ts';
import type { JobSink } from '../../infra/jobs/queue.ts';
import { allowNetworks } from '../../infra/net/guarded-fetch.ts';
import { createWebhookSender } from '../../infra/webhooks/send.ts';
import { housekeepingJobs } from './jobs/housekeeping.ts';
import type { JobDeps, JobModule } from './jobs/module.ts';
import { publishingJobs } from './jobs/publishing.ts';
import { reportJobs } from './jobs/reports.ts';
import { webhookJobs } from './jobs/webhooks.ts';

/** What the areas need besides JobDeps: the webhook settings of the configuration. */
export type BackgroundDeps = JobDeps & {
  /** WEBHOOK_RETRY_SCHEDULE: seconds before each retry of a failed delivery. */
  retrySchedule: number[];
  /** OUTBOUND_ALLOW_NETWORKS: private networks webhooks may reach. */
  allowOutbound?: string[] | undefined;
};

/** Every area of the background side, for the server (RUN_JOBS) and the worker. */
export function backgroundModules(deps: BackgroundDeps): JobModule[] {
  const networks = deps.allowOutbound ?? [];
  const send = createWebhookSender(networks.length > 0 ? { allowAddresses: allowNetworks(networks) } : {});
  return [
    webhookJobs({ ...deps, retrySchedule: deps.retrySchedule, send }),
    publishingJobs(deps),
    reportJobs(deps),
    housekeepingJobs(deps),
  ];
}

/**
 * The modules of a process from its configuration and its parts, given the sink into its queues
 * (createJobs' `build`): what the server, the worker and the CLI put together alike.
 */
export function modulesFor(
  config: Pick<Config, 'PUBLIC_URL' | 'WEBHOOK_RETRY_SCHEDULE' | 'OUTBOUND_ALLOW_NETWORKS'>,
  parts: Pick<JobDeps, 'db' | 'commands' | 'media' | 'logger' | 'metrics'>,
): (sink: JobSink) => JobModule[] {
  return (sink) =>
    backgroundModules({
      ...parts,
      jobs: sink,
      publicUrl: config.PUBLIC_URL,
      retrySchedule: config.WEBHOOK_RETRY_SCHEDULE,
      allowOutbound: config.OUTBOUND_ALLOW_NETWORKS,
      now: () => new Date(),
    });
}
