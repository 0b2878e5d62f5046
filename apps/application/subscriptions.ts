import { DomainError } from '../../domain/errors.ts';
import { findArticleSite } from '../../projections/articles.ts';
import { type Call, type Outcome, outcomeOf } from './call.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';

/*
 * Subscribing to changes of articles (MCP's resource subscriptions): only to the account's own, so that
 * another account's id is refused exactly as an unknown one.
 */

export type Subscriptions = ReturnType<typeof createSubscriptions>;

export function createSubscriptions(deps: Pick<ApplicationDeps, 'db' | 'reads'>) {
  const reads = readsOf(deps);
  return {
    /** Each article is the account's; `not_found` naming the first that is not. */
    articles(call: Call, articleIds: readonly string[]): Promise<Outcome<void>> {
      return outcomeOf(articleIds.length === 1 ? { articleId: articleIds[0] } : {}, async (note) => {
        const { accountId, liveKey } = call.principal;
        await reads.read(accountId, async (db) => {
          for (const articleId of articleIds) {
            const siteId = await findArticleSite(db, accountId, articleId, liveKey);
            if (!siteId) throw new DomainError('not_found', `No article ${articleId}`);
            if (articleIds.length === 1) note.site(siteId);
          }
        });
      });
    },
  };
}
