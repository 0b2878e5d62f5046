import { sql } from 'kysely';
import type { Actor } from '../../domain/event.ts';
import type { Db } from '../../infra/db/schema.ts';
import { newPassword } from '../../infra/ids.ts';
import type { Commands } from '../application/commands/index.ts';
import { demoArticle, demoBacklink, demoSite, seededRandom } from './demo-content.ts';
import { progressBar } from './progress.ts';

type SeedOptions = {
  sites: number;
  articles: number;
  backlinks: number;
  seed?: number;
  quiet?: boolean;
};
export type SeedResult = {
  account_id: string;
  email: string;
  password: string;
  api_key: string;
  sites: { id: string; domain: string }[];
};

const DAY = 86_400_000;
const pipeline: Actor = { type: 'system', id: 'seed-demo', name: 'Demo data' };

/**
 * A new demo account with sites, articles (bodies with protected links) and backlinks, made through
 * the same command handlers as everything else, and a write-scoped API key. Counts are per site.
 */
export async function seedDemo(
  runtime: { commands: Commands },
  opts: SeedOptions,
  now: Date = new Date(),
): Promise<SeedResult> {
  const { commands } = runtime;
  const rnd = seededRandom(opts.seed ?? Math.floor(Math.random() * 2 ** 31));
  const tag = Math.floor(rnd() * 36 ** 6)
    .toString(36)
    .padStart(6, '0');
  const email = `demo-${tag}@example.com`;
  const password = newPassword();
  const { accountId } = await commands.openAccount({ name: `Demo account ${tag}`, email, password });
  const key = await commands.createApiKey(accountId, { name: 'Demo key', scope: 'write' });

  const sites: SeedResult['sites'] = [];
  const total = opts.sites * (1 + opts.articles + opts.backlinks);
  const bar = opts.quiet ? null : progressBar('seed-demo', total);
  let done = 0;
  for (let s = 0; s < opts.sites; s++) {
    const site = demoSite(s);
    const { siteId } = await commands.addSite(accountId, {
      name: site.name,
      domain: site.domain,
      url: `https://${site.domain}/`,
    });
    sites.push({ id: siteId, domain: site.domain });
    bar?.update(++done);
    for (let a = 0; a < opts.articles; a++) {
      const article = demoArticle(rnd, site, a);
      const roll = rnd();
      // A site's first article is never a draft (it is published a day ago where the roll says
      // draft): every demo site has an article in its list, even with --articles 1.
      const firstDraft = a === 0 && roll < 0.08;
      const status = firstDraft
        ? 'published'
        : roll < 0.08
          ? 'draft'
          : roll < 0.12
            ? 'scheduled'
            : roll < 0.15
              ? 'archived'
              : 'published';
      const publishedAt = firstDraft
        ? new Date(now.getTime() - DAY)
        : status === 'draft'
          ? null
          : status === 'scheduled'
            ? new Date(now.getTime() + Math.ceil(rnd() * 30) * DAY)
            : new Date(now.getTime() - Math.floor(rnd() * 180 * DAY));
      await commands.createArticle(
        accountId,
        {
          siteId,
          title: article.title,
          body: article.body,
          url: article.url,
          status,
          publishedAt: publishedAt ? publishedAt.toISOString() : null,
          targetKeyword: article.targetKeyword,
          featuredImage:
            rnd() < 0.7
              ? {
                  url: `https://images.${site.domain}/articles/${a + 1}.jpg`,
                  alt: article.title,
                  width: 1200,
                  height: 630,
                }
              : null,
        },
        { origin: 'rewrite', actor: pipeline },
      );
      bar?.update(++done);
    }
    for (let b = 0; b < opts.backlinks; b++) {
      const acquiredOn = new Date(now.getTime() - Math.floor(rnd() * 180 * DAY)).toISOString().slice(0, 10);
      await commands.acquireBacklink(accountId, { siteId, acquiredOn, ...demoBacklink(rnd, site) });
      bar?.update(++done);
    }
  }
  bar?.stop();
  return { account_id: accountId, email, password, api_key: key.key, sites };
}

/**
 * The demo account `npm start` makes on a database that has never stored anything (no event yet):
 * smaller than seed-demo's default, so that the first start stays quick.
 */
export const FIRST_START_DEMO: SeedOptions = { sites: 2, articles: 6, backlinks: 12, quiet: true };

/**
 * `seedDemo` on an empty database, null on one that holds anything: a start on a database that was
 * used (by the first start's demo or anything else) makes nothing.
 */
export async function seedDemoIfEmpty(
  runtime: { db: Db; commands: Commands },
  opts: SeedOptions & { shared?: boolean } = FIRST_START_DEMO,
): Promise<SeedResult | null> {
  const ifEmpty = async (): Promise<SeedResult | null> => {
    const used = await runtime.db.selectFrom('events').select('position').limit(1).executeTakeFirst();
    return used === undefined ? seedDemo(runtime, opts) : null;
  };
  if (!opts.shared) return ifEmpty();
  // A PostgreSQL server that several processes start on at once: one makes the account while it
  // holds the lock (on a connection of its own); the others then find its events and make none.
  return runtime.db.connection().execute(async (connection) => {
    await sql`select pg_advisory_lock(hashtext('first-start-demo'))`.execute(connection);
    try {
      return await ifEmpty();
    } finally {
      await sql`select pg_advisory_unlock(hashtext('first-start-demo'))`.execute(connection);
    }
  });
}

/** What `npm start` prints, in plain words, after making the first start's demo account. */
export function firstStartMessage(demo: SeedResult, address: string): string {
  return [
    '',
    `Content Service is running. Open ${address} in a browser and sign in with:`,
    '',
    `  email     ${demo.email}`,
    `  password  ${demo.password}`,
    '',
    'This is the demo account made for this new database: its sites, articles and backlinks are made up.',
    'The password is shown only this once. DEMO_ON_FIRST_START=false starts a new database without it.',
    '',
  ].join('\n');
}
