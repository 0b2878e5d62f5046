import { type Accounts, createAccounts } from './accounts.ts';
import { type Activity, createActivity } from './activity.ts';
import { createArticleWriter } from './article-write.ts';
import { type Articles, createArticles } from './articles.ts';
import { type Credentials, createCredentials } from './credentials.ts';
import type { ApplicationDeps } from './deps.ts';
import { createKeys, type Keys } from './keys.ts';
import { createReported, type Reported } from './reported.ts';
import { createRevisions, type Revisions } from './revisions.ts';
import { createSites, type Sites } from './sites.ts';
import { createSupport, type Support } from './staff.ts';
import { createSubscriptions, type Subscriptions } from './subscriptions.ts';
import { createSuggestions, type Suggestions } from './suggestions.ts';
import { createWebhooks, type Webhooks } from './webhooks.ts';

/** The use cases every face calls: the API's routes, the MCP tools, the web pages and the CLI. */
export type Application = {
  articles: Articles;
  revisions: Revisions;
  sites: Sites;
  activity: Activity;
  keys: Keys;
  accounts: Accounts;
  credentials: Credentials;
  support: Support;
  webhooks: Webhooks;
  /** Monthly reports as they were made (the report page's "As reported on"). */
  reported: Reported;
  /** What an argument being typed may be (MCP's completions). */
  suggestions: Suggestions;
  /** Which articles a subscription to their changes may name (MCP's resource subscriptions). */
  subscriptions: Subscriptions;
};

export function createApplication(deps: ApplicationDeps): Application {
  const writer = createArticleWriter(deps);
  const articles = createArticles(deps, writer);
  const revisions = createRevisions(deps, writer);
  const activity = createActivity(deps);
  return {
    articles,
    revisions,
    sites: createSites(deps),
    activity,
    keys: createKeys(deps),
    accounts: createAccounts(deps),
    credentials: createCredentials(deps),
    support: createSupport(deps, { articles, revisions, activity }),
    webhooks: createWebhooks(deps),
    reported: createReported(deps),
    suggestions: createSuggestions(deps),
    subscriptions: createSubscriptions(deps),
  };
}
