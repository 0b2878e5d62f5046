import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cli } from '../support/process.ts';
import { PATIENCE_API } from '../support/wait.ts';
import { expectLabelled, screenshot, startWebApp, type WebApp } from '../support/web.ts';

/*
 * Support staff in a browser (JavaScript off): they sign in on the same page, find an account, read its
 * timeline and an article's, export them, change nothing, and every look is in the account's log.
 */
describe('support staff', () => {
  let web: WebApp;
  let staff: BrowserContext;
  let page: Page;
  let articleId: string;
  const person = { name: 'Sam Support', email: 'sam.support@example.com', password: 'support password 2026' };
  /** The service's id of a call the customer could quote. */
  let requestId: string;
  /** Another account, whose calls send the customer's request id as their own X-Request-Id. */
  let attacker: { account_id: string; api_key: string };

  beforeAll(async () => {
    web = await startWebApp();
    const made = await cli(
      ['staff', 'create', '--name', person.name, '--email', person.email, '--password', person.password],
      web.env,
    );
    expect(made.code, made.stderr).toBe(0);
    const articles = (await (await web.api(`/sites/${web.demo.sites[0]?.id}/articles`)).json()) as {
      data: { id: string }[];
    };
    articleId = articles.data[0]?.id as string;
    // A call the customer could quote: its request id finds the account.
    const edit = await web.api(`/articles/${articleId}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'x-request-id': 'customer-own-id' },
      body: JSON.stringify({ title: 'A title support will see', reason: 'Customer asked' }),
    });
    expect(edit.status).toBe(200);
    requestId = edit.headers.get('x-request-id') as string;
    expect(requestId).toMatch(/^req_/);
    const seeded = await cli(
      ['seed-demo', '--json', '--sites', '1', '--articles', '1', '--backlinks', '0', '--seed', '8'],
      web.env,
    );
    expect(seeded.code, seeded.stderr).toBe(0);
    attacker = JSON.parse(seeded.stdout) as typeof attacker;
    const forged = await fetch(`${web.url}/api/v1/sites`, {
      headers: { authorization: `Bearer ${attacker.api_key}`, 'x-request-id': requestId },
    });
    expect(forged.status).toBe(200);
    expect(forged.headers.get('x-request-id')).not.toBe(requestId);
    // The forged call's record is stored a moment after the call.
    await vi.waitFor(async () => {
      const res = await fetch(`${web.url}/api/v1/activity?per_page=100`, {
        headers: { authorization: `Bearer ${attacker.api_key}` },
      });
      const records = ((await res.json()) as { data: { client_request_id: string | null }[] }).data;
      expect(records.map((r) => r.client_request_id)).toContain(requestId);
    }, PATIENCE_API);
    staff = await web.browser.newContext({
      javaScriptEnabled: false,
      viewport: { width: 1100, height: 800 },
    });
    page = await staff.newPage();
  });
  afterAll(async () => {
    await staff?.close();
    await web?.stop();
  });

  it('sign in on the same page and land on the search', async () => {
    await page.goto(`${web.url}/sign-in`);
    await page.fill('#email', person.email);
    await page.fill('#password', person.password);
    await Promise.all([page.waitForNavigation(), page.press('#password', 'Enter')]);
    expect(new URL(page.url()).pathname).toBe('/staff');
    expect(await page.textContent('header.top')).toContain('Sam Support (support)');
    await expectLabelled(page);
    await screenshot(page, 'staff-search');
  });

  it('find the account by part of its email, a site domain, an article id and a request id', async () => {
    const search = async (q: string): Promise<string[]> => {
      await page.goto(`${web.url}/staff?q=${encodeURIComponent(q)}`);
      return page.$$eval('table tbody tr td:first-child a', (as) =>
        as.map((a) => a.getAttribute('href') ?? ''),
      );
    };
    const account = `/staff/accounts/${web.demo.account_id}`;
    expect(await search(web.demo.email.slice(0, 10))).toContain(account);
    expect(await search(web.demo.sites[0]?.domain ?? '')).toContain(account);
    expect(await search(articleId)).toContain(account);
    // The call's activity record is stored a moment after the call.
    const found = await vi.waitFor(async () => {
      const listed = await search(requestId);
      expect(listed).toContain(account);
      return listed;
    }, PATIENCE_API);
    // Another account's call that sent the customer's request id as its own is not found by it.
    expect(found).toEqual([account]);
    expect(await search('customer-own-id')).toEqual([]);
    await screenshot(page, 'staff-search-results');
    expect(await search('nobody-at-all@nowhere.example')).toEqual([]);
    expect(await page.textContent('main')).toContain('No account matches');
  });

  it("reads the account's timeline, revisions and activity interleaved, and filters it", async () => {
    await page.goto(`${web.url}/staff/accounts/${web.demo.account_id}`);
    const text = (await page.textContent('main')) ?? '';
    expect(text).toContain(web.demo.email);
    expect(text).toContain('A title support will see');
    // Labelled as the account's activity log labels them: operations, sources, actors, statuses.
    expect(text).toContain('Update article (API)');
    expect(text).toContain('200 OK');
    expect(text).not.toContain('update_article');
    await expectLabelled(page);
    await screenshot(page, 'staff-account-timeline');

    await page.selectOption('#kind', 'revision');
    await Promise.all([page.waitForNavigation(), page.click('form.timeline-filters button')]);
    expect(new URL(page.url()).searchParams.get('kind')).toBe('revision');
    const rows = await page.$$eval('table.timeline tbody tr td:nth-child(2)', (tds) =>
      tds.map((t) => t.textContent ?? ''),
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.startsWith('Revision '))).toBe(true);
  });

  it("names the articles of the activity by title, and leaves the staff's own looks out unless asked", async () => {
    const path = `/staff/accounts/${web.demo.account_id}`;
    // Every look at the account is recorded (a moment after it): at least two by now.
    const looks = await vi.waitFor(async () => {
      await page.goto(`${web.url}${path}`);
      const note = (await page.textContent('#staff-looks')) ?? '';
      const n = Number(/Left out: (\d+) views and searches by support staff/.exec(note)?.[1] ?? 0);
      expect(n).toBeGreaterThanOrEqual(2);
      return n;
    }, PATIENCE_API);
    const what = async (): Promise<string[]> =>
      page.$$eval('table.timeline tbody tr td:nth-child(2)', (tds) => tds.map((t) => t.textContent ?? ''));
    expect((await what()).filter((w) => w.startsWith('Staff'))).toEqual([]);
    // The API's edit names its article by its title, linking to the article's staff page.
    const edit = page.locator('table.timeline tbody tr', { hasText: 'Update article (API)' }).first();
    expect(await edit.locator(`a[href="/staff/articles/${articleId}"]`).textContent()).toBe(
      'A title support will see',
    );
    await screenshot(page, 'staff-account-timeline-labels');

    // Ticked, the filter lists them, newest first, labelled "Staff view (Support)".
    await page.check('#staff_looks');
    await Promise.all([page.waitForNavigation(), page.click('form.timeline-filters button')]);
    expect(new URL(page.url()).searchParams.get('staff_looks')).toBe('1');
    const listed = (await what()).filter((w) => w.startsWith('Staff view') || w.startsWith('Staff search'));
    expect(listed.length).toBeGreaterThanOrEqual(looks);
    expect(listed[0]).toBe('Staff view (Support)');
    expect(await page.textContent('#staff-looks')).toContain('Listed:');
    expect(await page.isChecked('#staff_looks')).toBe(true);
  });

  it("reads an article's timeline, and exports timelines as CSV and JSON", async () => {
    await page.goto(`${web.url}/staff/articles/${articleId}`);
    expect(await page.textContent('h1')).toBe('A title support will see');
    // Its account by name, email and id, linking to the account's page.
    const account = ((await page.textContent('#article-account')) ?? '').replace(/\s+/g, ' ').trim();
    expect(account).toMatch(/^Demo account /);
    expect(account).toContain(`(${web.demo.email}, ${web.demo.account_id})`);
    expect(await page.getAttribute('#article-account a', 'href')).toBe(
      `/staff/accounts/${web.demo.account_id}`,
    );
    await screenshot(page, 'staff-article-timeline');

    const cookies = (await staff.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const csv = await fetch(`${web.url}/staff/articles/${articleId}?format=csv`, {
      headers: { cookie: cookies },
    });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines[0]).toBe(
      'at,kind,article_id,revision,origin,operation,source,status,actor_type,actor_id,actor_name,reason,title,request_id,client_request_id',
    );
    expect(lines.some((l) => l.includes(',revision,') && l.includes('A title support will see'))).toBe(true);

    const json = await fetch(`${web.url}/staff/accounts/${web.demo.account_id}?format=json&kind=revision`, {
      headers: { cookie: cookies },
    });
    const body = (await json.json()) as { total: number; entries: { kind: string }[] };
    expect(body.total).toBe(body.entries.length);
    expect(body.entries.every((e) => e.kind === 'revision')).toBe(true);
  });

  it('opens a revision from the timeline with its diff against the one before and the current one', async () => {
    await page.goto(`${web.url}/staff/articles/${articleId}`);
    await Promise.all([page.waitForNavigation(), page.click('table.timeline a:has-text("Revision 2")')]);
    expect(new URL(page.url()).pathname).toBe(`/staff/articles/${articleId}/revisions/2`);
    expect(await page.textContent('h1')).toBe('Revision 2 of “A title support will see”');
    const added = await page.$$eval('#changes-before ins', (es) =>
      es.map((e) => e.textContent ?? '').join(' '),
    );
    expect(added).toContain('support');
    expect(await page.textContent('main')).toContain('This is the current revision.');
    const actions = await page.$$eval('form[method=post]', (fs) => fs.map((f) => f.getAttribute('action')));
    expect(actions).toEqual(['/sign-out']);
    await screenshot(page, 'staff-revision');
  });

  it('records every staff view in the account’s own activity log', async () => {
    type View = { operation: string; source: string; actor: { type: string; name: string } };
    const views = await vi.waitFor(async () => {
      const res = await web.api('/activity?source=system&per_page=100');
      const staffViews = ((await res.json()) as { data: View[] }).data.filter(
        (r) => r.operation === 'staff_view',
      );
      expect(staffViews.length).toBeGreaterThanOrEqual(4);
      return staffViews;
    }, PATIENCE_API);
    expect(views[0]?.actor).toMatchObject({ type: 'staff', name: 'Sam Support' });
    // The account holder's activity page says who: support, not the service's own work.
    const holder = await web.signedIn();
    const log = await holder.newPage();
    await log.goto(`${web.url}/activity?source=system&per_page=100`);
    const sources = await log.$$eval('table.activity-log tr', (rows) =>
      rows
        .filter((r) => (r.querySelector('td[data-label="Operation"]')?.textContent ?? '') === 'Staff view')
        .map((r) => (r.querySelector('td[data-label="Source"]')?.textContent ?? '').trim()),
    );
    expect(sources.length).toBeGreaterThanOrEqual(4);
    expect(new Set(sources)).toEqual(new Set(['Support']));
    await holder.close();
  });

  it('changes nothing: account pages and forms refuse a staff session, and holders cannot open /staff', async () => {
    const keysBefore = await cli(['keys', 'list', '--account', web.demo.account_id], web.env);
    // Connect Site is an account holder's page: a staff member is told so, with the way back to support.
    const connect = await page.goto(`${web.url}/connect`);
    expect(connect?.status()).toBe(403);
    expect(await page.textContent('#holder-page')).toContain('You are signed in as support staff');
    // The sign-in page on the way to an account holder's page (an assistant's OAuth sign-in, say) says who is signed in.
    await page.goto(`${web.url}/sign-in?return_to=${encodeURIComponent('/connect')}`);
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    expect(await page.textContent('#signed-in-staff')).toContain(
      'You are signed in as Sam Support, support staff',
    );
    const cookies = (await staff.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const forged = await fetch(`${web.url}/connect/keys`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: cookies, 'content-type': 'application/x-www-form-urlencoded', origin: web.url },
      body: 'name=staff+key&scope=write',
    });
    expect([303, 403]).toContain(forged.status);
    const keysAfter = await cli(['keys', 'list', '--account', web.demo.account_id], web.env);
    // The same keys, as they were (`last_used_at` is written by a timer, whenever it fires).
    const keysOf = (stdout: string): unknown[] =>
      stdout
        .trim()
        .split('\n')
        .map((line) => ({ ...(JSON.parse(line) as object), last_used_at: undefined }));
    expect(keysOf(keysAfter.stdout)).toEqual(keysOf(keysBefore.stdout));
    // Nothing on the staff pages posts anything but signing out.
    await page.goto(`${web.url}/staff/accounts/${web.demo.account_id}`);
    const actions = await page.$$eval('form[method=post]', (fs) => fs.map((f) => f.getAttribute('action')));
    expect(actions).toEqual(['/sign-out']);

    const holder = await web.signedIn();
    const holderPage = await holder.newPage();
    const refused = await holderPage.goto(`${web.url}/staff`);
    expect(refused?.status()).toBe(403);
  });

  it("meets an account holder's link with the staff view of it, and errors with a way back to support", async () => {
    // A customer sends the link of their article: the staff member is told whose page it is.
    const holders = await page.goto(`${web.url}/articles/${articleId}/revisions/2`);
    expect(holders?.status()).toBe(403);
    expect(await page.textContent('#holder-page')).toContain('You are signed in as support staff');
    expect(await page.textContent('header.top')).toContain('Sam Support (support)');
    await expectLabelled(page);
    await screenshot(page, 'staff-holder-page');
    await Promise.all([page.waitForNavigation(), page.click('text=Open the staff view of it')]);
    expect(new URL(page.url()).pathname).toBe(`/staff/articles/${articleId}/revisions/2`);
    // A site's page, Connect Site and the password page have no staff view: the way back to support only.
    for (const path of [`/sites/${web.demo.sites[0]?.id}`, '/connect', '/account/password']) {
      const res = await page.goto(`${web.url}${path}`);
      expect(res?.status(), path).toBe(403);
      expect(
        await page.$$eval('#holder-page a', (as) => as.map((a) => a.getAttribute('href'))),
        path,
      ).toEqual(['/staff']);
    }
    // Not found, by the staff pages and before any of them: staff wording, back to support.
    for (const path of ['/staff/accounts/acc_nobody', '/staff/articles/art_nobody', '/staff/no/such/page']) {
      const res = await page.goto(`${web.url}${path}`);
      expect(res?.status(), path).toBe(404);
      const main = (await page.textContent('main')) ?? '';
      expect(main, path).not.toContain('your sites');
      expect(await page.getAttribute('main a[href="/staff"]', 'href'), path).toBe('/staff');
    }
    await screenshot(page, 'staff-not-found');
    // Signed in, the sign-in page and the home page (the header's "Content Service") send staff to support.
    for (const path of ['/sign-in', '/']) {
      await page.goto(`${web.url}${path}`);
      expect(new URL(page.url()).pathname, path).toBe('/staff');
    }
  });

  it('holds its layout on a phone: nothing wider than the screen', async () => {
    const phone = await staff.newPage();
    await phone.setViewportSize({ width: 390, height: 800 });
    for (const path of [
      '/staff',
      `/staff/accounts/${web.demo.account_id}`,
      `/staff/articles/${articleId}/revisions/2`,
      '/staff/audit',
    ]) {
      await phone.goto(`${web.url}${path}`);
      expect(await phone.evaluate<number>('document.documentElement.scrollWidth'), path).toBeLessThanOrEqual(
        390,
      );
    }
    await screenshot(phone, 'staff-revision-phone');
    await phone.goto(`${web.url}/staff/accounts/${web.demo.account_id}`);
    await screenshot(phone, 'staff-account-timeline-phone');
    await phone.close();
  });

  it('records every search in the log of each account it listed, and of no other', async () => {
    const cookies = (await staff.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const audit = (await (
      await fetch(`${web.url}/staff/audit?format=json`, { headers: { cookie: cookies } })
    ).json()) as { entries: { kind: string; account_ids: string[] | null }[] };
    const listing = (accountId: string): number =>
      audit.entries.filter((e) => e.kind === 'search' && e.account_ids?.includes(accountId)).length;
    const searchesOf = async (key: string): Promise<{ actor: { type: string; name: string } }[]> => {
      const res = await fetch(`${web.url}/api/v1/activity?source=system&per_page=100`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const records = (await res.json()) as {
        data: { operation: string; actor: { type: string; name: string } }[];
      };
      return records.data.filter((r) => r.operation === 'staff_search');
    };
    // The demo account was listed by its email, a domain, an article id and a request id.
    const demo = await searchesOf(web.demo.api_key);
    expect(listing(web.demo.account_id)).toBeGreaterThanOrEqual(4);
    expect(demo).toHaveLength(listing(web.demo.account_id));
    expect(demo[0]?.actor).toMatchObject({ type: 'staff', name: 'Sam Support' });
    // The other account only by the searches that listed it (a shared domain), not by the others.
    expect(listing(attacker.account_id)).toBeLessThan(listing(web.demo.account_id));
    expect(await searchesOf(attacker.api_key)).toHaveLength(listing(attacker.account_id));
    // The account holder sees them on the activity page.
    const holder = await web.signedIn();
    const holderPage = await holder.newPage();
    await holderPage.goto(`${web.url}/activity?source=system`);
    expect(await holderPage.textContent('main')).toContain('Staff search');
  });

  it('keeps a staff-side audit of searches and views, with CSV and JSON exports', async () => {
    await page.goto(`${web.url}/staff`);
    await Promise.all([page.waitForNavigation(), page.click('a[href="/staff/audit"]')]);
    expect(new URL(page.url()).pathname).toBe('/staff/audit');
    const text = (await page.textContent('main')) ?? '';
    expect(text).toContain('nobody-at-all@nowhere.example');
    expect(text).toContain('Sam Support');
    // Accounts by name and email with their id, never by id alone.
    expect(text).not.toMatch(new RegExp(`Viewed account ${web.demo.account_id}`));
    expect(text.replace(/\s+/g, ' ')).toContain(`Viewed account Demo account `);
    expect(text).toContain(`(${web.demo.email}, ${web.demo.account_id})`);
    // Articles by title with their id, never by id alone.
    expect(text.replace(/\s+/g, ' ')).toContain(`, article A title support will see (${articleId})`);
    expect(text).not.toContain(`, article ${articleId}`);
    await expectLabelled(page);
    await screenshot(page, 'staff-audit');

    const cookies = (await staff.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const json = await fetch(`${web.url}/staff/audit?format=json`, { headers: { cookie: cookies } });
    expect(json.status).toBe(200);
    const body = (await json.json()) as {
      total: number;
      entries: { kind: string; query: string | null; account_ids: string[]; staff_name: string }[];
    };
    const byDomain = body.entries.find((e) => e.kind === 'search' && e.query === web.demo.sites[0]?.domain);
    expect(byDomain).toMatchObject({ staff_name: 'Sam Support' });
    expect(byDomain?.account_ids).toContain(web.demo.account_id);
    expect(body.entries.find((e) => e.query === 'nobody-at-all@nowhere.example')).toMatchObject({
      account_ids: [],
    });
    expect(body.entries.some((e) => e.kind === 'view')).toBe(true);
    const csv = await fetch(`${web.url}/staff/audit?format=csv`, { headers: { cookie: cookies } });
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    expect((await csv.text()).split('\r\n')[0]).toBe(
      'at,kind,staff_id,staff_name,query,result_count,account_ids,account_id,article_id,request_id',
    );
  });

  it('signs staff out like anyone', async () => {
    await page.goto(`${web.url}/staff`);
    await Promise.all([page.waitForNavigation(), page.click('header.top button[type=submit]')]);
    const again = await page.goto(`${web.url}/staff`);
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    expect(again?.status()).toBe(200);
  });
});
