import { z } from 'zod';
import { AnchorType, BacklinkCategory } from '../../domain/backlink/events.ts';
import { DomainError } from '../../domain/errors.ts';
import { comparisonOf } from '../../domain/report/comparison.ts';
import { siteStatsAsOf } from '../../projections/article-history.ts';
import { type BacklinkRow, listBacklinks } from '../../projections/backlinks.ts';
import {
  type DailyStats,
  type Period,
  periodDays,
  resolvePeriod,
  type SiteStats,
  siteDailyStats,
  siteStats,
} from '../../projections/site-stats.ts';
import {
  findSite,
  listSiteOverview,
  listSites,
  ofOwnSite,
  type SiteRow,
  type SiteScope,
} from '../../projections/sites.ts';
import { type Call, type Outcome, outcomeOf } from './call.ts';
import {
  asOfParam,
  calendarDate,
  dateRange,
  fromParam,
  wireId as id,
  pageParam,
  pastInstant,
  perPageParam,
  rfc3339,
  timestamp,
  toolFields,
  toParam,
} from './contract.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';
import { type Listed, type ListQuery, listed, pageOf } from './lists.ts';

/*
 * The sites' contract: a site, its backlinks and its statistics for a period, as they are asked for
 * (the API's parameters, the tools' inputs, the pages' filters) and as they are answered (the wire
 * objects and their mappers); then the use cases.
 */

export const Site = z
  .object({
    id,
    name: z.string(),
    domain: z.string(),
    url: z.url(),
    created_at: timestamp,
  })
  .meta({
    id: 'Site',
    description: 'A website on the account.',
    example: {
      id: 'site_06h014k26k323kar2chmr6p5jr',
      name: 'Northside Plumbing',
      domain: 'northside-plumbing.example',
      url: 'https://northside-plumbing.example/',
      created_at: '2026-10-01T08:00:00Z',
    },
  });

export const Backlink = z
  .object({
    id,
    site_id: id,
    acquired_on: calendarDate,
    source_domain: z.string(),
    source_url: z.string(),
    target_url: z.string(),
    anchor_text: z.string(),
    anchor_type: AnchorType,
    category: BacklinkCategory,
  })
  .meta({
    id: 'Backlink',
    description: 'A link from another website to one of the account’s sites.',
    example: {
      id: 'bl_06h014k41f2z7xq29rrdb0mhtc',
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      acquired_on: '2026-11-03',
      source_domain: 'citylocalnews.example',
      source_url: 'https://citylocalnews.example/business/directory',
      target_url: 'https://northside-plumbing.example/',
      anchor_text: 'Northside Plumbing',
      anchor_type: 'branded',
      category: 'local',
    },
  });

export const Stats = z
  .object({
    site_id: id,
    period: z
      .object({ key: z.string(), from: calendarDate, to: calendarDate })
      .meta({ description: 'The period asked for, as inclusive UTC dates.' }),
    articles: z.object({ published: z.number().int().min(0) }),
    backlinks: z.object({
      total: z.number().int().min(0),
      industry: z.number().int().min(0),
      local: z.number().int().min(0),
    }),
    as_of: timestamp.optional().meta({
      description:
        'The instant asked for (`as_of`), when one was: the statistics from what had been recorded by then.',
    }),
  })
  .meta({
    id: 'Stats',
    description: 'Articles published and backlinks acquired in a period.',
    example: {
      site_id: 'site_06h014k26k323kar2chmr6p5jr',
      period: { key: '2026-10', from: '2026-10-01', to: '2026-10-31' },
      articles: { published: 12 },
      backlinks: { total: 30, industry: 18, local: 12 },
    },
  });

export const BacklinkQuery = z
  .strictObject({
    from: fromParam,
    to: toParam,
    category: BacklinkCategory.optional().meta({ description: 'Only industry or only local backlinks.' }),
    page: pageParam,
    per_page: perPageParam,
  })
  .superRefine(dateRange);
export const StatsQuery = z.strictObject({
  period: z
    .string()
    .regex(
      /^(this_month|last_month|last_30_days|(19[7-9]\d|[2-9]\d{3})-(0[1-9]|1[0-2]))$/,
      'must be this_month, last_month, last_30_days or a month YYYY-MM from 1970-01 on',
    )
    .default('this_month')
    .meta({
      description:
        'this_month (default), last_month, last_30_days (today and the 29 days before), or a month YYYY-MM. UTC. ' +
        'With `as_of`, this_month, last_month and last_30_days are counted from that instant’s day.',
      examples: ['2026-10'],
    }),
  as_of: asOfParam.optional().meta({
    description:
      'The statistics as they stood at this instant (RFC 3339, UTC; not in the future): articles by their status and ' +
      '`published_at` then, and the backlinks recorded by then.',
  }),
});
export type BacklinkListQuery = z.output<typeof BacklinkQuery>;

/* The tools' inputs: the same fields, described for a model. */

export const ListSitesInput = z.strictObject({ page: toolFields.page, per_page: toolFields.perPage });

export const ListBacklinksInput = z
  .strictObject({
    site_id: toolFields.siteId,
    from: toolFields.from('Only backlinks acquired'),
    to: toolFields.to('Only backlinks acquired'),
    category: BacklinkQuery.shape.category.meta({ description: 'Only industry or only local backlinks.' }),
    page: toolFields.page,
    per_page: toolFields.perPage,
  })
  .superRefine(dateRange);

export const GetStatsInput = z.strictObject({
  site_id: toolFields.siteId,
  period: StatsQuery.shape.period.meta({
    description:
      'this_month (default), last_month, last_30_days (today and the 29 days before), or a calendar month ' +
      'YYYY-MM. All UTC; with as_of, counted from that instant’s day.',
  }),
  as_of: StatsQuery.shape.as_of,
});

export type SiteOut = z.infer<typeof Site>;
export type BacklinkOut = z.infer<typeof Backlink>;
export type StatsOut = z.infer<typeof Stats>;

export function siteOut(row: SiteRow): SiteOut {
  return {
    id: row.id,
    name: row.name,
    domain: row.domain,
    url: row.url,
    created_at: rfc3339(row.created_at),
  };
}

export function backlinkOut(row: Omit<BacklinkRow, 'recorded_at'>): BacklinkOut {
  return {
    id: row.id,
    site_id: row.site_id,
    acquired_on: row.acquired_on,
    source_domain: row.source_domain,
    source_url: row.source_url,
    target_url: row.target_url,
    anchor_text: row.anchor_text,
    anchor_type: row.anchor_type,
    category: row.category,
  };
}

export function statsOut(siteId: string, period: Period, s: SiteStats): StatsOut {
  return {
    site_id: siteId,
    period: { key: period.key, from: period.from, to: period.to },
    articles: { published: s.articles_published },
    backlinks: {
      total: s.backlinks_industry + s.backlinks_local,
      industry: s.backlinks_industry,
      local: s.backlinks_local,
    },
  };
}

export type Sites = ReturnType<typeof createSites>;

/** A site with its counts: articles (every status), and this month's published articles and backlinks. */
export type SiteOverviewOut = SiteOut & {
  articles: number;
  this_month: { from: string; to: string; articles_published: number; backlinks: number };
};

/** One day of a report: what its stats bucket holds (zeros for a day without one). */
export type ReportDayOut = {
  date: string;
  articles_published: number;
  backlinks_industry: number;
  backlinks_local: number;
};

/**
 * A period's report: the site, every day of the period, its totals, and what the totals compare
 * (domain/report/comparison.ts): the period up to today against as many days at the start of the
 * period before while it has not ended, the whole period against the one before once it has.
 */
export type ReportOut = {
  site: SiteOut;
  days: ReportDayOut[];
  /** The period's totals: the sums of `days`. */
  stats: StatsOut;
  comparison: {
    /** True when the period has not ended: `now` stops at today. */
    partial: boolean;
    /** The totals of the period's part compared (its key is the period's). */
    now: StatsOut;
    /** The totals of what it is compared with (key `previous`). */
    before: StatsOut;
  };
};

/** The period of a key, or `invalid_request` naming the key. */
function periodOf(key: string, today: Date): Period {
  try {
    return resolvePeriod(key, today);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new DomainError('invalid_request', error.message, [
      { field: 'period', message: 'must be this_month, last_month, last_30_days or a month YYYY-MM' },
    ]);
  }
}

/** Every day of the period with its counters, zeros where the read model has no bucket. Pure. */
export function everyDay(period: Pick<Period, 'from' | 'to'>, rows: readonly DailyStats[]): ReportDayOut[] {
  const byDay = new Map(rows.map((r) => [r.day, r]));
  return periodDays(period).map((date) => {
    const r = byDay.get(date);
    return {
      date,
      articles_published: r?.articles_published ?? 0,
      backlinks_industry: r?.backlinks_industry ?? 0,
      backlinks_local: r?.backlinks_local ?? 0,
    };
  });
}

/** The account's sites, a site's backlinks and its statistics for a period. */
export function createSites(deps: Pick<ApplicationDeps, 'db' | 'reads' | 'now'>) {
  const reads = readsOf(deps);
  /** A site of the call's account (`not_found` otherwise, answered by the read itself). */
  const scopeOf = (call: Call, siteId: string): SiteScope => ({
    accountId: call.principal.accountId,
    siteId,
    liveKey: call.principal.liveKey,
  });
  return {
    /** One site of the account; `not_found` otherwise. */
    get(call: Call, siteId: string): Promise<Outcome<SiteOut>> {
      return outcomeOf({ siteId }, async () => {
        const { accountId } = call.principal;
        const row = await reads.read(accountId, (db) => findSite(db, accountId, siteId));
        if (!row) throw new DomainError('not_found', `No site ${siteId}`);
        return siteOut(row);
      });
    },

    /** A page of the account's sites, oldest first, each with its counts (see SiteOverviewOut). */
    overview(call: Call, query: ListQuery): Promise<Outcome<Listed<SiteOverviewOut>>> {
      return outcomeOf({}, async () => {
        const month = periodOf('this_month', deps.now());
        const { accountId } = call.principal;
        const page = await reads.read(accountId, (db) =>
          listSiteOverview(db, accountId, pageOf(query), month.from),
        );
        return listed(page, query, (row) => ({
          ...siteOut(row),
          articles: row.articles,
          this_month: {
            from: month.from,
            to: month.to,
            articles_published: row.articles_published_in_month,
            backlinks: row.backlinks_in_month,
          },
        }));
      });
    },

    /**
     * A period's report (this_month, last_month, last_30_days, YYYY-MM): per day articles published and
     * backlinks acquired, the totals, and the totals of the period before.
     */
    report(call: Call, siteId: string, periodKey: string): Promise<Outcome<ReportOut>> {
      return outcomeOf({ siteId }, async () => {
        const scope = scopeOf(call, siteId);
        const today = deps.now();
        const period = periodOf(periodKey, today);
        const compared = comparisonOf(period, today.toISOString().slice(0, 10));
        const before: Period = { key: 'previous', ...compared.before };
        const [site, rows, previous] = await reads.read(scope.accountId, (db) =>
          Promise.all([
            findSite(db, scope.accountId, siteId),
            ofOwnSite(scope, siteDailyStats(db, scope, period)),
            ofOwnSite(scope, siteStats(db, scope, before)),
          ]),
        );
        if (!site) throw new DomainError('not_found', `No site ${siteId}`);
        const days = everyDay(period, rows);
        const totals = (from: string, to: string): SiteStats => {
          const within = days.filter((d) => d.date >= from && d.date <= to);
          const sum = (pick: (d: ReportDayOut) => number): number => within.reduce((n, d) => n + pick(d), 0);
          return {
            articles_published: sum((d) => d.articles_published),
            backlinks_industry: sum((d) => d.backlinks_industry),
            backlinks_local: sum((d) => d.backlinks_local),
          };
        };
        const { now } = compared;
        return {
          site: siteOut(site),
          days,
          stats: statsOut(siteId, period, totals(period.from, period.to)),
          comparison: {
            partial: compared.partial,
            now: statsOut(siteId, { ...period, ...now }, totals(now.from, now.to)),
            before: statsOut(siteId, before, previous),
          },
        };
      });
    },

    /** A page of the account's sites, oldest first. */
    list(call: Call, query: ListQuery): Promise<Outcome<Listed<SiteOut>>> {
      return outcomeOf({}, async () => {
        const { accountId } = call.principal;
        return listed(
          await reads.read(accountId, (db) => listSites(db, accountId, pageOf(query))),
          query,
          siteOut,
        );
      });
    },

    /** A page of a site's backlinks, newest first, filtered by date and category. */
    backlinks(call: Call, siteId: string, query: BacklinkListQuery): Promise<Outcome<Listed<BacklinkOut>>> {
      return outcomeOf({ siteId }, async () => {
        const scope = scopeOf(call, siteId);
        const { from, to, category } = query;
        const page = await reads.read(scope.accountId, (db) =>
          ofOwnSite(scope, listBacklinks(db, scope, { ...pageOf(query), from, to, category })),
        );
        return listed(page, query, backlinkOut);
      });
    },

    /**
     * Articles published and backlinks acquired in a period (this_month, last_month, last_30_days,
     * YYYY-MM); with `asOf`, as they stood at that instant (a relative period counted from its day).
     */
    stats(call: Call, siteId: string, period: string, asOf?: string): Promise<Outcome<StatsOut>> {
      return outcomeOf({ siteId }, async () => {
        const scope = scopeOf(call, siteId);
        if (asOf !== undefined) {
          const where = call.principal.origin === 'mcp' ? 'arguments' : 'query';
          const instant = pastInstant(asOf, deps.now(), where);
          const resolved = periodOf(period, instant);
          const stats = await reads.read(scope.accountId, (db) =>
            ofOwnSite(scope, siteStatsAsOf(db, scope, resolved, instant)),
          );
          return { ...statsOut(siteId, resolved, stats), as_of: rfc3339(instant) };
        }
        const resolved = periodOf(period, deps.now());
        const stats = await reads.read(scope.accountId, (db) =>
          ofOwnSite(scope, siteStats(db, scope, resolved)),
        );
        return statsOut(siteId, resolved, stats);
      });
    },
  };
}
