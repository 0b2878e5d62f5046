import { findArticleSite, suggestArticles } from '../../projections/articles.ts';
import { suggestRevisions } from '../../projections/revisions.ts';
import { suggestSites } from '../../projections/sites.ts';
import { type Call, type Outcome, outcomeOf } from './call.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { StatsQuery } from './sites.ts';

/*
 * Suggestions for an argument being typed (MCP's completions): the account's sites by name, domain or id,
 * its articles by title or id, an article's revision numbers, and the periods the statistics take. What
 * is not the account's suggests nothing, as an unknown id does.
 */

/** At most this many values per answer (MCP's completion/complete allows 100). */
export const SUGGESTIONS_MAX = 100;

/** Months offered besides the named periods: this one and the ones before it. */
export const RECENT_MONTHS = 24;

/** The values that start with what was typed, at most SUGGESTIONS_MAX, and how many there are in all. */
export type Suggested = { values: string[]; total: number };

const NAMED_PERIODS = ['this_month', 'last_month', 'last_30_days'] as const;

/** A month as the statistics name it: `YYYY-MM`. */
function monthKey(year: number, monthIndex: number): string {
  const date = new Date(Date.UTC(year, monthIndex, 1));
  return `${String(date.getUTCFullYear()).padStart(4, '0')}-${String(date.getUTCMonth() + 1).padStart(2, '0')}`;
}

/**
 * The periods that start with `prefix`, in the forms get_stats takes (its own schema checks each): the
 * named ones, then this month and the RECENT_MONTHS - 1 before it, newest first; a prefix naming a year
 * (`2024`, `2024-0`) also gets that year's months up to this one. Pure.
 */
export function suggestPeriods(prefix: string, today: Date): Suggested {
  const year = today.getUTCFullYear();
  const month = today.getUTCMonth();
  const keys: string[] = [...NAMED_PERIODS];
  for (let back = 0; back < RECENT_MONTHS; back++) keys.push(monthKey(year, month - back));
  const named = /^(\d{4})(-|$)/.exec(prefix);
  if (named) {
    const asked = Number(named[1]);
    const last = asked === year ? month : 11;
    if (asked <= year) for (let m = last; m >= 0; m--) keys.push(monthKey(asked, m));
  }
  const accepted = [...new Set(keys)].filter(
    (key) => key.startsWith(prefix) && StatsQuery.shape.period.safeParse(key).success,
  );
  return { values: accepted.slice(0, SUGGESTIONS_MAX), total: accepted.length };
}

export type Suggestions = ReturnType<typeof createSuggestions>;

export function createSuggestions(deps: Pick<ApplicationDeps, 'db' | 'reads' | 'now'>) {
  const reads = readsOf(deps);
  return {
    /** The account's site ids whose site's name, domain or id starts with `prefix`, oldest site first. */
    sites(call: Call, prefix: string): Promise<Outcome<Suggested>> {
      return outcomeOf({}, async () => {
        const { accountId } = call.principal;
        const found = await reads.read(accountId, (db) =>
          suggestSites(db, accountId, prefix, SUGGESTIONS_MAX),
        );
        return { values: found.rows.map((row) => row.id), total: found.total };
      });
    },

    /** The account's article ids (of one site, with `siteId`) whose title or id starts with `prefix`, by title. */
    articles(call: Call, prefix: string, siteId?: string): Promise<Outcome<Suggested>> {
      return outcomeOf(siteId === undefined ? {} : { siteId }, async () => {
        const { accountId } = call.principal;
        const found = await reads.read(accountId, (db) =>
          suggestArticles(db, { accountId, siteId, prefix, limit: SUGGESTIONS_MAX }),
        );
        return { values: found.rows.map((row) => row.id), total: found.total };
      });
    },

    /** The revision numbers of one of the account's articles that start with `prefix`, newest first. */
    revisions(call: Call, articleId: string, prefix: string): Promise<Outcome<Suggested>> {
      return outcomeOf({ articleId }, async (note) => {
        const { accountId, liveKey } = call.principal;
        return reads.read(accountId, async (db) => {
          const siteId = await findArticleSite(db, accountId, articleId, liveKey);
          if (!siteId) return { values: [], total: 0 };
          note.site(siteId);
          const found = await suggestRevisions(db, articleId, prefix, SUGGESTIONS_MAX);
          return { values: found.revisions.map(String), total: found.total };
        });
      });
    },

    /** The periods the statistics take that start with `prefix` (suggestPeriods), as of today. */
    periods(_call: Call, prefix: string): Promise<Outcome<Suggested>> {
      return outcomeOf({}, async () => suggestPeriods(prefix, deps.now()));
    },
  };
}
