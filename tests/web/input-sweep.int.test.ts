import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { createPerson, type Person } from '../oauth/helpers.ts';
import { csrfOf, type InjectBrowser, injectBrowser, signInWith } from '../support/inject-browser.ts';
import { addSiteWithArticle, createTestRuntime } from '../support/runtime.ts';

/*
 * Hostile values in the web pages' paths and queries (NUL, a lone surrogate, malformed percent-encoding,
 * over-long values, numbers that are not numbers) over every GET page: each is answered with a page in
 * the layout (HTML: 400, 404, 414 for a path segment too long for the router, or the page itself when
 * the value is only a filter it ignores or shows as refused), never a 500 and never JSON. Pages of account holders are swept signed in as one, /staff pages as support staff.
 */

const PUBLIC_URL = 'http://cs.example.test';

/** Values a path segment or a query value may hold, percent-encoded as they travel. */
const HOSTILE = [
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%EF%BF%BF',
  '%C0%80',
  '%E0%A4%A',
  '%',
  '%25',
  '%0A',
  '%7F',
  'x'.repeat(3000),
  `${'%F0%9F%98%80'.repeat(400)}`,
  '-1',
  '0',
  '1.5',
  '1e3',
  '99999999999999999999',
  'NaN',
  '%2F',
  '%20',
  '%3Cscript%3E',
] as const;

let app: FastifyInstance;
let runtime: Runtime;
let drop: () => Promise<void>;
let dana: Person;
let siteId: string;
let articleId: string;
let holder: InjectBrowser;
let staff: InjectBrowser;

beforeAll(async () => {
  const test = await createTestRuntime('postgres');
  ({ runtime, drop } = test);
  dana = await createPerson(runtime);
  ({ siteId, articleId } = await addSiteWithArticle(runtime, dana.accountId));
  const sam = {
    name: 'Sam Support',
    email: `sam.${Date.now()}@example.com`,
    password: 'support password 2026',
  };
  await runtime.commands.addStaffMember(sam);
  app = await buildApp({
    runtime,
    // The sweep opens thousands of pages in a minute (hundreds of them heavy: revisions, restores):
    // the page-view limits are not what it tests.
    config: {
      PUBLIC_URL,
      LOG_LEVEL: 'silent',
      MEDIA_DIR: '/tmp/cs-web-sweep',
      PAGE_RATE_LIMIT_PER_MINUTE: 1_000_000,
      RATE_LIMIT_PER_MINUTE: 1_000_000,
    },
    logger: false,
  });
  holder = injectBrowser(app, { headers: { origin: PUBLIC_URL } });
  staff = injectBrowser(app, { headers: { origin: PUBLIC_URL } });
  await signInWith(holder, dana);
  await signInWith(staff, sam);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await drop?.();
});

/** A page in the layout, never an error of the server. */
function expectPage(res: LightMyRequestResponse, url: string): void {
  expect(res.statusCode, url).not.toBeGreaterThanOrEqual(500);
  if (res.statusCode >= 300 && res.statusCode < 400) return;
  // 414: a path segment longer than the router takes; 412, 422: a form's own refusals (its page again).
  expect([200, 400, 404, 412, 414, 422], url).toContain(res.statusCode);
  expect(res.headers['content-type'], url).toBe('text/html; charset=utf-8');
  expect(res.body, url).toContain('<main');
}

/** Every GET page of an account holder, each with `{v}` where a hostile value goes. */
const HOLDER_PAGES = (): string[] => [
  '/sites?page={v}',
  '/sites/{v}',
  `/sites/${siteId}?from={v}`,
  `/sites/${siteId}?to={v}`,
  `/sites/${siteId}?status={v}`,
  `/sites/${siteId}?page={v}`,
  `/sites/${siteId}?category={v}`,
  `/sites/${siteId}?backlinks_page={v}`,
  '/sites/{v}/report',
  `/sites/${siteId}/report?period={v}`,
  '/sites/{v}/report.csv',
  `/sites/${siteId}/report.csv?period={v}`,
  '/articles/{v}',
  `/articles/${articleId}?page={v}`,
  `/articles/${articleId}?restored={v}`,
  `/articles/${articleId}?unchanged={v}`,
  `/articles/${articleId}?saved={v}`,
  '/articles/{v}/edit',
  `/articles/${articleId}/edit?since={v}`,
  '/articles/{v}/featured-image',
  '/articles/{v}/revisions/1',
  `/articles/${articleId}/revisions/{v}`,
  '/articles/{v}/revisions/1/restore',
  `/articles/${articleId}/revisions/{v}/restore`,
  '/articles/{v}/as-of?date=2026-10-01&time=09:00',
  `/articles/${articleId}/as-of?date={v}&time=09:00`,
  `/articles/${articleId}/as-of?date=2026-10-01&time={v}`,
  '/activity?from={v}',
  '/activity?to={v}',
  '/activity?source={v}',
  '/activity?site_id={v}',
  '/activity?article_id={v}',
  '/activity?page={v}',
  '/activity?per_page={v}',
  '/connect?x={v}',
  '/connect/webhooks/{v}',
  '/connect/webhooks/whk_x?page={v}',
  '/connect/webhooks/whk_x?done={v}',
  '/connect/webhooks/whk_x?queued={v}',
  '/account/password?changed={v}',
  '/sign-in?return_to={v}',
  '/oauth/interaction/{v}',
];

const STAFF_PAGES = (): string[] => [
  '/staff?q={v}',
  '/staff/accounts/{v}',
  `/staff/accounts/${dana.accountId}?from={v}`,
  `/staff/accounts/${dana.accountId}?to={v}`,
  `/staff/accounts/${dana.accountId}?kind={v}`,
  `/staff/accounts/${dana.accountId}?page={v}`,
  `/staff/accounts/${dana.accountId}?format={v}`,
  '/staff/articles/{v}',
  `/staff/articles/${articleId}?page={v}`,
  '/staff/articles/{v}/revisions/1',
  `/staff/articles/${articleId}/revisions/{v}`,
  '/staff/articles/{v}/as-of?date=2026-10-01&time=09:00',
  `/staff/articles/${articleId}/as-of?date={v}&time=09:00`,
  `/staff/articles/${articleId}/as-of?date=2026-10-01&time={v}`,
];

/** Every form of an account holder, each with `{v}` where a hostile value goes. */
const HOLDER_FORMS = (): string[] => [
  '/articles/{v}/edit',
  '/articles/{v}/preview',
  '/articles/{v}/featured-image',
  '/articles/{v}/revisions/1/restore',
  `/articles/${articleId}/revisions/{v}/restore`,
  '/connect/keys/{v}/revoke',
  '/connect/assistants/{v}/disconnect',
  '/connect/webhooks/{v}/enable',
  '/connect/webhooks/{v}/disable',
  '/connect/webhooks/{v}/delete',
  '/connect/webhooks/{v}/deliveries/dlv_x/redeliver',
  '/connect/webhooks/whk_x/deliveries/{v}/redeliver',
  '/connect/webhooks/{v}/replay',
  '/oauth/interaction/{v}',
];

/**
 * Every template with every hostile value, loaded by `b` (or its form sent with the session's CSRF
 * token): what was not a page, one line each.
 */
async function sweep(
  b: InjectBrowser,
  templates: string[],
  form?: Record<string, string>,
): Promise<string[]> {
  const failures: string[] = [];
  for (const template of templates) {
    for (const value of HOSTILE) {
      const url = template.replace('{v}', value);
      const res = form ? await b.post(url, form) : await b.get(url);
      try {
        expectPage(res, url);
      } catch {
        failures.push(`${res.statusCode} ${res.headers['content-type']} ${url.slice(0, 120)}`);
      }
    }
  }
  return failures;
}

describe('hostile input on the web pages', () => {
  it("an account holder's pages answer every hostile path or query value with a 4xx page, never a 500", async () => {
    expect(await sweep(holder, HOLDER_PAGES())).toEqual([]);
  }, 120_000);

  it("an account holder's forms answer every hostile path value with a 4xx page, never a 500", async () => {
    const csrf = csrfOf((await holder.get('/connect')).body);
    expect(await sweep(holder, HOLDER_FORMS(), { csrf, from: '2026-11-01T10:00' })).toEqual([]);
  }, 120_000);

  it("an account holder's forms answer NUL and other control characters in every field with a page", async () => {
    const fields: Record<string, string[]> = {
      [`/articles/${articleId}/edit`]: ['title', 'body', 'reason', 'expected_revision'],
      [`/articles/${articleId}/preview`]: ['title', 'body', 'reason', 'expected_revision'],
      [`/articles/${articleId}/revisions/1/restore`]: ['reason', 'expected_revision'],
      '/account/password': ['current', 'password', 'repeat'],
      '/connect/keys': ['name', 'scope'],
      '/connect/webhooks': ['url', 'description', 'event.article.updated'],
      '/connect/webhooks/whk_x/replay': ['from'],
      '/connect/webhooks/whk_x/enable': ['back'],
    };
    const failures: string[] = [];
    for (const [path, names] of Object.entries(fields)) {
      for (const value of ['\u0000', 'a\u0000b', '\u0007', '\u007f', '\u0085', '\uffff']) {
        const csrf = csrfOf((await holder.get('/connect')).body);
        const form = Object.fromEntries(names.map((name) => [name, value]));
        const res = await holder.post(path, { ...form, csrf });
        try {
          expectPage(res, path);
        } catch {
          failures.push(`${res.statusCode} ${path} ${JSON.stringify(value)}`);
        }
      }
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it("support staff's pages answer every hostile path or query value with a 4xx page, never a 500", async () => {
    expect(await sweep(staff, STAFF_PAGES())).toEqual([]);
  }, 120_000);
});
