import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { makeMonthlyReports } from '../../apps/application/reports.ts';
import { openRuntime, type Runtime } from '../../apps/runtime.ts';
import type { Actor } from '../../domain/event.ts';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import { PATIENCE_API } from '../support/wait.ts';
import {
  createStaff,
  expectLabelled,
  screenshot,
  staffSignIn,
  startWebApp,
  type WebApp,
} from '../support/web.ts';
import { recentMonths, stats } from './site-helpers.ts';

/*
 * "View as of…" in headless Chromium with JavaScript off: an article as it stood at an instant, on the
 * account holder's article page and on the support staff's article timeline. The article's history is
 * written straight into the server's database with a controlled clock (the commands' `now`), so its
 * revisions have instants days apart, in the past of the server's own clock.
 */

const DAY = 86_400_000;
const editor: Actor = { type: 'user', id: 'user_as_of', name: 'Dana Editor' };
const caller = { origin: 'editor' as const, actor: editor };

/** `2026-03-05` of an instant. */
const dateOf = (at: Date): string => at.toISOString().slice(0, 10);
/** `5 March 2026` of an instant, as the pages write it. */
const longDay = (at: Date): string =>
  new Intl.DateTimeFormat('en-GB', {
    day: 'numeric',
    month: 'long',
    year: 'numeric',
    timeZone: 'UTC',
  }).format(at);

/** `September 2026` of `2026-09`. */
const monthName = (month: string): string =>
  new Intl.DateTimeFormat('en-GB', { month: 'long', year: 'numeric', timeZone: 'UTC' }).format(
    new Date(`${month}-01T00:00:00Z`),
  );

describe('an article as it stood at an instant', () => {
  let web: WebApp;
  let runtime: Runtime;
  let clock = new Date();
  let articleId: string;
  let otherArticleId: string;
  /** The instants of revisions 1 to 4 (created, edited, published, edited again). */
  let made: Date[];
  let holder: BrowserContext;
  const staff = { name: 'Sam Support', email: 'sam.asof@example.com', password: 'support password 2026' };

  /** The form's fields and the statement above the article, as the page shows them. */
  const fields = async (page: Page): Promise<{ date: string; time: string }> => ({
    date: await page.inputValue('#as-of-date'),
    time: await page.inputValue('#as-of-time'),
  });
  const text = async (page: Page, selector: string): Promise<string> =>
    ((await page.textContent(selector)) ?? '').replace(/\s+/g, ' ').trim();
  /** The facts of the article as it stood, by their terms. */
  const facts = (page: Page): Promise<Record<string, string>> =>
    page
      .$$eval('#as-of-facts dt', (dts) =>
        dts.map((dt) => [dt.textContent ?? '', dt.nextElementSibling?.textContent ?? '']),
      )
      .then((pairs) => Object.fromEntries(pairs.map(([k, v]) => [k, v?.replace(/\s+/g, ' ').trim()])));

  beforeAll(async () => {
    web = await startWebApp({ articles: 2, backlinks: 2 });
    runtime = await openRuntime(
      { DATABASE_URL: web.env.DATABASE_URL, DATA_DIR: web.env.DATA_DIR as string },
      { now: () => clock },
    );
    const site = web.demo.sites[0] as { id: string; domain: string };
    // Midnight UTC 60 days ago; the article's revisions from there, at set hours.
    const base = Math.floor((Date.now() - 60 * DAY) / DAY) * DAY;
    made = [
      new Date(base + DAY + 9 * 3_600_000),
      new Date(base + 10 * DAY + 14.5 * 3_600_000),
      new Date(base + 12 * DAY + 8 * 3_600_000),
      new Date(base + 30 * DAY + 10 * 3_600_000),
    ];
    clock = made[0] as Date;
    ({ articleId } = await runtime.commands.createArticle(
      web.demo.account_id,
      {
        siteId: site.id,
        title: 'Spring boiler checklist (draft)',
        body: '<p>First draft: bleed the radiators.</p>',
        url: `https://${site.domain}/blog/boiler-checklist`,
        status: 'draft',
        publishedAt: null,
        targetKeyword: null,
        featuredImage: null,
      },
      caller,
    ));
    clock = made[1] as Date;
    await runtime.commands.editArticle(
      web.demo.account_id,
      articleId,
      {
        title: 'Spring boiler checklist',
        body: '<p>Bleed the radiators, then check the pressure gauge.</p>',
        reason: 'Second draft',
      },
      caller,
    );
    clock = made[2] as Date;
    await runtime.commands.changeArticleStatus(
      web.demo.account_id,
      articleId,
      { status: 'published', publishedAt: (made[2] as Date).toISOString() },
      caller,
    );
    clock = made[3] as Date;
    await runtime.commands.editArticle(
      web.demo.account_id,
      articleId,
      {
        title: 'Boiler checklist for every season',
        body: '<p>Check the pressure gauge every season.</p>',
        reason: 'All year round',
      },
      caller,
    );
    // Another account's article, at the same instants.
    clock = made[0] as Date;
    const other = await runtime.commands.openAccount({
      name: 'Harbour Dental',
      email: `harbour.${Date.now()}@example.com`,
    });
    const { siteId: otherSite } = await runtime.commands.addSite(other.accountId, {
      name: 'Harbour Dental',
      domain: 'harbour-dental.example',
      url: 'https://harbour-dental.example/',
    });
    ({ articleId: otherArticleId } = await runtime.commands.createArticle(
      other.accountId,
      {
        siteId: otherSite,
        title: 'Whitening, the honest truth',
        body: '<p>Not for the neighbours.</p>',
        url: 'https://harbour-dental.example/blog/whitening',
        status: 'draft',
        publishedAt: null,
        targetKeyword: null,
        featuredImage: null,
      },
      caller,
    ));
    clock = new Date();
    await createStaff(web, staff);
    holder = await web.signedIn({ width: 1280 });
  }, 120_000);
  afterAll(async () => {
    await runtime?.close();
    await web?.stop();
  });

  /** Sends the article page's "View as of…" form with a date and a time. */
  async function viewAsOf(page: Page, date: string, time: string): Promise<number> {
    await page.fill('#as-of-date', date);
    await page.fill('#as-of-time', time);
    const [response] = await Promise.all([page.waitForNavigation(), page.press('#as-of-time', 'Enter')]);
    return response?.status() ?? 0;
  }

  it('shows the article as it was: title, status, text, and the revision current then, linked', async () => {
    const page = await holder.newPage();
    await page.goto(`${web.url}/articles/${articleId}`);
    expect(await page.textContent('h1')).toBe('Boiler checklist for every season');
    // The form: a date and a time, labelled, saying UTC.
    expect(await page.textContent('label[for=as-of-date]')).toBe('Date (UTC)');
    expect(await page.textContent('label[for=as-of-time]')).toBe('Time (UTC)');
    expect(await page.getAttribute('#as-of-date', 'type')).toBe('date');
    expect(await page.getAttribute('#as-of-time', 'type')).toBe('time');
    expect(await page.textContent('#as-of-hint')).toContain('UTC');
    expect(await page.getAttribute('form#as-of-form', 'method')).toBe('get');
    await expectLabelled(page);

    // Between the first and the second revision: the first draft.
    const day = new Date((made[0] as Date).getTime() + 2 * DAY);
    expect(await viewAsOf(page, dateOf(day), '12:00')).toBe(200);
    const url = new URL(page.url());
    expect(url.pathname).toBe(`/articles/${articleId}/as-of`);
    expect(url.searchParams.get('date')).toBe(dateOf(day));
    expect(url.searchParams.get('time')).toBe('12:00');
    expect(await text(page, '#as-of-stated')).toBe(
      `As it stood at ${longDay(day)}, 12:00 UTC — revision 1. The article is now at revision 4: the current version · changes from revision 1 to now.`,
    );
    expect(await page.getAttribute('#as-of-stated a', 'href')).toBe(`/articles/${articleId}/revisions/1`);
    expect(await page.textContent('#as-of-title')).toBe('Spring boiler checklist (draft)');
    expect(await facts(page)).toMatchObject({
      'Status then': 'Draft',
      Revision: expect.stringMatching(/^1 \(made /),
    });
    expect(await page.textContent('.as-of-view article.article-body')).toContain(
      'First draft: bleed the radiators.',
    );
    expect(await page.textContent('.as-of-view')).not.toContain('every season');
    expect(await page.textContent('.as-of-view')).toContain('No featured image then.');
    // The form again, filled with the instant asked for.
    expect(await fields(page)).toEqual({ date: dateOf(day), time: '12:00' });
    await expectLabelled(page);
    await screenshot(page, 'as-of-article-1280');

    // The revision's link opens its page.
    await Promise.all([page.waitForNavigation(), page.click('#as-of-stated a:has-text("revision 1")')]);
    expect(new URL(page.url()).pathname).toBe(`/articles/${articleId}/revisions/1`);
    expect(await page.textContent('h1')).toContain('Revision 1');

    // After publication: revision 3, published, with its date; the second revision's text.
    await page.goto(`${web.url}/articles/${articleId}`);
    const later = new Date((made[2] as Date).getTime() + 3 * DAY);
    expect(await viewAsOf(page, dateOf(later), '08:30:15')).toBe(200);
    expect(await text(page, '#as-of-stated')).toContain(
      `As it stood at ${longDay(later)}, 08:30:15 UTC — revision 3.`,
    );
    expect(await page.textContent('#as-of-title')).toBe('Spring boiler checklist');
    expect((await facts(page))['Status then']).toBe(`Published on ${longDay(made[2] as Date)}, 08:00 UTC`);
    expect(await page.textContent('.as-of-view article.article-body')).toContain(
      'Bleed the radiators, then check the pressure gauge.',
    );
    // The instant a revision was made, to the second, is that revision.
    await page.goto(`${web.url}/articles/${articleId}`);
    expect(await viewAsOf(page, dateOf(made[3] as Date), '10:00:00')).toBe(200);
    expect(await text(page, '#as-of-stated')).toContain('revision 4. This is still the current revision.');
    await page.close();
  });

  it('says in words what is wrong with an instant, keeping the form filled: future, before the article, malformed', async () => {
    const page = await holder.newPage();
    const path = `/articles/${articleId}/as-of`;
    // In the future.
    const next = new Date().getUTCFullYear() + 1;
    let response = await page.goto(`${web.url}${path}?date=${next}-01-01&time=09:00`);
    expect(response?.status()).toBe(400);
    expect(response?.headers()['content-type']).toBe('text/html; charset=utf-8');
    expect(await text(page, '#as-of-error')).toMatch(
      new RegExp(
        `^1 January ${next}, 09:00 UTC is in the future: an article can only be shown as it stood up to now \\(.+ UTC\\)\\. Choose an earlier date or time\\.$`,
      ),
    );
    expect(await page.getAttribute('#as-of-error', 'role')).toBe('alert');
    expect(await page.getAttribute('#as-of-date', 'aria-invalid')).toBe('true');
    expect(await fields(page)).toEqual({ date: `${next}-01-01`, time: '09:00' });
    expect(await page.$('#as-of-stated')).toBeNull();
    await screenshot(page, 'as-of-future');

    // Before the article was created: it did not exist yet, and when it was created.
    const before = new Date((made[0] as Date).getTime() - DAY);
    response = await page.goto(`${web.url}${path}?date=${dateOf(before)}&time=09:00`);
    expect(response?.status()).toBe(404);
    expect(await text(page, '#as-of-error')).toBe(
      `This article did not exist yet at ${longDay(before)}, 09:00 UTC. It was created on ${longDay(made[0] as Date)}, 09:00 UTC.`,
    );
    expect(await fields(page)).toEqual({ date: dateOf(before), time: '09:00' });
    await screenshot(page, 'as-of-not-yet');
    // One second before its first revision, still not.
    response = await page.goto(`${web.url}${path}?date=${dateOf(made[0] as Date)}&time=08:59:59`);
    expect(response?.status()).toBe(404);

    // Malformed: no such day, no such time, one missing, given twice.
    const refused = async (query: string, message: string, field: string): Promise<void> => {
      const res = await page.goto(`${web.url}${path}?${query}`);
      expect(res?.status(), query).toBe(400);
      expect(await text(page, '#as-of-error'), query).toBe(message);
      expect(await page.getAttribute(`#as-of-${field}`, 'aria-invalid'), query).toBe('true');
      expect(await page.textContent('main'), query).not.toContain('problem');
    };
    await refused(
      'date=2026-02-30&time=09:00',
      '“2026-02-30” is not a date. Enter one as YYYY-MM-DD, such as 2026-11-01.',
      'date',
    );
    expect(await fields(page)).toEqual({ date: '', time: '09:00' }); // the browser shows no impossible date
    await refused(
      'date=2026-02-03&time=25:00',
      '“25:00” is not a time of day. Enter one as HH:MM in UTC, such as 09:30.',
      'time',
    );
    await refused('date=&time=09:00', 'Enter a date as well as the time.', 'date');
    await refused('date=2026-02-03&time=', 'Enter a time as well as the date (UTC, such as 09:30).', 'time');
    await refused('date=2026-02-03&date=2026-02-04&time=09:00', 'Give the date once.', 'date');
    await screenshot(page, 'as-of-refused');
    // Nothing asked yet: the form alone.
    response = await page.goto(`${web.url}${path}`);
    expect(response?.status()).toBe(200);
    expect(await page.$('#as-of-error')).toBeNull();
    await page.close();
  });

  it("another account's article is the 404 page, whatever the instant", async () => {
    const page = await holder.newPage();
    const instant = `date=${dateOf(new Date())}&time=00:00`;
    for (const path of [
      `/articles/${otherArticleId}/as-of?${instant}`,
      `/articles/${otherArticleId}/as-of`,
    ]) {
      const response = await page.goto(`${web.url}${path}`);
      expect(response?.status(), path).toBe(404);
      const main = await text(page, 'main');
      expect(main).not.toContain('Whitening');
      expect(main).not.toContain('neighbours');
      expect(await page.$('#as-of-form')).toBeNull();
    }
    await page.close();
  });

  it('works from the keyboard alone, at 390 px too', async () => {
    // The page as it is without JavaScript (its scripts refused), with axe-core able to run in it.
    const context = await noPageScripts(
      await web.browser.newContext({ viewport: { width: 390, height: 844 } }),
    );
    const page = await context.newPage();
    await page.goto(`${web.url}/sign-in`);
    await page.fill('#email', web.demo.email);
    await page.fill('#password', web.demo.password);
    await Promise.all([page.waitForNavigation(), page.press('#password', 'Enter')]);
    await page.goto(`${web.url}/articles/${articleId}`);
    // The "On this page" link to the form, then Tab into it: date, time, Enter.
    await page.focus('nav.jump a[href="#as-of"]');
    await page.keyboard.press('Enter');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.id')).toBe('as-of-date');
    const day = new Date((made[1] as Date).getTime() + DAY);
    const [y, m, d] = dateOf(day).split('-') as [string, string, string];
    // Debian's headless Chromium writes dates in US English whatever the context's locale (and
    // `--lang`): month, day, year; typing a part's digits moves on to the next part.
    await page.keyboard.type(`${m}${d}${y}`);
    expect(await page.inputValue('#as-of-date')).toBe(dateOf(day));
    // Tab leaves the date (Chromium stops on each of its parts first, then its calendar button).
    let tabs = 0;
    while ((await page.evaluate('document.activeElement.id')) !== 'as-of-time' && tabs < 5) {
      await page.keyboard.press('Tab');
      tabs++;
    }
    expect(await page.evaluate('document.activeElement.id')).toBe('as-of-time');
    await page.keyboard.type('073000A'); // hours, minutes, seconds, AM (US English again)
    expect(await page.inputValue('#as-of-time')).toMatch(/^07:30(:00)?$/);
    // On to the button (past the time's parts), and Enter.
    const onButton = (): Promise<boolean> =>
      page.evaluate<boolean>("document.activeElement.matches('#as-of-form button')");
    for (tabs = 0; !(await onButton()) && tabs < 5; tabs++) await page.keyboard.press('Tab');
    expect(await onButton()).toBe(true);
    const [response] = await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    expect(response?.status()).toBe(200);
    const url = new URL(page.url());
    expect(url.searchParams.get('date')).toBe(dateOf(day));
    expect(url.searchParams.get('time')).toMatch(/^07:30(:00)?$/);
    expect(await text(page, '#as-of-stated')).toContain(
      `As it stood at ${longDay(day)}, 07:30 UTC — revision 2.`,
    );
    expect(await page.textContent('#as-of-title')).toBe('Spring boiler checklist');
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(page, 'as-of-article-390');
    await expectAccessible(page, 'as-of at 390 px');
    // Refused, the error and the field it names are as accessible.
    const refused = await page.goto(`${web.url}/articles/${articleId}/as-of?date=${dateOf(day)}&time=25:00`);
    expect(refused?.status()).toBe(400);
    await expectAccessible(page, 'as-of refused at 390 px');
    await context.close();
  });

  it("support staff read it from the article's timeline, and the look is in the account's log", async () => {
    const context = await web.browser.newContext({
      javaScriptEnabled: false,
      viewport: { width: 1280, height: 800 },
    });
    const page = await context.newPage();
    await staffSignIn(page, web.url, staff);
    await page.goto(`${web.url}/staff/articles/${articleId}`);
    expect(await page.textContent('label[for=as-of-date]')).toBe('Date (UTC)');
    await expectLabelled(page);
    await screenshot(page, 'as-of-staff-timeline-form');
    const day = new Date((made[1] as Date).getTime() + DAY);
    expect(await viewAsOf(page, dateOf(day), '12:00')).toBe(200);
    expect(new URL(page.url()).pathname).toBe(`/staff/articles/${articleId}/as-of`);
    expect(await text(page, '#as-of-stated')).toContain(
      `As it stood at ${longDay(day)}, 12:00 UTC — revision 2.`,
    );
    expect(await page.getAttribute('#as-of-stated a', 'href')).toBe(
      `/staff/articles/${articleId}/revisions/2`,
    );
    expect(await page.textContent('#as-of-title')).toBe('Spring boiler checklist');
    expect(await page.textContent('.as-of-view article.article-body')).toContain('Bleed the radiators');
    // Read-only: the only form that posts is Sign out.
    const posts = await page.$$eval('form[method=post]', (fs) => fs.map((f) => f.getAttribute('action')));
    expect(posts).toEqual(['/sign-out']);
    await expectLabelled(page);
    await screenshot(page, 'as-of-staff-1280');
    await Promise.all([page.waitForNavigation(), page.click('#as-of-stated a:has-text("revision 2")')]);
    expect(new URL(page.url()).pathname).toBe(`/staff/articles/${articleId}/revisions/2`);

    // Future and before-creation, in words.
    const next = new Date().getUTCFullYear() + 1;
    let response = await page.goto(
      `${web.url}/staff/articles/${articleId}/as-of?date=${next}-06-01&time=09:00`,
    );
    expect(response?.status()).toBe(400);
    expect(await text(page, '#as-of-error')).toContain('is in the future');
    response = await page.goto(
      `${web.url}/staff/articles/${articleId}/as-of?date=${dateOf(new Date((made[0] as Date).getTime() - DAY))}&time=09:00`,
    );
    expect(response?.status()).toBe(404);
    expect(await text(page, '#as-of-error')).toContain('This article did not exist yet at');
    expect(await fields(page)).toEqual({
      date: dateOf(new Date((made[0] as Date).getTime() - DAY)),
      time: '09:00',
    });
    await screenshot(page, 'as-of-staff-not-yet');
    // An article that does not exist: the staff's not-found page.
    response = await page.goto(`${web.url}/staff/articles/art_nothing/as-of?date=2026-01-01&time=09:00`);
    expect(response?.status()).toBe(404);
    expect(await page.textContent('main')).toContain('Back to support');

    // On a phone.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${web.url}/staff/articles/${articleId}/as-of?date=${dateOf(day)}&time=12:00`);
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(page, 'as-of-staff-390');
    await context.close();

    // Each look is a staff_view of the article in the account's activity log.
    await vi.waitFor(async () => {
      const res = await web.api(`/activity?article_id=${articleId}&per_page=100`);
      const records = ((await res.json()) as { data: { operation: string; actor: { name: string } }[] }).data;
      const looks = records.filter((r) => r.operation === 'staff_view' && r.actor.name === staff.name);
      // The timeline twice, three instants read (the future one reads nothing), the revision page.
      expect(looks.length).toBeGreaterThanOrEqual(5);
    }, PATIENCE_API);
  });
  it("the report of a past month says when it was made, its figures then, and today's where they differ", async () => {
    const [thisMonth, lastMonth, month] = recentMonths() as [string, string, string];
    // A site added early in the month (a month's report covers the sites that existed before it
    // ended), an article published and two backlinks acquired in it.
    clock = new Date(`${month}-02T08:00:00Z`);
    const { siteId } = await runtime.commands.addSite(web.demo.account_id, {
      name: 'Harbour Plumbing',
      domain: 'harbour-plumbing.example',
      url: 'https://harbour-plumbing.example/',
    });
    clock = new Date(`${month}-05T09:00:00Z`);
    await runtime.commands.createArticle(
      web.demo.account_id,
      {
        siteId,
        title: 'When to call a plumber',
        body: '<p>Before the ceiling drips.</p>',
        url: 'https://harbour-plumbing.example/blog/when-to-call',
        status: 'published',
        publishedAt: `${month}-05T09:00:00Z`,
        targetKeyword: null,
        featuredImage: null,
      },
      caller,
    );
    const backlink = (day: string, category: 'industry' | 'local', n: number) =>
      runtime.commands.acquireBacklink(web.demo.account_id, {
        siteId,
        acquiredOn: `${month}-${day}`,
        sourceDomain: `news-${n}.example`,
        sourceUrl: `https://news-${n}.example/plumbers-worth-knowing`,
        targetUrl: 'https://harbour-plumbing.example/',
        anchorText: 'plumbers worth knowing',
        anchorType: 'partial',
        category,
      });
    await backlink('06', 'industry', 1);
    await backlink('07', 'local', 2);
    // The month's report, made by the monthly job's own code on the first of the next month; last
    // month's too, on the first of this one.
    const firstOf = (m: string): Date =>
      new Date(Date.UTC(Number(m.slice(0, 4)), Number(m.slice(5, 7)), 1, 0, 5));
    clock = firstOf(month);
    await makeMonthlyReports({ db: runtime.db, commands: runtime.commands, now: () => clock }, month);
    clock = firstOf(lastMonth);
    await makeMonthlyReports({ db: runtime.db, commands: runtime.commands, now: () => clock }, lastMonth);
    // A backlink acquired in that month, recorded today: after its report.
    clock = new Date();
    await backlink('20', 'local', 3);
    // The statistics take it in a moment later.
    await vi.waitFor(async () => {
      expect((await stats(web, siteId, month)).backlinks).toEqual({ total: 3, industry: 1, local: 2 });
    }, PATIENCE_API);

    const page = await holder.newPage();
    const response = await page.goto(`${web.url}/sites/${siteId}/report?period=${month}`);
    expect(response?.status()).toBe(200);
    expect(await page.textContent('h1')).toBe(`Harbour Plumbing: ${monthName(month)}`);
    expect(await text(page, '#as-reported-heading')).toBe(`As reported on ${longDay(firstOf(month))}`);
    expect(await text(page, '#as-reported-note')).toBe(
      `The monthly report of ${monthName(month)} was made on ${longDay(firstOf(month))} at 00:05 UTC with the figures below. Some have changed since: what was recorded after the report (a backlink recorded late, an article whose status changed) counts in today’s figures, marked “now”.`,
    );
    const rows = await page.$$eval('#reported tbody tr', (trs) =>
      trs.map((tr) =>
        [...tr.querySelectorAll('th, td')].map((c) => (c.textContent ?? '').replace(/\s+/g, ' ').trim()),
      ),
    );
    expect(rows).toEqual([
      ['Articles published', '1', 'the same'],
      ['Backlinks acquired', '2', 'now: 3 1 more since the report'],
      ['Industry backlinks', '1', 'the same'],
      ['Local backlinks', '1', 'now: 2 1 more since the report'],
    ]);
    // The totals below are today's.
    expect(await page.$$eval('#totals tbody tr:nth-child(2) td', (tds) => tds[0]?.textContent)).toBe('3');
    await screenshot(page, 'report-as-reported-1280');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(page, 'report-as-reported-390');

    // Last month's report: nothing recorded since, the same figures as today.
    await page.goto(`${web.url}/sites/${siteId}/report?period=last_month`);
    expect(await text(page, '#as-reported-heading')).toBe(`As reported on ${longDay(firstOf(lastMonth))}`);
    expect(await text(page, '#as-reported-note')).toContain('Today’s figures for the month are the same.');
    expect(await page.$$eval('#reported .report-now', (es) => es.length)).toBe(0);
    await page.goto(`${web.url}/sites/${siteId}/report?period=${lastMonth}`);
    expect(await page.$('#as-reported')).not.toBeNull();
    // A month not ended, the last 30 days, and a month before the site was added have no report.
    const early = recentMonths()[4] as string;
    for (const period of ['this_month', thisMonth, 'last_30_days', early]) {
      await page.goto(`${web.url}/sites/${siteId}/report?period=${period}`);
      expect(await page.$('#as-reported'), period).toBeNull();
    }
    await page.close();
  });
});
