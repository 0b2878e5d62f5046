import { DomainError, isDomainError } from '../../domain/errors.ts';
import type { Actor } from '../../domain/event.ts';
import { accountNames, findAccount } from '../../projections/accounts.ts';
import { type ActivitySubjects, activitySubjects } from '../../projections/activity.ts';
import { articleTitles, findArticleOwner } from '../../projections/articles.ts';
import { listSites } from '../../projections/sites.ts';
import { type StaffAuditEntry, staffAudit } from '../../projections/staff-searches.ts';
import {
  accountTimeline,
  type FoundAccount,
  findAccounts,
  type TimelineEntry,
  type TimelineQuery,
} from '../../projections/timeline.ts';
import type { Activity } from './activity.ts';
import type { ArticleAsOfOut, ArticleOut, Articles } from './articles.ts';
import { type Call, type Outcome, outcomeOf, type RequestIds, unwrap } from './call.ts';
import type { ApplicationDeps } from './deps.ts';
import { type Listed, listed } from './lists.ts';
import type { RevisionContentOut, Revisions } from './revisions.ts';
import { type SiteOut, siteOut } from './sites.ts';

export type { StaffAuditEntry } from '../../projections/staff-searches.ts';
export type { FoundAccount, TimelineEntry, TimelineQuery } from '../../projections/timeline.ts';

/**
 * A page of a timeline, with the names of the sites and articles its entries name (as the account's
 * activity page shows them) and how many of the staff's own looks the filters match, listed or not.
 */
export type StaffTimeline = {
  timeline: Listed<TimelineEntry>;
  names: ActivitySubjects;
  staffLooks: number;
};

/** An account as support staff's pages name it: its name and email with its id. */
export type AccountName = { id: string; name: string; email: string };

/** The account `accountId` by name, or its id alone (no name, no email) if it is gone. */
async function accountNameOf(db: ApplicationDeps['db'], accountId: string): Promise<AccountName> {
  return (await accountNames(db, [accountId])).get(accountId) ?? { id: accountId, name: '', email: '' };
}

/** A support staff member, signed in: reads any account, changes none. The support use cases' caller. */
export type StaffMember = { id: string; name: string; email: string };

export type Support = ReturnType<typeof createSupport>;

/**
 * What support staff see: a search for accounts, an account's timeline (revisions and activity
 * interleaved) and an article's. Staff read and never write: nothing here changes an account's data.
 * Every view of an account is recorded in that account's activity log (source `system`, the staff
 * member as actor, operation `staff_view`), and so is every search that lists it (`staff_search`), so
 * the account holder can see who looked; searches are also kept in the staff-side audit.
 */
export function createSupport(
  deps: Pick<ApplicationDeps, 'db' | 'commands'>,
  reads: { articles: Articles; revisions: Revisions; activity: Pick<Activity, 'record'> },
) {
  const { db, commands } = deps;

  const actorOf = (staff: StaffMember): Actor => ({ type: 'staff', id: staff.id, name: staff.name });

  /** A page of an account's timeline (StaffTimeline): its entries, their sites' and articles' names. */
  async function timelinePage(accountId: string, query: TimelineQuery): Promise<StaffTimeline> {
    const page = await accountTimeline(db, accountId, query);
    const ids = (pick: (e: TimelineEntry) => string | null): string[] => [
      ...new Set(page.rows.flatMap((e) => pick(e) ?? [])),
    ];
    const names = await activitySubjects(db, accountId, {
      siteIds: ids((e) => e.siteId),
      articleIds: ids((e) => e.articleId),
    });
    return {
      timeline: listed(page, { page: query.page, per_page: query.perPage }, (e) => e),
      names,
      staffLooks: page.staffLooks,
    };
  }

  /** Records in an account's activity log that a staff member looked at it (`staff_view`) or listed it (`staff_search`). */
  async function recordLook(
    staff: StaffMember,
    look: {
      operation: 'staff_view' | 'staff_search';
      accountId: string;
      articleId?: string | null;
      request: RequestIds | undefined;
    },
  ): Promise<void> {
    await reads.activity.record({
      accountId: look.accountId,
      source: 'system',
      actor: actorOf(staff),
      operation: look.operation,
      subject: { siteId: null, articleId: look.articleId ?? null, revision: null },
      status: 200,
      requestId: look.request?.requestId ?? null,
      clientRequestId: look.request?.clientRequestId ?? null,
      durationMs: 0,
    });
  }

  /**
   * A read of an account's data on a staff member's behalf: the account's principal with the staff
   * member as actor and a read grant, so that no write could go through it. (Reads carry no origin of
   * their own; `editor` is the web's.)
   */
  const readCall = (accountId: string, staff: StaffMember, request: RequestIds | undefined): Call => ({
    principal: {
      accountId,
      actor: actorOf(staff),
      origin: 'editor',
      scope: 'read',
      requestId: request?.requestId,
    },
  });

  return {
    /**
     * Accounts by (part of) an email, a site's domain, an article id or a request id (the service's,
     * never a client's own). The search is kept in the staff-side audit, and each account it lists has
     * a `staff_search` record in its activity log.
     */
    search(staff: StaffMember, term: string, request?: RequestIds): Promise<Outcome<FoundAccount[]>> {
      return outcomeOf({}, async () => {
        const query = term.trim();
        const found = await findAccounts(db, query);
        const accountIds = [...new Set(found.map((a) => a.id))];
        await Promise.all([
          commands.recordStaffSearch({
            staff: actorOf(staff),
            query,
            accountIds,
            requestId: request?.requestId ?? null,
          }),
          ...accountIds.map((accountId) =>
            recordLook(staff, { operation: 'staff_search', accountId, request }),
          ),
        ]);
        return found;
      });
    },

    /** What support staff did, newest first: their searches and their views of accounts (any member may read it). */
    audit(
      _staff: StaffMember,
      query: { page: number; perPage: number },
    ): Promise<
      Outcome<
        Listed<StaffAuditEntry> & {
          accounts: Map<string, AccountName>;
          articles: Map<string, { id: string; title: string; accountId: string }>;
        }
      >
    > {
      return outcomeOf({}, async () => {
        const page = await staffAudit(db, query);
        // The accounts the page names, by name and email, and its articles by title (one gone since
        // keeps its id alone).
        const [accounts, articles] = await Promise.all([
          accountNames(
            db,
            page.rows.flatMap((e) => (e.kind === 'search' ? e.accountIds : [e.accountId])),
          ),
          articleTitles(
            db,
            page.rows.flatMap((e) => (e.kind === 'view' && e.articleId ? [e.articleId] : [])),
          ),
        ]);
        return {
          ...listed(page, { page: query.page, per_page: query.perPage }, (e) => e),
          accounts,
          articles,
        };
      });
    },

    /** An account with its sites and a page of its timeline; the view is recorded in its activity log. */
    account(
      staff: StaffMember,
      accountId: string,
      query: TimelineQuery,
      request?: RequestIds,
    ): Promise<
      Outcome<
        StaffTimeline & {
          account: { id: string; name: string; email: string; created_at: Date };
          sites: SiteOut[];
        }
      >
    > {
      return outcomeOf({}, async () => {
        const account = await findAccount(db, accountId);
        if (!account) throw new DomainError('not_found', `No account ${accountId}`);
        const [sites, timeline] = await Promise.all([
          listSites(db, accountId, { page: 1, perPage: 100 }),
          timelinePage(accountId, query),
        ]);
        await recordLook(staff, { operation: 'staff_view', accountId, request });
        return { account, sites: sites.rows.map(siteOut), ...timeline };
      });
    },

    /** An article's timeline (its revisions and the calls that named it); the view is recorded. */
    article(
      staff: StaffMember,
      articleId: string,
      query: TimelineQuery,
      request?: RequestIds,
    ): Promise<
      Outcome<
        StaffTimeline & { article: { id: string; accountId: string; title: string }; account: AccountName }
      >
    > {
      return outcomeOf({ articleId }, async () => {
        const owner = await findArticleOwner(db, articleId);
        if (!owner) throw new DomainError('not_found', `No article ${articleId}`);
        const [timeline, account] = await Promise.all([
          timelinePage(owner.accountId, { ...query, articleId }),
          accountNameOf(db, owner.accountId),
        ]);
        await recordLook(staff, { operation: 'staff_view', accountId: owner.accountId, articleId, request });
        return {
          article: { id: articleId, accountId: owner.accountId, title: owner.title },
          account,
          ...timeline,
        };
      });
    },

    /**
     * An article as it stood at `asOf` (RFC 3339, UTC), read by the account holder's own use case
     * (`articles.getAsOf`, the API's `as_of`) through the staff's read-only call, with the current
     * version; the view is recorded. `at` is null when the article did not exist yet then (`created`:
     * when it did begin). An instant in the future is refused as the API refuses it, before anything is
     * read or recorded.
     */
    articleAsOf(
      staff: StaffMember,
      articleId: string,
      asOf: string,
      request?: RequestIds,
    ): Promise<
      Outcome<{
        at: ArticleAsOfOut | null;
        created: string | null;
        current: ArticleOut;
        accountId: string;
        account: AccountName;
      }>
    > {
      return outcomeOf({ articleId }, async () => {
        const owner = await findArticleOwner(db, articleId);
        if (!owner) throw new DomainError('not_found', `No article ${articleId}`);
        const call = readCall(owner.accountId, staff, request);
        const read = await reads.articles.getAsOf(call, articleId, asOf);
        if (!read.ok && !(isDomainError(read.error) && read.error.code === 'not_found')) throw read.error;
        const [current, first, account] = await Promise.all([
          reads.articles.get(call, articleId).then(unwrap),
          read.ok ? Promise.resolve(null) : reads.revisions.get(call, articleId, 1).then(unwrap),
          accountNameOf(db, owner.accountId),
        ]);
        await recordLook(staff, { operation: 'staff_view', accountId: owner.accountId, articleId, request });
        return {
          at: read.ok ? read.value : null,
          created: first?.created_at ?? null,
          current,
          accountId: owner.accountId,
          account,
        };
      });
    },

    /** An article at revision n (by replay), the revision before it and the current version; recorded. */
    revision(
      staff: StaffMember,
      articleId: string,
      n: number,
      request?: RequestIds,
    ): Promise<
      Outcome<{
        at: RevisionContentOut;
        before: RevisionContentOut | null;
        current: ArticleOut;
        accountId: string;
        account: AccountName;
      }>
    > {
      return outcomeOf({ articleId, revision: n }, async () => {
        const owner = await findArticleOwner(db, articleId);
        if (!owner) throw new DomainError('not_found', `No article ${articleId}`);
        const call = readCall(owner.accountId, staff, request);
        const [at, before, current, account] = await Promise.all([
          reads.revisions.get(call, articleId, n).then(unwrap),
          n > 1 ? reads.revisions.get(call, articleId, n - 1).then(unwrap) : Promise.resolve(null),
          reads.articles.get(call, articleId).then(unwrap),
          accountNameOf(db, owner.accountId),
        ]);
        await recordLook(staff, { operation: 'staff_view', accountId: owner.accountId, articleId, request });
        return { at, before, current, accountId: owner.accountId, account };
      });
    },
  };
}
