import type { HtmlMemory } from '../domain/html/memory.ts';
import type { Projector } from '../infra/projection.ts';
import { accountsProjector } from './accounts.ts';
import { activityProjector } from './activity.ts';
import { articleHistoryProjector } from './article-history.ts';
import { createArticleSnapshotsProjector, type SnapshotMemory } from './article-snapshots.ts';
import { createArticlesProjector } from './articles.ts';
import { backlinksProjector } from './backlinks.ts';
import { createRevisionsProjector } from './revisions.ts';
import { siteStatsProjector } from './site-stats.ts';
import { sitesProjector } from './sites.ts';
import { staffSearchesProjector } from './staff-searches.ts';

/**
 * Every read model, in the order a rebuild of everything runs them. A runtime's own list has its
 * snapshot memory (the snapshot projector starts from the snapshot its commands read) and its html
 * memory (the article and revision projectors read the facts of the bodies its decider sanitised).
 */
export function createProjectors(
  deps: {
    snapshots?: SnapshotMemory;
    html?: HtmlMemory;
    /** The text search configuration of the articles' search vectors (SEARCH_LANGUAGE; default english). */
    searchLanguage?: string;
  } = {},
): readonly Projector[] {
  return [
    accountsProjector,
    sitesProjector,
    createArticlesProjector(deps.html, deps.searchLanguage),
    createArticleSnapshotsProjector(deps.snapshots),
    createRevisionsProjector(deps.html),
    articleHistoryProjector,
    backlinksProjector,
    siteStatsProjector,
    activityProjector,
    staffSearchesProjector,
  ];
}

/**
 * Every read model, without a snapshot memory: for status and the async runner, and, with the default
 * SEARCH_LANGUAGE, for rebuilds (the CLI makes its own with the configured one: `createProjectors`).
 */
export const projectors: readonly Projector[] = createProjectors();
export const asyncProjectors = projectors.filter((p) => p.mode === 'async');

/** Finds a projector by its name with or without the version (`articles` or `articles@1`). */
export function findProjector(name: string): Projector | undefined {
  return projectors.find((p) => p.name === name || p.name.split('@')[0] === name);
}
