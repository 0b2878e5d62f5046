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
