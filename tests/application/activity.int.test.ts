import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActivityOut } from '../../apps/application/activity.ts';
import { callOf, type Principal, unwrap } from '../../apps/application/call.ts';
import { type Application, createApplication } from '../../apps/application/index.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { apiKeyActor, createTestRuntime, protectedBody, setUpAccount } from '../support/runtime.ts';

/*
 * The activity use cases: a write's outcome names the revision it created, the log stores and lists
 * it, and a page of records gets the names of what it names (the account's own only).
 */
describe('the activity use cases', () => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let app: Application;
  let mine: { accountId: string; siteId: string };
  let theirs: { accountId: string; siteId: string };
  let articleId: string;
  let theirArticleId: string;

  const principal = (accountId: string): Principal => ({
    accountId,
    actor: apiKeyActor,
    origin: 'api',
    scope: 'write',
  });
  const list = async (...args: Parameters<Application['activity']['list']>) =>
    unwrap(await app.activity.list(...args));
  const subjects = async (...args: Parameters<Application['activity']['subjects']>) =>
    unwrap(await app.activity.subjects(...args));
  const article = (siteId: string, title: string) => ({
    siteId,
    title,
    body: protectedBody(1),
    url: `https://northside.example/${title.toLowerCase()}`,
    status: 'published' as const,
    publishedAt: '2026-11-01T09:00:00.000Z',
    targetKeyword: null,
    featuredImage: null,
  });

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime('postgres'));
    app = createApplication({
      db: runtime.db,
      commands: runtime.commands,
      publicUrl: 'https://content.example',
      now: () => new Date('2026-11-05T12:00:00Z'),
      editLimit: {
        take: async () => ({
          policy: { name: 'edits', quota: 100, window: 'utc-day' },
          allowed: true,
          remaining: 99,
          resetSeconds: 3600,
        }),
      },
      media: createDirectoryMediaStore('/nonexistent'),
      fetchImage: async () => new Uint8Array(),
    });
    mine = await setUpAccount(runtime);
    theirs = await setUpAccount(runtime, 'Rival Ltd');
    const origin = { origin: 'rewrite' as const, actor: apiKeyActor };
    ({ articleId } = await runtime.commands.createArticle(
      mine.accountId,
      article(mine.siteId, 'Boilers'),
      origin,
    ));
    ({ articleId: theirArticleId } = await runtime.commands.createArticle(
      theirs.accountId,
      article(theirs.siteId, 'Secret'),
      origin,
    ));
  });
  afterAll(async () => {
    await drop?.();
  });

  it('returns in the outcome the revision a write created, and none for a write that changed nothing or a read', async () => {
    const edit = await app.articles.edit(callOf(principal(mine.accountId)), {
      articleId,
      title: 'Boilers, serviced',
    });
    expect(edit.subject).toEqual({ siteId: mine.siteId, articleId, revision: 2 });

    const unchanged = await app.articles.edit(callOf(principal(mine.accountId)), {
      articleId,
      title: 'Boilers, serviced',
    });
    expect(unwrap(unchanged).change.changed).toBe(false);
    expect(unchanged.subject.revision).toBeNull();

    const restore = await app.revisions.restore(callOf(principal(mine.accountId)), {
      articleId,
      revision: 1,
    });
    expect(restore.subject.revision).toBe(3);

    const read = await app.articles.get(callOf(principal(mine.accountId)), articleId);
    expect(read.ok).toBe(true);
    expect(read.subject).toEqual({ siteId: mine.siteId, articleId, revision: null });
  });

  it('stores the revision with the record and lists it; a record without one lists null', async () => {
    const base = {
      accountId: mine.accountId,
      source: 'api' as const,
      actor: apiKeyActor,
      status: 200,
      durationMs: 3,
    };
    const subject = (revision: number | null) => ({ siteId: mine.siteId, articleId, revision });
    await app.activity.record({
      ...base,
      operation: 'update_article',
      subject: subject(2),
      requestId: 'req_w',
    });
    await app.activity.record({
      ...base,
      operation: 'get_article',
      subject: subject(null),
      requestId: 'req_r',
    });
    const listed = await list(callOf(principal(mine.accountId)), {
      page: 1,
      per_page: 100,
      source: 'api',
    });
    const byRequest = Object.fromEntries(listed.data.map((r) => [r.request_id, r.revision]));
    expect(byRequest).toEqual({ req_w: 2, req_r: null });
    // The pipeline's own change (the article's creation) is revision 1.
    const pipeline = await list(callOf(principal(mine.accountId)), {
      page: 1,
      per_page: 100,
      source: 'rewrite',
    });
    expect(pipeline.data.map((r) => [r.operation, r.article_id, r.revision])).toEqual([
      ['create_article', articleId, 1],
    ]);
  });

  it("names the account's own sites and articles only", async () => {
    const record = (siteId: string, articleId: string | null) => ({
      id: 'act_x',
      at: '2026-11-05T12:00:00Z',
      source: 'api' as const,
      actor: apiKeyActor,
      operation: 'get_article',
      site_id: siteId,
      article_id: articleId,
      revision: null,
      status: 200,
      request_id: null,
      client_request_id: null,
      duration_ms: 1,
    });
    const names = await subjects(callOf(principal(mine.accountId)), [
      record(mine.siteId, articleId),
      record(mine.siteId, null),
      record(theirs.siteId, theirArticleId),
    ]);
    expect(Object.fromEntries(names.sites)).toEqual({ [mine.siteId]: 'Northside Plumbing' });
    expect(Object.fromEntries(names.articles)).toEqual({ [articleId]: 'Boilers' });
    expect(await subjects(callOf(principal(mine.accountId)), [])).toEqual({
      sites: new Map(),
      articles: new Map(),
    });
  });
  describe("support staff's searches", () => {
    const staff = { id: 'stf_audit', name: 'Sam Support', email: 'sam@support.example' };
    const looks = async (accountId: string): Promise<ActivityOut[]> =>
      (await list(callOf(principal(accountId)), { page: 1, per_page: 100, source: 'system' })).data.filter(
        (r) => r.operation === 'staff_search',
      );

    it("records a search in every listed account's log, in no other, and in the staff audit", async () => {
      const ids = { requestId: 'req_06h0search00000000000000000', clientRequestId: null };
      const found = unwrap(await app.support.search(staff, '  plumbers.ltd  ', ids));
      expect(found.map((a) => a.id)).toEqual([mine.accountId]);
      const [record] = await looks(mine.accountId);
      expect(record).toMatchObject({
        source: 'system',
        actor: { type: 'staff', id: staff.id, name: staff.name },
        operation: 'staff_search',
        request_id: ids.requestId,
      });
      expect(await looks(theirs.accountId)).toEqual([]);

      const both = unwrap(await app.support.search(staff, '.ltd.'));
      expect(new Set(both.map((a) => a.id))).toEqual(new Set([mine.accountId, theirs.accountId]));
      expect(await looks(mine.accountId)).toHaveLength(2);
      expect(await looks(theirs.accountId)).toHaveLength(1);

      const audit = unwrap(await app.support.audit(staff, { page: 1, perPage: 10 }));
      const searches = audit.data.filter((e) => e.kind === 'search');
      expect(searches.map((e) => e.query)).toEqual(['.ltd.', 'plumbers.ltd']);
      expect(searches[1]).toMatchObject({
        staff: { id: staff.id, name: staff.name },
        accountIds: [mine.accountId],
        requestId: ids.requestId,
      });
      expect(new Set(searches[0]?.kind === 'search' ? searches[0].accountIds : [])).toEqual(
        new Set([mine.accountId, theirs.accountId]),
      );
    });

    it('keeps a search that lists no account in the audit, and records it in no account', async () => {
      expect(unwrap(await app.support.search(staff, 'nobody@nowhere.example'))).toEqual([]);
      const audit = unwrap(await app.support.audit(staff, { page: 1, perPage: 1 }));
      expect(audit.data[0]).toMatchObject({
        kind: 'search',
        query: 'nobody@nowhere.example',
        accountIds: [],
      });
    });
  });
});
