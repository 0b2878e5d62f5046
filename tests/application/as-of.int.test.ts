import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOf, type Principal, unwrap } from '../../apps/application/call.ts';
import type { Application } from '../../apps/application/index.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { backends } from '../support/db.ts';
import { refusal } from '../support/errors.ts';
import {
  apiKeyActor,
  createTestRuntime,
  pipelineActor,
  protectedBody,
  readingApplication,
  setUpAccount,
} from '../support/runtime.ts';

/*
 * An article as it stood at an instant (`articles.getAsOf`), on both backends: the revision current
 * then, counted from its time to the second as the wire shows it, with every change of that kind up
 * to it (title, body, status, featured image), and never another account's article.
 */
describe.each(backends)('an article as of an instant (%s)', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let app: Application;
  let clock = new Date('2026-11-01T09:00:00.000Z');
  let mine: { accountId: string; siteId: string };
  let theirs: { accountId: string; siteId: string };
  let articleId: string;
  const principal = (accountId: string): Principal => ({
    accountId,
    actor: apiKeyActor,
    origin: 'api',
    scope: 'write',
  });
  const asOf = (at: string, accountId = mine.accountId) =>
    app.articles.getAsOf(callOf(principal(accountId)), articleId, at);
  const caller = { origin: 'api' as const, actor: apiKeyActor };

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend, { now: () => clock }));
    app = readingApplication(runtime, () => clock);
    mine = await setUpAccount(runtime);
    theirs = await setUpAccount(runtime, 'Rival Ltd');
    // Revision 1 at 09:00:00.000: a draft with protected links.
    ({ articleId } = await runtime.commands.createArticle(
      mine.accountId,
      {
        siteId: mine.siteId,
        title: 'Boiler checks',
        body: protectedBody(7),
        url: 'https://northside.example/blog/boiler-checks',
        status: 'draft',
        publishedAt: null,
        targetKeyword: 'boiler checks',
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    ));
    // Revision 2 at 10:00:00.400: a new title and a longer body.
    clock = new Date('2026-11-01T10:00:00.400Z');
    await runtime.commands.editArticle(
      mine.accountId,
      articleId,
      { title: 'Winter boiler checks', body: `${protectedBody(7)}<p>Bleed the radiators too.</p>` },
      caller,
    );
    // Revision 3 at 11:00:00: published.
    clock = new Date('2026-11-01T11:00:00.000Z');
    await runtime.commands.changeArticleStatus(
      mine.accountId,
      articleId,
      { status: 'published', publishedAt: '2026-11-01T11:00:00Z' },
      caller,
    );
    // Revision 4 at 12:00:00: a featured image.
    clock = new Date('2026-11-01T12:00:00.000Z');
    await runtime.commands.replaceFeaturedImage(
      mine.accountId,
      articleId,
      {
        featuredImage: {
          url: 'https://content.example/media/boiler.png',
          alt: 'A boiler',
          width: 800,
          height: 600,
        },
      },
      caller,
    );
    clock = new Date('2026-11-02T09:00:00.000Z');
  });

  afterAll(async () => {
    await drop?.();
  });

  it('is the revision current then, with what it said then, and the instant echoed', async () => {
    const first = unwrap(await asOf('2026-11-01T09:30:00Z'));
    expect(first).toMatchObject({
      id: articleId,
      site_id: mine.siteId,
      revision: 1,
      title: 'Boiler checks',
      body: protectedBody(7),
      word_count: 8,
      status: 'draft',
      published_at: null,
      target_keyword: 'boiler checks',
      featured_image: null,
      updated_at: '2026-11-01T09:00:00Z',
      as_of: '2026-11-01T09:30:00Z',
    });
    expect(first.protected_links.map((l) => l.id)).toEqual(['bl_7', 'il_7']);
    const second = unwrap(await asOf('2026-11-01T10:59:59Z'));
    expect(second).toMatchObject({
      revision: 2,
      title: 'Winter boiler checks',
      status: 'draft',
      word_count: 12,
    });
    expect(second.body).toBe(`${protectedBody(7)}<p>Bleed the radiators too.</p>`);
    expect(unwrap(await asOf('2026-11-01T11:30:00Z'))).toMatchObject({
      revision: 3,
      status: 'published',
      published_at: '2026-11-01T11:00:00Z',
      featured_image: null,
    });
    const now = unwrap(await asOf('2026-11-02T09:00:00Z'));
    expect(now).toMatchObject({
      revision: 4,
      featured_image: {
        url: 'https://content.example/media/boiler.png',
        alt: 'A boiler',
        width: 800,
        height: 600,
      },
    });
    // Everything but as_of is what the article reads as now.
    const { as_of: _, ...then } = now;
    expect(then).toEqual(unwrap(await app.articles.get(callOf(principal(mine.accountId)), articleId)));
  });

  it('counts a revision from its time to the second, as the wire shows it', async () => {
    // Revision 2 was made at 10:00:00.400 and is shown as made at 10:00:00.
    expect(unwrap(await asOf('2026-11-01T09:59:59.999Z')).revision).toBe(1);
    expect(unwrap(await asOf('2026-11-01T10:00:00Z')).revision).toBe(2);
    expect(unwrap(await asOf('2026-11-01T09:00:00Z')).revision).toBe(1);
  });

  it('is not found before the article existed, nor for another account, alike', async () => {
    expect(await refusal(asOf('2026-11-01T08:59:59Z'))).toBe('not_found');
    expect(await refusal(asOf('2026-11-01T12:00:00Z', theirs.accountId))).toBe('not_found');
  });

  it('refuses an instant in the future, naming as_of', async () => {
    const ahead = await asOf('2026-11-02T09:00:01Z');
    expect(ahead.ok).toBe(false);
    if (ahead.ok) return;
    expect(ahead.error).toMatchObject({
      code: 'invalid_request',
      errors: [{ in: 'query', name: 'as_of', message: 'must not be in the future' }],
    });
  });
});
