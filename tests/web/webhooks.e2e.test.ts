import pg from 'pg';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import { expectLabelled, screenshot, startWebApp, type WebApp } from '../support/web.ts';

/*
 * The Webhooks section of the Connect Site page and the page of one endpoint, in headless Chromium
 * with JavaScript off: adding an endpoint (its secret shown once), refusals keeping what was typed,
 * the notice of a disabled endpoint and Enable, deliveries (rows inserted here as the delivery engine
 * writes them) with Redeliver, the Replay form's refusals, Delete; axe-core on the new pages.
 */

type Endpoint = { id: string; url: string; enabled: boolean; secret?: string };

describe('webhooks on the Connect Site page', () => {
  let web: WebApp;
  let context: BrowserContext;
  let sql: pg.Client;

  beforeAll(async () => {
    web = await startWebApp({ articles: 2, backlinks: 0 });
    context = await web.signedIn();
    sql = new pg.Client({ connectionString: web.env.DATABASE_URL });
    await sql.connect();
  });
  afterAll(async () => {
    await sql?.end();
    await web?.stop();
  });

  async function open(path: string, on: BrowserContext = context): Promise<{ page: Page; status: number }> {
    const page = await on.newPage();
    const response = await page.goto(`${web.url}${path}`);
    return { page, status: response?.status() ?? 0 };
  }
  const text = async (page: Page, selector: string): Promise<string> =>
    ((await page.textContent(selector)) ?? '').replace(/\s+/g, ' ').trim();
  const apiEndpoints = async (): Promise<Endpoint[]> =>
    ((await (await web.api('/webhooks?per_page=100')).json()) as { data: Endpoint[] }).data;
  const createByApi = async (url: string): Promise<Endpoint> => {
    const res = await web.api('/webhooks', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url, events: ['article.published'] }),
    });
    expect(res.status).toBe(201);
    return (await res.json()) as Endpoint;
  };
  /** Axe on a page as it is with JavaScript off (its scripts refused, axe's own let in). */
  async function accessible(path: string, name: string): Promise<void> {
    const ctx = await noPageScripts(await web.signedIn({ javaScript: true }));
    const page = await ctx.newPage();
    await page.goto(`${web.url}${path}`);
    await expectAccessible(page, name);
    await ctx.close();
  }

  it('adds an endpoint with the form and shows its secret once', async () => {
    const { page, status } = await open('/connect');
    expect(status).toBe(200);
    expect(await text(page, '#webhooks h2')).toBe('Webhooks');
    expect(await page.isVisible('#no-webhooks')).toBe(true);
    await expectLabelled(page);
    await page.fill('#webhook-url', 'https://hooks.example.com/content');
    await page.check('#webhook-event-article-published');
    await page.check('#webhook-event-report-ready');
    await page.fill('#webhook-description', 'Team chat');
    const [response] = await Promise.all([
      page.waitForNavigation(),
      page.click('#add-webhook button[type=submit]'),
    ]);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['cache-control']).toBe('no-store');
    const secret = await page.inputValue('#new-webhook-secret');
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(await text(page, '#new-webhook')).toContain('will not be shown again');
    const row = await text(page, '#webhook-endpoints tbody tr');
    expect(row).toContain('https://hooks.example.com/content');
    expect(row).toContain('Team chat');
    expect(row).toContain('article.published, report.ready');
    expect(row).toContain('Enabled');
    await screenshot(page, 'connect-webhook-added');

    // Shown once: neither the page again nor the API has it.
    const again = await open('/connect');
    expect(await again.page.content()).not.toContain(secret);
    expect(await again.page.isVisible('#new-webhook')).toBe(false);
    const endpoints = await apiEndpoints();
    expect(endpoints.map((e) => e.url)).toEqual(['https://hooks.example.com/content']);
    expect(JSON.stringify(endpoints)).not.toContain(secret);
    // The table holds the secret the page showed: it is the one deliveries are signed with.
    const stored = await sql.query('select secret from webhook_endpoints where id = $1', [endpoints[0]?.id]);
    expect(stored.rows[0]?.secret).toBe(secret);
  });

  it('refuses a bad form with the field named and what was typed kept', async () => {
    const { page } = await open('/connect');
    await page.fill('#webhook-url', 'http://hooks.example.com/plain');
    await page.check('#webhook-event-backlink-acquired');
    await page.fill('#webhook-description', 'Kept');
    const [response] = await Promise.all([
      page.waitForNavigation(),
      page.click('#add-webhook button[type=submit]'),
    ]);
    expect(response?.status()).toBe(400);
    expect(await text(page, '#webhook-error')).toMatch(/^The URL must be an https URL/);
    expect(await page.getAttribute('#webhook-url', 'aria-invalid')).toBe('true');
    expect(await page.inputValue('#webhook-url')).toBe('http://hooks.example.com/plain');
    expect(await page.inputValue('#webhook-description')).toBe('Kept');
    expect(await page.isChecked('#webhook-event-backlink-acquired')).toBe(true);
    expect(await page.isChecked('#webhook-event-report-ready')).toBe(false);
    await screenshot(page, 'connect-webhook-refused');

    await page.fill('#webhook-url', 'https://hooks.example.com/none');
    await page.uncheck('#webhook-event-backlink-acquired');
    const [none] = await Promise.all([
      page.waitForNavigation(),
      page.click('#add-webhook button[type=submit]'),
    ]);
    expect(none?.status()).toBe(400);
    expect(await text(page, '#webhook-error')).toBe('The events must name at least one event type.');
    expect((await apiEndpoints()).map((e) => e.url)).not.toContain('https://hooks.example.com/none');
  });

  it('says why and since when an endpoint is disabled, and enables it again', async () => {
    const endpoint = await createByApi('https://hooks.example.com/gone');
    await sql.query(
      `update webhook_endpoints set enabled = false, disabled_reason = 'gone', disabled_at = '2026-11-20T12:00:00Z',
       failing_since = '2026-11-20T11:00:00Z' where id = $1`,
      [endpoint.id],
    );
    const { page } = await open('/connect');
    expect(await text(page, '#webhooks-disabled')).toContain('One endpoint is disabled');
    const row = await text(page, `#webhook-${endpoint.id}`);
    expect(row).toContain('Disabled since 2026-11-20 12:00 UTC');
    expect(row).toContain('It answered 410 Gone, which asks us to stop sending.');
    await screenshot(page, 'connect-webhook-disabled');

    await sql.query(`update webhook_endpoints set disabled_reason = 'failing' where id = $1`, [endpoint.id]);
    await page.reload();
    expect(await text(page, `#webhook-${endpoint.id}`)).toContain('Every delivery to it failed for 3 days.');

    // Enable: the notice goes, and the failure streak with it.
    await Promise.all([
      page.waitForNavigation(),
      page.click(`#webhook-${endpoint.id} form[action$="/enable"] button`),
    ]);
    expect(new URL(page.url()).pathname).toBe('/connect');
    expect(await text(page, `#webhook-${endpoint.id}`)).toContain('Enabled');
    expect(await page.isVisible('#webhooks-disabled')).toBe(false);
    const after = await sql.query(
      'select enabled, disabled_reason, failing_since from webhook_endpoints where id = $1',
      [endpoint.id],
    );
    expect(after.rows[0]).toEqual({ enabled: true, disabled_reason: null, failing_since: null });

    // Disable from the page: turned off on this account.
    await Promise.all([
      page.waitForNavigation(),
      page.click(`#webhook-${endpoint.id} form[action$="/disable"] button`),
    ]);
    expect(await text(page, `#webhook-${endpoint.id}`)).toContain('It was turned off on this account.');
  });

  it("shows an endpoint's deliveries, redelivers one and refuses a replay from the future", async () => {
    const endpoint = await createByApi('https://hooks.example.com/deliveries');
    const accountId = web.demo.account_id;
    const insert = async (
      id: string,
      n: number,
      status: string,
      code: number | null,
      error: string | null,
    ) => {
      await sql.query(
        `insert into webhook_deliveries (id, endpoint_id, account_id, event_id, event_type, payload, source, status,
           attempts, next_attempt_at, last_attempt_at, last_status_code, last_duration_ms, last_error, delivered_at, created_at)
         values ($1, $2, $3, $4, 'article.published', $5, 'live', $6, $7, $8, $8, $9, $10, $11, $12, $13)`,
        [
          id,
          endpoint.id,
          accountId,
          `evt-${n}`,
          JSON.stringify({
            id: `evt-${n}`,
            type: 'article.published',
            created_at: '2026-11-02T09:30:00Z',
            data: {},
          }),
          status,
          n,
          `2026-11-0${n}T10:00:00Z`,
          code,
          100 + n,
          error,
          status === 'succeeded' ? `2026-11-0${n}T10:00:00Z` : null,
          `2026-11-0${n}T09:59:00Z`,
        ],
      );
    };
    await insert('dlv_web_1', 1, 'succeeded', 200, null);
    await insert('dlv_web_2', 2, 'failed', 500, 'HTTP 500');
    await sql.query(
      `insert into webhook_attempts (delivery_id, attempt, at, status_code, duration_ms, error)
       values ('dlv_web_2', 1, '2026-11-02T09:59:00Z', null, 10000, 'timed out'), ('dlv_web_2', 2, '2026-11-02T10:00:00Z', 500, 102, 'HTTP 500')`,
    );

    // From the list to the endpoint's page.
    const { page } = await open('/connect');
    await Promise.all([page.waitForNavigation(), page.click(`a[href="/connect/webhooks/${endpoint.id}"]`)]);
    expect(await text(page, 'h1')).toBe('Webhook endpoint');
    expect(await text(page, '#endpoint-url')).toBe('https://hooks.example.com/deliveries');
    const rows = await page.$$eval('#webhook-deliveries tbody tr', (trs) =>
      trs.map((tr) =>
        [...tr.querySelectorAll('td')].map((td) => (td.textContent ?? '').replace(/\s+/g, ' ').trim()),
      ),
    );
    expect(rows).toEqual([
      ['2026-11-02 09:59 UTC', 'article.published', 'Failed', '2', '500 HTTP 500', '102 ms', 'Redeliver'],
      ['2026-11-01 09:59 UTC', 'article.published', 'Delivered', '1', '200', '101 ms', 'Redeliver'],
    ]);
    await expectLabelled(page);

    await Promise.all([page.waitForNavigation(), page.click('#delivery-dlv_web_2 button')]);
    expect(new URL(page.url()).search).toBe('?done=redelivered');
    expect(await text(page, '#webhook-done')).toContain('queued again');
    const first = await text(page, '#webhook-deliveries tbody tr');
    expect(first).toContain('(redelivery)');
    expect(first).toContain('Pending');
    const copy = await sql.query(
      `select source, source_id, event_id, status from webhook_deliveries where endpoint_id = $1 and source = 'redelivery'`,
      [endpoint.id],
    );
    expect(copy.rows).toEqual([
      { source: 'redelivery', source_id: 'dlv_web_2', event_id: 'evt-2', status: 'pending' },
    ]);
    await screenshot(page, 'connect-webhook-endpoint');

    await page.fill('#replay-from', '3026-01-01T10:00:00');
    const [refused] = await Promise.all([
      page.waitForNavigation(),
      page.click('#replay button[type=submit]'),
    ]);
    expect(refused?.status()).toBe(400);
    expect(await text(page, '#replay-error')).toBe('The time to replay from must not be in the future.');
    // Kept as typed (Chromium writes a whole minute without its seconds).
    expect(await page.inputValue('#replay-from')).toMatch(/^3026-01-01T10:00(:00)?$/);
  });

  it('replays from a time and says how many events were queued', async () => {
    const res = await web.api('/webhooks', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://hooks.example.com/replayed', events: ['article.created'] }),
    });
    const endpoint = (await res.json()) as Endpoint;
    const { page } = await open(`/connect/webhooks/${endpoint.id}`);
    await page.fill('#replay-from', '2000-01-01T00:00');
    await Promise.all([page.waitForNavigation(), page.click('#replay button[type=submit]')]);
    // The demo account's articles were created before the endpoint: the replay queues each one.
    const created = await sql.query(
      `select count(*)::int as n from events where type = 'ArticleCreated' and data ->> 'accountId' = $1`,
      [web.demo.account_id],
    );
    const n = (created.rows[0] as { n: number }).n;
    expect(n).toBeGreaterThan(1);
    expect(new URL(page.url()).searchParams.get('done')).toBe('replayed');
    expect(await text(page, '#webhook-done')).toBe(`${n} events are queued again.`);
    const rows = await sql.query(
      `select source, event_type from webhook_deliveries where endpoint_id = $1 order by seq`,
      [endpoint.id],
    );
    expect(rows.rows).toEqual(
      Array.from({ length: n }, () => ({ source: 'replay', event_type: 'article.created' })),
    );
  });

  it('passes axe-core on the Connect Site page with endpoints and on an endpoint page', async () => {
    const endpoints = await apiEndpoints();
    expect(endpoints.some((e) => !e.enabled)).toBe(true);
    const withDeliveries = endpoints.find((e) => e.url.endsWith('/deliveries'));
    expect(withDeliveries).toBeDefined();
    await accessible('/connect', 'connect with webhooks');
    await accessible(`/connect/webhooks/${withDeliveries?.id}`, 'webhook endpoint');
    const phone = await (await web.signedIn({ width: 390 })).newPage();
    await phone.goto(`${web.url}/connect/webhooks/${withDeliveries?.id}`);
    // Nothing wider than the screen but the deliveries table, which scrolls in its own box.
    expect(await phone.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(phone, 'connect-webhook-endpoint-phone');
  });

  it('deletes an endpoint with its deliveries', async () => {
    const endpoint = await createByApi('https://hooks.example.com/delete-me');
    const { page } = await open('/connect');
    await Promise.all([
      page.waitForNavigation(),
      page.click(`#webhook-${endpoint.id} form[action$="/delete"] button`),
    ]);
    expect(await page.isVisible(`#webhook-${endpoint.id}`)).toBe(false);
    expect((await apiEndpoints()).map((e) => e.id)).not.toContain(endpoint.id);
  });

  it("answers another account's endpoint, or a form without its CSRF field, with a refusal", async () => {
    const other = await sql.query(
      `insert into webhook_endpoints (id, account_id, url, events, secret, created_at, updated_at)
       values ('whe_not_mine', 'acc_someone_else', 'https://x.example/', '{report.ready}', 'whsec_x', now(), now()) returning id`,
    );
    expect(other.rows).toHaveLength(1);
    const { page, status } = await open('/connect/webhooks/whe_not_mine');
    expect(status).toBe(404);
    expect(await text(page, 'h1')).toBe('Not found');
    const forged = await fetch(`${web.url}/connect/webhooks/whe_not_mine/delete`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
      redirect: 'manual',
    });
    // Signed out: to sign-in; nothing deleted.
    expect(forged.status).toBe(303);
    const cookies = await context.cookies();
    const withSession = await fetch(`${web.url}/connect/webhooks/whe_not_mine/delete`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: cookies.map((c) => `${c.name}=${c.value}`).join('; '),
        origin: web.url,
      },
      body: 'csrf=forged',
      redirect: 'manual',
    });
    expect(withSession.status).toBe(403);
    const still = await sql.query(`select id from webhook_endpoints where id = 'whe_not_mine'`);
    expect(still.rows).toHaveLength(1);
  });
});
