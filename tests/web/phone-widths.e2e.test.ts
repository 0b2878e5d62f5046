import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { authorizeUrl, PUBLIC_CLIENT, pkce, registerClient } from '../oauth/helpers.ts';
import { ROOT } from '../support/process.ts';
import { PATIENCE_API } from '../support/wait.ts';
import {
  articleWithTwoRevisions,
  createStaff,
  screenshot,
  signIn,
  staffSignIn,
  startWebApp,
  type WebApp,
} from '../support/web.ts';
import { connectAssistant } from './site-helpers.ts';

/*
 * Every page of the web app on a phone (390 px wide), in the light and the dark colour scheme, on
 * seeded data (sites, articles, backlinks, keys, connected assistants, webhooks, a report), with the
 * API reference and an assistant's consent page: nothing is
 * wider than the screen (document.documentElement.scrollWidth <= 390); a failure names the elements
 * that stick out. The pages opened are checked against the GET routes the web face registers
 * (apps/server/web/*.ts), so a new page cannot be left out. A screenshot of each, to look at.
 */

const WIDTH = 390;
const staff = { name: 'Pat Phone', email: 'pat.phone@example.com', password: 'support password 2026' };

/** GET routes of the web face that are not pages: the redirect of `/`, the report's CSV. */
const NOT_PAGES = new Set(['/', '/sites/:id/report.csv']);

/**
 * The GET routes the web face registers (`app.get('/path'` or `app.get<…>(\n '/path'`), from the
 * source of apps/server/web/ (pages.ts and the modules it registers, with sign-in and Connect Site);
 * a path built from a template (`${path}/:id`) stands for any prefix.
 */
async function webGetRoutes(): Promise<string[]> {
  const dir = join(ROOT, 'apps/server/web');
  const routes = new Set<string>();
  for (const file of await readdir(dir)) {
    if (!file.endsWith('.ts')) continue;
    const source = await readFile(join(dir, file), 'utf8');
    for (const m of source.matchAll(/\.get(?:<[\s\S]*?>)?\(\s*['`](\/[^'`]*)['`]/g)) {
      routes.add(m[1] as string);
    }
  }
  return [...routes].filter((r) => !NOT_PAGES.has(r)).sort();
}

/** A route's pattern as a regular expression over a path (`:param` one segment, `${…}` anything). */
function routeRegExp(route: string): RegExp {
  const parts = route.split(/(\$\{[^}]+\}|:[A-Za-z]+)/);
  const source = parts
    .map((p) =>
      p.startsWith('${') ? '.+' : p.startsWith(':') ? '[^/]+' : p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^${source}$`);
}

/**
 * The elements that make the page wider than its viewport: those whose right edge passes it, with
 * no ancestor that clips or scrolls them, innermost first (a `tag#id.class` path each). Run in the
 * page (as a string: these files are typed without the DOM library).
 */
const OVERFLOWING = `(() => {
  const view = document.documentElement.clientWidth;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + [...el.classList].map((c) => '.' + c).join('');
  const clipped = (el) => {
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== 'visible') return true;
    }
    return false;
  };
  const wide = [...document.body.querySelectorAll('*')].filter(
    (el) => el.getBoundingClientRect().right > view + 0.5 && !clipped(el),
  );
  const innermost = wide.filter((el) => !wide.some((other) => other !== el && el.contains(other)));
  const path = (el) => {
    const names = [];
    for (let at = el; at && at !== document.body; at = at.parentElement) names.unshift(name(at));
    return names.join(' > ') + ' (right edge ' + Math.round(el.getBoundingClientRect().right) + ' px)';
  };
  return { scrollWidth: document.documentElement.scrollWidth, culprits: innermost.slice(0, 8).map(path) };
})()`;

function overflowing(page: Page): Promise<{ scrollWidth: number; culprits: string[] }> {
  return page.evaluate(OVERFLOWING);
}

describe(`every page at ${WIDTH} px`, () => {
  let web: WebApp;
  let siteId: string;
  let articleId: string;
  let webhookId: string;
  /** Where an assistant sends the person to allow it: the consent page, once signed in. */
  let authorize: string;

  beforeAll(async () => {
    web = await startWebApp({ articles: 8, backlinks: 24 });
    await createStaff(web, staff);
    siteId = web.demo.sites[0]?.id as string;
    const hook = await web.api('/webhooks', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        url: 'https://hooks.example.com/content-service/notifications/a-rather-long-path-for-a-phone',
        events: ['article.published', 'article.updated', 'backlink.acquired', 'report.ready'],
        description: 'Publishing notices for the team chat',
      }),
    });
    expect(hook.status).toBe(201);
    webhookId = ((await hook.json()) as { id: string }).id;
    articleId = await articleWithTwoRevisions(web, siteId, 'A title edited on the way to a phone');
    // The edit's `article.updated` goes to the endpoint: its page lists a delivery.
    await vi.waitFor(async () => {
      const res = await web.api(`/webhooks/${webhookId}/deliveries`);
      expect(((await res.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0);
    }, PATIENCE_API);
    const client = await registerClient(web.url, {
      ...PUBLIC_CLIENT,
      client_name: 'A research assistant with a rather long name, on a phone',
      redirect_uris: ['http://127.0.0.1:43117/callback'],
    });
    expect(client.status).toBe(201);
    const { client_id } = (await client.json()) as { client_id: string };
    const url = authorizeUrl(web.url, {
      response_type: 'code',
      client_id,
      redirect_uri: 'http://127.0.0.1:43117/callback',
      scope: 'content:read content:write',
      resource: `${web.url}/mcp`,
      code_challenge: pkce().challenge,
      code_challenge_method: 'S256',
    });
    authorize = `${url.pathname}${url.search}`;
    // Two assistants of the same name, connected from two addresses.
    for (const [i, host] of ['claude.ai', 'assistant.example-workplace.com'].entries()) {
      await connectAssistant(web, {
        grantId: `grant_phone_${i}`,
        clientId: `client_phone_${i}`,
        name: 'Claude',
        host,
        daysAgo: 3 + i,
      });
    }
  }, 120_000);
  afterAll(async () => {
    await web?.stop();
  });

  const newContext = (scheme: 'light' | 'dark', javaScript = false): Promise<BrowserContext> =>
    web.browser.newContext({
      viewport: { width: WIDTH, height: 844 },
      colorScheme: scheme,
      javaScriptEnabled: javaScript,
    });

  /** Opens each path and checks its width; every failure of the batch is reported at once. */
  async function check(context: BrowserContext, paths: [string, number][], tag: string): Promise<void> {
    const page = await context.newPage();
    const failures: string[] = [];
    for (const [path, status] of paths) {
      const response = await page.goto(`${web.url}${path}`);
      expect(response?.status(), path).toBe(status);
      const { scrollWidth, culprits } = await overflowing(page);
      if (scrollWidth > WIDTH) {
        failures.push(`${path} (${tag}) is ${scrollWidth} px wide:\n  ${culprits.join('\n  ')}`);
      }
      // A long address (the authorization request) is named by the page it lands on.
      const name = (path.length > 80 ? new URL(page.url()).pathname.replace(/[\w-]{20,}/g, 'uid') : path)
        .replace(/[a-z]{2,5}_[0-9a-z]{26}/g, 'id')
        .replace(/[^a-z0-9]+/gi, '-')
        .replace(/^-|-+$/g, '');
      await screenshot(page, `phone-${tag}-${name || 'root'}`);
    }
    await page.close();
    expect(failures, failures.join('\n')).toEqual([]);
  }

  const signedOutPages: [string, number][] = [['/sign-in', 200]];
  /** "View as of…" this second (UTC), after every revision the test made. */
  const asOfNow = (): string => {
    const now = new Date().toISOString();
    return `date=${now.slice(0, 10)}&time=${now.slice(11, 19)}`;
  };
  const accountPages = (): [string, number][] => [
    ['/sites', 200],
    [`/sites/${siteId}`, 200],
    [`/sites/${siteId}/report`, 200],
    [`/sites/${siteId}/report?period=last_30_days`, 200],
    [`/sites/${siteId}/report?period=next_year`, 400],
    [`/articles/${articleId}`, 200],
    [`/articles/${articleId}/edit`, 200],
    [`/articles/${articleId}/edit?since=1`, 200],
    [`/articles/${articleId}/featured-image`, 200],
    [`/articles/${articleId}/revisions/1`, 200],
    [`/articles/${articleId}/revisions/1/restore`, 200],
    [`/articles/${articleId}/revisions/compare?from=1&to=1`, 200],
    [`/articles/${articleId}/as-of?${asOfNow()}`, 200],
    [`/articles/${articleId}/as-of?date=2020-01-01&time=09:00`, 404],
    ['/activity', 200],
    ['/search?q=homeowners', 200],
    ['/search?q=the', 400],
    ['/connect', 200],
    [`/connect/webhooks/${webhookId}`, 200],
    ['/account/password', 200],
    ['/no-such-page', 404],
    ['/docs', 200],
    [authorize, 200],
  ];
  const staffPages = (): [string, number][] => [
    ['/staff', 200],
    [`/staff?q=${encodeURIComponent(web.demo.email.slice(0, 8))}`, 200],
    [`/staff/accounts/${web.demo.account_id}`, 200],
    [`/staff/articles/${articleId}`, 200],
    [`/staff/articles/${articleId}/revisions/1`, 200],
    [`/staff/articles/${articleId}/as-of?${asOfNow()}`, 200],
    ['/staff/audit', 200],
  ];

  for (const scheme of ['light', 'dark'] as const) {
    it(`the sign-in page, ${scheme}`, async () => {
      const context = await newContext(scheme);
      await check(context, signedOutPages, `${WIDTH}-${scheme}`);
      await context.close();
    });

    it(`an account holder's pages, ${scheme}`, async () => {
      const context = await newContext(scheme);
      const page = await context.newPage();
      await signIn(page, web.url, web.demo);
      await check(context, accountPages(), `${WIDTH}-${scheme}`);
      await context.close();
    }, 120_000);

    it(`the editor with its script (the rich editor), ${scheme}`, async () => {
      const context = await newContext(scheme, true);
      const page = await context.newPage();
      await signIn(page, web.url, web.demo);
      await check(context, [[`/articles/${articleId}/edit`, 200]], `${WIDTH}-${scheme}-js`);
      await context.close();
    });

    it(`the support staff's pages, ${scheme}`, async () => {
      const context = await newContext(scheme);
      const page = await context.newPage();
      await staffSignIn(page, web.url, staff);
      await check(context, staffPages(), `${WIDTH}-${scheme}`);
      await context.close();
    }, 120_000);
  }

  it('opens every GET page the web face registers', async () => {
    const routes = await webGetRoutes();
    expect(routes.length).toBeGreaterThan(10);
    const opened = [...signedOutPages, ...accountPages(), ...staffPages()].map(
      ([path]) => new URL(path, web.url).pathname,
    );
    const missed = routes.filter((route) => !opened.some((path) => routeRegExp(route).test(path)));
    expect(missed, `pages the tests above do not open: ${missed.join(', ')}`).toEqual([]);
  });
});
