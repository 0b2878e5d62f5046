import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { createHeavyWork, HEAVY_BUSY_DETAIL } from '../../apps/server/http/heavy-work.ts';
import { DIFF_EDITS_MAX } from '../../domain/html/word-diff.ts';
import { createPerson } from '../oauth/helpers.ts';
import { type InjectBrowser, injectBrowser, signInWith } from '../support/inject-browser.ts';
import { apiKeyActor, createTestRuntime, pipelineActor } from '../support/runtime.ts';

/*
 * The revision and restore pages compare revisions on the worker pool within a budget: a pair too
 * different to compare is shown as a note that links to both versions whole, never a page that waits
 * or fails; a small change is shown word by word.
 */

let app: FastifyInstance;
let runtime: Runtime;
let drop: () => Promise<void>;
let browser: InjectBrowser;
let articleId: string;
let person: Awaited<ReturnType<typeof createPerson>>;

/** `lines` paragraphs, each one word tagged `tag`: two tags share no line and no word. */
const paragraphs = (lines: number, tag: string): string =>
  Array.from({ length: lines }, (_, i) => `<p>${tag}${i}</p>`).join('');

beforeAll(async () => {
  // Patient comparisons: on a busy machine the pool's worker is slow to start, and `busy` is the
  // heavy-work tests' point, not these.
  const test = await createTestRuntime('postgres', { sanitizeThreads: 1, diffWaitMs: 55_000 });
  runtime = test.runtime;
  drop = test.drop;
  app = await buildApp({
    runtime,
    config: { PUBLIC_URL: 'http://cs.example.test', LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-web-test' },
    logger: false,
  });
  person = await createPerson(runtime);
  const { siteId } = await runtime.commands.addSite(person.accountId, {
    name: 'Northside Plumbing',
    domain: 'northside.example',
    url: 'https://northside.example/',
  });
  ({ articleId } = await runtime.commands.createArticle(
    person.accountId,
    {
      siteId,
      title: 'Boilers',
      body: '<p>The old boiler is fine.</p>',
      url: 'https://northside.example/boilers',
      status: 'draft',
      publishedAt: null,
      targetKeyword: null,
      featuredImage: null,
    },
    { origin: 'rewrite', actor: pipelineActor },
  ));
  const edit = (body: string) =>
    runtime.commands.editArticle(
      person.accountId,
      articleId,
      { body },
      { origin: 'api', actor: apiKeyActor },
    );
  await edit('<p>The new boiler is very fine.</p>');
  // More differing lines than the budget's edits: too different to compare.
  const lines = DIFF_EDITS_MAX + 500;
  await edit(paragraphs(lines, 'alpha'));
  await edit(paragraphs(lines, 'beta'));
  browser = injectBrowser(app, { remoteAddress: '198.51.100.7' });
  await signInWith(browser, person);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await drop?.();
});

describe('diffs on the revision pages', () => {
  it('shows a small change word by word', async () => {
    const page = await browser.get(`/articles/${articleId}/revisions/2`);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<del>old</del><ins>new</ins>');
  });

  it('shows revisions too different to compare as a note linking to both versions whole', async () => {
    const page = await browser.get(`/articles/${articleId}/revisions/4`);
    expect(page.statusCode).toBe(200);
    const note = /<p class="diff-fallback">(.*?)<\/p>/s.exec(page.body)?.[1] ?? '';
    expect(note).toContain('too long or too different');
    expect(note).toContain(`<a href="/articles/${articleId}/revisions/3">revision 3</a>`);
    expect(note).toContain(`<a href="/articles/${articleId}/revisions/4#content">revision 4</a>`);
    // The revision itself is on the page, whole.
    expect(page.body).toContain('<p>beta0</p>');
  });

  it('says the same on the restore page, linking to the current version and the revision', async () => {
    const page = await browser.get(`/articles/${articleId}/revisions/3/restore`);
    expect(page.statusCode).toBe(200);
    const note = /<p class="diff-fallback">(.*?)<\/p>/s.exec(page.body)?.[1] ?? '';
    expect(note).toContain(`<a href="/articles/${articleId}">the current version</a>`);
    expect(note).toContain(`<a href="/articles/${articleId}/revisions/3#content">revision 3</a>`);
  });
});

describe('revision pages are heavy work', () => {
  it('answer 503 with Retry-After, in the layout, when the heavy work has no turn to give', async () => {
    const busy = await buildApp({
      runtime,
      config: { PUBLIC_URL: 'http://cs.example.test', LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-web-test' },
      logger: false,
      heavy: createHeavyWork({ atOnce: 0, waiting: 0 }),
    });
    try {
      const other = injectBrowser(busy, { remoteAddress: '198.51.100.8' });
      await signInWith(other, person);
      for (const path of [
        `/articles/${articleId}/revisions/2`,
        `/articles/${articleId}/revisions/2/restore`,
      ]) {
        const page = await other.get(path);
        expect(page.statusCode, path).toBe(503);
        expect(page.headers['retry-after'], path).toBe('1');
        expect(page.headers['content-type'], path).toContain('text/html');
        expect(page.body, path).toContain(HEAVY_BUSY_DETAIL);
      }
      // Light pages do not ask for a turn.
      expect((await other.get(`/articles/${articleId}`)).statusCode).toBe(200);
    } finally {
      await busy.close();
    }
  });
});
