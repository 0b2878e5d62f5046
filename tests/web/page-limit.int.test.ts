import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { HEAVY_BODY_BYTES } from '../../apps/server/http/heavy-work.ts';
import { createHeavyPageLimiter, createPageLimiter } from '../../infra/limits.ts';
import { createPerson } from '../oauth/helpers.ts';
import { type InjectBrowser, injectBrowser, signInWith } from '../support/inject-browser.ts';
import { addSiteWithArticle, createTestRuntime } from '../support/runtime.ts';

/*
 * Page views per session, like the API's requests per account: RateLimit fields on every page, and
 * past the budget a 429 page with Retry-After, sent before the request's body is read. Each session
 * has its own budget. Heavy pages (revisions, restores, large bodies) also spend their account's
 * heavy-page budget, whichever session opens them.
 */

const QUOTA = 3;
const HEAVY_QUOTA = 2;
let app: FastifyInstance;
let runtime: Runtime;
let drop: () => Promise<void>;

async function signedIn(address: string): Promise<InjectBrowser> {
  const person = await createPerson(runtime);
  const b = injectBrowser(app, { remoteAddress: address });
  await signInWith(b, person);
  return b;
}

beforeAll(async () => {
  const test = await createTestRuntime('postgres');
  runtime = test.runtime;
  drop = test.drop;
  const quiet = { info() {}, warn() {} };
  app = await buildApp({
    runtime,
    config: { PUBLIC_URL: 'http://cs.example.test', LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-web-test' },
    logger: false,
    pageLimit: createPageLimiter({ perMinute: QUOTA, logger: quiet }),
    heavyPageLimit: createHeavyPageLimiter({ perMinute: HEAVY_QUOTA, logger: quiet }),
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await drop?.();
});

describe('page views per session', () => {
  it('states the budget on every page and refuses past it with a readable 429 page and Retry-After', async () => {
    const b = await signedIn('198.51.100.1');
    for (let i = 0; i < QUOTA; i++) {
      const page = await b.get('/sites');
      expect(page.statusCode).toBe(200);
      expect(page.headers['ratelimit-policy']).toBe(`"pages";q=${QUOTA};w=60`);
      expect(page.headers.ratelimit).toMatch(new RegExp(`^"pages";r=${QUOTA - 1 - i};t=\\d+$`));
    }
    const refused = await b.get('/sites');
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(refused.headers['content-type']).toContain('text/html');
    expect(refused.headers['cache-control']).toBe('no-store');
    expect(refused.body).toContain('<h1>Too many pages at once</h1>');
    expect(refused.body).toMatch(/Wait \d+ seconds?, then reload the page/);
    // Refused before the body is read: a form post is refused alike, whatever it carries.
    const post = await app.inject({
      method: 'POST',
      url: '/articles/art_x/edit',
      remoteAddress: '198.51.100.1',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      },
      payload: 'a&'.repeat(1000),
    });
    expect(post.statusCode).toBe(429);
  });

  it('gives each session its own budget, and a client without one the budget of its address', async () => {
    const address = '198.51.100.2';
    const first = await signedIn(address);
    for (let i = 0; i < QUOTA; i++) await first.get('/sites');
    expect((await first.get('/sites')).statusCode).toBe(429);
    const second = await signedIn(address);
    expect((await second.get('/sites')).statusCode).toBe(200);
    const anonymous = injectBrowser(app, { remoteAddress: address });
    for (let i = 0; i < QUOTA; i++) expect((await anonymous.get('/sites')).statusCode).toBe(303);
    expect((await anonymous.get('/sites')).statusCode).toBe(429);
  });
});

describe('heavy pages per account', () => {
  it("counts an account's revision pages and large posts against one budget, whichever session opens them", async () => {
    const person = await createPerson(runtime);
    const { articleId } = await addSiteWithArticle(runtime, person.accountId);
    const revision = `/articles/${articleId}/revisions/1`;
    const first = injectBrowser(app, { remoteAddress: '198.51.100.3' });
    await signInWith(first, person);
    const second = injectBrowser(app, { remoteAddress: '198.51.100.4' });
    await signInWith(second, person);
    for (let i = 0; i < HEAVY_QUOTA; i++) {
      const page = await first.get(revision);
      expect(page.statusCode).toBe(200);
      expect(page.headers['ratelimit-policy']).toBe(
        `"pages";q=${QUOTA};w=60, "heavy-pages";q=${HEAVY_QUOTA};w=60`,
      );
    }
    // The other session of the same account finds the account's heavy budget spent.
    const refused = await second.get(revision);
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(refused.body).toContain('<h1>Too many large pages at once</h1>');
    expect(refused.body).toContain(`More than ${HEAVY_QUOTA} large pages`);
    // Light pages go on.
    expect((await second.get('/sites')).statusCode).toBe(200);
    // A large form post is heavy too: refused before its body is read.
    const post = await app.inject({
      method: 'POST',
      url: `/articles/${articleId}/edit`,
      remoteAddress: '198.51.100.4',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: [...second.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      },
      payload: `body=${'a'.repeat(HEAVY_BODY_BYTES)}`,
    });
    expect(post.statusCode).toBe(429);
    expect(post.body).toContain('Too many large pages at once');
  });
});
