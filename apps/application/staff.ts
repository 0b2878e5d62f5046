import { DomainError } from '../../domain/errors.ts';
import type { Actor } from '../../domain/event.ts';
import { findAccount } from '../../projections/accounts.ts';
import { findArticleOwner } from '../../projections/articles.ts';
import { listSites } from '../../projections/sites.ts';
import {
  accountTimeline,
  findAccounts,
  type TimelineEntry,
  type TimelineQuery,
} from '../../projections/timeline.ts';
import type { Articles } from './articles.ts';
import type { Call } from './call.ts';
import type { ApplicationDeps } from './deps.ts';
import { type Listed, listed } from './lists.ts';
import type { Revisions } from './revisions.ts';
import { type ArticleOut, type RevisionContentOut, type SiteOut, siteOut } from './wire.ts';

export type { TimelineEntry, TimelineQuery } from '../../projections/timeline.ts';

/** A support staff member, signed in: reads any account, changes none. */
export type StaffMember = { id: string; name: string; email: string };

export type Support = ReturnType<typeof createSupport>;

/**
 * What support staff see: a search for accounts, an account's timeline (revisions and activity
 * interleaved) and an article's. Staff read and never write: nothing here changes an account's data.
 * Every view of an account is recorded in that account's activity log (source `system`, the staff
 * member as actor, operation `staff_view`), so the account holder can see who looked.
 */
export function createSupport(
  deps: Pick<ApplicationDeps, 'db' | 'commands'>,
  reads: { articles: Articles; revisions: Revisions },
) {
  const { db, commands } = deps;

  const actorOf = (staff: StaffMember): Actor => ({ type: 'staff', id: staff.id, name: staff.name });

  async function recordView(
    staff: StaffMember,
    view: { accountId: string; articleId?: string | null; requestId?: string },
  ): Promise<void> {
    await commands.recordCall({
      accountId: view.accountId,
      source: 'system',
      actor: actorOf(staff),
      operation: 'staff_view',
      siteId: null,
      articleId: view.articleId ?? null,
      status: 200,
      requestId: view.requestId ?? null,
      durationMs: 0,
    });
  }

  /**
   * A read of an account's data on a staff member's behalf: the account's principal with the staff
   * member as actor and a read grant, so that no write could go through it. (Reads carry no origin of
   * their own; `editor` is the web's.)
   */
  const readCall = (accountId: string, staff: StaffMember, requestId?: string): Call => ({
    principal: { accountId, actor: actorOf(staff), origin: 'editor', scope: 'read', requestId },
    touched: { siteId: null, articleId: null, revision: null },
  });

  return {
    /** Accounts by (part of) an email, a site's domain, an article id or a request id. */
    search: (term: string) => findAccounts(db, term.trim()),

    /** An account with its sites and a page of its timeline; the view is recorded in its activity log. */
    async account(
      staff: StaffMember,
      accountId: string,
      query: TimelineQuery,
      requestId?: string,
    ): Promise<{
      account: { id: string; name: string; email: string; created_at: Date };
      sites: SiteOut[];
      timeline: Listed<TimelineEntry>;
    }> {
      const account = await findAccount(db, accountId);
      if (!account) throw new DomainError('not_found', `No account ${accountId}`);
      const [sites, timeline] = await Promise.all([
        listSites(db, accountId, { page: 1, perPage: 100 }),
        accountTimeline(db, accountId, query),
      ]);
      await recordView(staff, { accountId, ...(requestId ? { requestId } : {}) });
      return {
        account,
        sites: sites.rows.map(siteOut),
        timeline: listed(timeline, { page: query.page, per_page: query.perPage }, (e) => e),
      };
    },

    /** An article's timeline (its revisions and the calls that named it); the view is recorded. */
    async article(
      staff: StaffMember,
      articleId: string,
      query: TimelineQuery,
      requestId?: string,
    ): Promise<{
      article: { id: string; accountId: string; title: string };
      timeline: Listed<TimelineEntry>;
    }> {
      const owner = await findArticleOwner(db, articleId);
      if (!owner) throw new DomainError('not_found', `No article ${articleId}`);
      const timeline = await accountTimeline(db, owner.accountId, { ...query, articleId });
      await recordView(staff, { accountId: owner.accountId, articleId, ...(requestId ? { requestId } : {}) });
      return {
        article: { id: articleId, accountId: owner.accountId, title: owner.title },
        timeline: listed(timeline, { page: query.page, per_page: query.perPage }, (e) => e),
      };
    },

    /** An article at revision n (by replay), the revision before it and the current version; recorded. */
    async revision(
      staff: StaffMember,
      articleId: string,
      n: number,
      requestId?: string,
    ): Promise<{
      at: RevisionContentOut;
      before: RevisionContentOut | null;
      current: ArticleOut;
      accountId: string;
    }> {
      const owner = await findArticleOwner(db, articleId);
      if (!owner) throw new DomainError('not_found', `No article ${articleId}`);
      const call = readCall(owner.accountId, staff, requestId);
      const [at, before, current] = await Promise.all([
        reads.revisions.get(call, articleId, n),
        n > 1 ? reads.revisions.get(call, articleId, n - 1) : Promise.resolve(null),
        reads.articles.get(call, articleId),
      ]);
      await recordView(staff, { accountId: owner.accountId, articleId, ...(requestId ? { requestId } : {}) });
      return { at, before, current, accountId: owner.accountId };
    },
  };
}
