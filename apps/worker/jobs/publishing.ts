import type { JobKind } from '../../../infra/jobs/queue.ts';
import {
  PUBLISH_ARTICLE,
  type PublishJobData,
  planScheduledArticles,
  publishingSubscription,
  publishScheduledArticle,
  SWEEP_EVERY_MS,
  SWEEP_SCHEDULED,
} from '../../application/publishing.ts';
import type { JobDeps, JobModule } from './module.ts';

/**
 * Scheduled publishing as a background area: the job that publishes an article at its time, the
 * subscription that plans it from the log, the sweep that plans every scheduled article again (at start
 * and every 5 minutes). apps/application/publishing.ts holds the rules.
 */
export function publishingJobs(deps: JobDeps): JobModule {
  const publish: JobKind<PublishJobData> = {
    name: PUBLISH_ARTICLE,
    queue: 'publishing',
    // A run before its time (a clock ahead elsewhere) fails and is tried again a second or so later.
    backoffMs: 1_000,
    async run(data) {
      const outcome = await publishScheduledArticle(deps, data);
      if (outcome === 'published') {
        deps.logger.info({ job: PUBLISH_ARTICLE, article_id: data.articleId }, 'scheduled article published');
      }
      return { outcome };
    },
  };
  const sweep: JobKind<Record<string, never>> = {
    name: SWEEP_SCHEDULED,
    queue: 'publishing',
    run: () => planScheduledArticles(deps),
  };
  return {
    kinds: [publish, sweep],
    subscriptions: [publishingSubscription(deps)],
    repeats: [{ id: SWEEP_SCHEDULED, name: SWEEP_SCHEDULED, repeat: { everyMs: SWEEP_EVERY_MS } }],
    async sweep() {
      await planScheduledArticles(deps);
    },
  };
}
