import pg from 'pg';
import { expect } from 'vitest';
import { cli } from '../support/process.ts';
import type { WebApp } from '../support/web.ts';

/*
 * Shared by the site pages' tests: the API's answers to compare the pages with, and waiting for the
 * asynchronous read models (backlinks, stats) to hold what the seed made.
 */

export type Stats = {
  period: { key: string; from: string; to: string };
  articles: { published: number };
  backlinks: { total: number; industry: number; local: number };
};

export async function apiJson<T>(web: WebApp, path: string): Promise<T> {
  const res = await web.api(path);
  expect(res.status, path).toBe(200);
  return (await res.json()) as T;
}

export const stats = (web: WebApp, siteId: string, period: string): Promise<Stats> =>
  apiJson<Stats>(web, `/sites/${siteId}/stats?period=${period}`);

/** This month and the six months before, as YYYY-MM (the seed spreads its dates over 180 days). */
export function recentMonths(today = new Date()): string[] {
  return [0, 1, 2, 3, 4, 5, 6].map((i) =>
    new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - i, 1)).toISOString().slice(0, 7),
  );
}

/**
 * Waits until the backlinks and stats read models hold every seeded backlink and published article of
 * each site: the monthly stats of the recent months add up to the lists' totals.
 */
export async function waitForReadModels(web: WebApp, backlinksPerSite: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    let ready = true;
    for (const site of web.demo.sites) {
      const backlinks = await apiJson<{ meta: { total: number } }>(
        web,
        `/sites/${site.id}/backlinks?per_page=1`,
      );
      const published = await apiJson<{ meta: { total: number } }>(
        web,
        `/sites/${site.id}/articles?status=published&per_page=1`,
      );
      let articles = 0;
      let links = 0;
      for (const month of recentMonths()) {
        const s = await stats(web, site.id, month);
        articles += s.articles.published;
        links += s.backlinks.total;
      }
      if (
        backlinks.meta.total !== backlinksPerSite ||
        links !== backlinksPerSite ||
        articles !== published.meta.total
      ) {
        ready = false;
      }
    }
    if (ready) return;
    if (Date.now() > deadline) throw new Error('the read models did not catch up in 30 s');
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A site of another account (a second demo account on the same database). */
export async function anotherAccountsSite(web: WebApp): Promise<string> {
  const seeded = await cli(
    ['seed-demo', '--json', '--sites', '1', '--articles', '1', '--backlinks', '1', '--seed', '99'],
    web.env,
  );
  expect(seeded.code, seeded.stderr).toBe(0);
  const other = JSON.parse(seeded.stdout) as { sites: { id: string }[] };
  return (other.sites[0] as { id: string }).id;
}

/**
 * An assistant connected to the demo account, as the consent page leaves it (an `oauth_grants` row and
 * its live Grant in `oauth_models`), connected `daysAgo` days ago and last used now.
 */
export async function connectAssistant(
  web: WebApp,
  a: { grantId: string; clientId: string; name: string; host: string; daysAgo: number },
): Promise<void> {
  const sql = new pg.Client({ connectionString: web.env.DATABASE_URL });
  await sql.connect();
  try {
    await sql.query(`insert into oauth_models (kind, id, payload, grant_id) values ('Grant', $1, '{}', $1)`, [
      a.grantId,
    ]);
    await sql.query(
      `insert into oauth_grants (grant_id, account_id, client_id, client_name, redirect_host, scope, created_at, last_used_at)
       values ($1, $2, $3, $4, $5, 'content:read content:write', now() - make_interval(days => $6), now())`,
      [a.grantId, web.demo.account_id, a.clientId, a.name, a.host, a.daysAgo],
    );
  } finally {
    await sql.end();
  }
}
