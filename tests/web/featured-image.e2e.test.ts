import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page, Response } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, noPageScripts } from '../support/axe.ts';
import { makeCertificate } from '../support/media.ts';
import { cli } from '../support/process.ts';
import { PATIENCE } from '../support/wait.ts';
import { expectLabelled, screenshot, startWebApp, type WebApp } from '../support/web.ts';

/*
 * Featured images and body images from https addresses on the article pages, and replacing the
 * featured image on the web (`/articles/{id}/featured-image`), through a real server in headless
 * Chromium with JavaScript off. The image host is a local HTTPS server on 127.0.0.2 with a
 * self-signed certificate: Chromium is told to accept it, the service trusts it through
 * MEDIA_FETCH_CA_FILE and may reach it through OUTBOUND_ALLOW_NETWORKS.
 */

const IMAGE_HOST = '127.0.0.2';

type Article = {
  id: string;
  revision: number;
  featured_image: { url: string; alt: string; width: number | null; height: number | null } | null;
};

describe('featured images on the web', () => {
  let web: WebApp;
  let dir: string;
  let images: Server;
  let imagesOrigin: string;
  /** The Referer header of every request the image host answered (none: undefined). */
  const referers: (string | undefined)[] = [];
  let photo: Buffer;
  let other: Buffer;
  /** An article whose featured image and body image are on the https image host. */
  let hosted: string;
  /** Demo articles (their featured images on hosts that do not answer here). */
  let demo: Article[];
  /** An article without a featured image. */
  const bare = 'art_no_featured_image';
  let context: BrowserContext;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-web-images-'));
    makeCertificate(dir, IMAGE_HOST);
    photo = await sharp({ create: { width: 640, height: 360, channels: 3, background: '#3366cc' } })
      .png()
      .toBuffer();
    other = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#cc6633' } })
      .png()
      .toBuffer();
    images = createServer(
      { key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) },
      (req, res) => {
        referers.push(req.headers.referer);
        if (req.url === '/photo.png') return res.writeHead(200, { 'content-type': 'image/png' }).end(photo);
        if (req.url === '/other.png') return res.writeHead(200, { 'content-type': 'image/png' }).end(other);
        res.writeHead(404).end();
      },
    );
    await new Promise<void>((resolve) => images.listen(0, IMAGE_HOST, resolve));
    imagesOrigin = `https://${IMAGE_HOST}:${(images.address() as { port: number }).port}`;
    web = await startWebApp({
      articles: 2,
      backlinks: 0,
      env: {
        MEDIA_FETCH_CA_FILE: join(dir, 'cert.pem'),
        OUTBOUND_ALLOW_NETWORKS: `${IMAGE_HOST}/32`,
      },
      browserArgs: ['--ignore-certificate-errors'],
    });
    const site = web.demo.sites[0]?.id as string;
    // An article as the content pipeline writes it: its images on an https host, as the demo's are.
    hosted = 'art_hosted_images';
    const file = join(dir, 'articles.jsonl');
    await writeFile(
      file,
      `${JSON.stringify({
        id: hosted,
        account_id: web.demo.account_id,
        site_id: site,
        title: 'Images from elsewhere',
        body: `<p>Before the picture.</p><p><img src="${imagesOrigin}/other.png" alt="An orange square" width="300" height="200"></p><p>After it.</p>`,
        url: 'https://example.org/images-from-elsewhere',
        status: 'published',
        published_at: '2026-11-02T09:30:00Z',
        featured_image: {
          url: `${imagesOrigin}/photo.png`,
          alt: 'A blue rectangle',
          width: 640,
          height: 360,
        },
      })}\n${JSON.stringify({
        id: bare,
        account_id: web.demo.account_id,
        site_id: site,
        title: 'No picture yet',
        body: '<p>Words only.</p>',
        url: 'https://example.org/no-picture-yet',
        status: 'draft',
      })}\n`,
    );
    const ingested = await cli(['ingest', 'articles', '--file', file], web.env);
    expect(ingested.code, ingested.stderr).toBe(0);
    const list = (await (await web.api(`/sites/${site}/articles?per_page=10`)).json()) as {
      data: Article[];
    };
    demo = list.data.filter((a) => a.id !== hosted && a.id !== bare);
    context = await web.signedIn();
  });
  afterAll(async () => {
    await web?.stop();
    images?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const article = async (id: string): Promise<Article> =>
    (await (await web.api(`/articles/${id}`)).json()) as Article;

  /**
   * How an image element stands: `loaded` (its picture decoded), `loading`, or `broken` (refused, failed
   * or not a picture: it will not load by waiting). A poll that times out says which it last saw,
   * beside the failed requests the page logged (`watchFailures`).
   */
  const imageState = (page: Page, selector: string): Promise<'loaded' | 'loading' | 'broken'> =>
    page.$eval(selector, (img) => {
      const i = img as unknown as { complete: boolean; naturalWidth: number };
      return i.complete ? (i.naturalWidth > 0 ? 'loaded' : 'broken') : 'loading';
    });
  const loaded = async (page: Page, selector: string): Promise<boolean> =>
    (await imageState(page, selector)) === 'loaded';

  /** Logs each request of the page to the image host that got no answer, with Chromium's reason. */
  const watchFailures = (page: Page): void => {
    page.on('requestfailed', (r) => {
      if (r.url().startsWith(imagesOrigin))
        console.warn(`request failed: ${r.url()}: ${r.failure()?.errorText}`);
    });
  };

  /** Opens the featured image page of `id` in a new tab. */
  async function imagePage(id: string, width = 1280): Promise<Page> {
    const page = await context.newPage();
    await page.setViewportSize({ width, height: 900 });
    const res = await page.goto(`${web.url}/articles/${id}/featured-image`);
    expect(res?.status()).toBe(200);
    return page;
  }

  /** Submits the form holding `button` and returns the answer of the page it lands on. */
  async function send(page: Page, button: string): Promise<Response> {
    const [res] = await Promise.all([page.waitForNavigation(), page.click(button)]);
    if (!res) throw new Error('no navigation');
    return res;
  }

  const UPLOAD = 'form:has(#upload-image) button[type=submit]';
  const FROM_URL = 'form:has(#url-url) button[type=submit]';

  /** Fills the address form with `url` and `alt` and sends it. */
  async function sendUrl(page: Page, url: string, alt: string): Promise<Response> {
    await page.fill('#url-url', url);
    await page.fill('#url-alt', alt);
    return send(page, FROM_URL);
  }

  it('shows the featured image and a body image from an https address, sending them no page address', async () => {
    const page = await context.newPage();
    watchFailures(page);
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await page.setViewportSize({ width: 1280, height: 900 });
    referers.length = 0;
    const res = await page.goto(`${web.url}/articles/${hosted}`);
    expect(res?.status()).toBe(200);
    const csp = (await res?.allHeaders())?.['content-security-policy'] ?? '';
    expect(csp).toContain("img-src 'self' https:;");
    expect(csp).not.toMatch(/http:|data:|\*/);
    expect((await res?.allHeaders())?.['referrer-policy']).toBe('same-origin');
    await expect.poll(() => imageState(page, 'figure.featured img'), PATIENCE).toBe('loaded');
    await expect.poll(() => imageState(page, '.article-body img'), PATIENCE).toBe('loaded');
    expect(await page.getAttribute('figure.featured img', 'alt')).toBe('A blue rectangle');
    expect(await page.textContent('figure.featured figcaption')).toBe('A blue rectangle');
    // No policy refused anything, and no image failed (other noise, such as a favicon's 404, aside).
    expect(errors.filter((e) => /Content Security Policy|127\.0\.0\.2/.test(e))).toEqual([]);
    // Neither image request told the image host which page it was on.
    expect(referers.length).toBeGreaterThanOrEqual(2);
    expect(referers.filter((r) => r !== undefined)).toEqual([]);
    await screenshot(page, 'featured-image-https-1280');
    await page.setViewportSize({ width: 390, height: 900 });
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(page, 'featured-image-https-390');
    // The revision page shows them too; pages without article images keep `img-src 'self'`.
    const revision = await page.goto(`${web.url}/articles/${hosted}/revisions/1`);
    expect((await revision?.allHeaders())?.['content-security-policy']).toContain("img-src 'self' https:;");
    await expect
      .poll(() => loaded(page, 'section[aria-labelledby=content] figure.featured img'), PATIENCE)
      .toBe(true);
    for (const path of ['/sites', `/articles/${hosted}/edit`, '/activity']) {
      const other = await page.goto(`${web.url}${path}`);
      expect((await other?.allHeaders())?.['content-security-policy'], path).toContain("img-src 'self';");
    }
    await page.close();
  });

  it('keeps the layout when a featured image cannot be loaded', async () => {
    const broken = demo.find((a) => a.featured_image !== null) as Article;
    expect(broken.featured_image?.url).toMatch(/^https:\/\/images\./);
    const page = await context.newPage();
    await page.setViewportSize({ width: 390, height: 900 });
    await page.goto(`${web.url}/articles/${broken.id}`);
    await expect
      .poll(
        () => page.$eval('figure.featured img', (i) => (i as unknown as { complete: boolean }).complete),
        PATIENCE,
      )
      .toBe(true);
    expect(await loaded(page, 'figure.featured img')).toBe(false);
    expect(await page.getAttribute('figure.featured img', 'alt')).toBe(broken.featured_image?.alt);
    const box = await page.$eval('figure.featured img', (i) => {
      const r = i.getBoundingClientRect();
      return { width: r.width, height: r.height };
    });
    const figure = await page.$eval('figure.featured', (f) => f.getBoundingClientRect().width);
    expect(box.width).toBeLessThanOrEqual(figure);
    // Its place is kept at the image's proportions (1200 x 630).
    expect(Math.abs(box.height - (box.width * 630) / 1200)).toBeLessThan(2);
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await screenshot(page, 'featured-image-broken-390');
    await page.close();
  });

  it('replaces the featured image by an upload, as a revision of the editor', async () => {
    const target = demo[0] as Article;
    const before = await article(target.id);
    const page = await context.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${web.url}/articles/${target.id}`);
    await Promise.all([
      page.waitForNavigation(),
      page.click(`a:text-is("${before.featured_image ? 'Replace featured image' : 'Add a featured image'}")`),
    ]);
    expect(page.url()).toBe(`${web.url}/articles/${target.id}/featured-image`);
    await expectLabelled(page);
    await screenshot(page, 'featured-image-form');
    await page.setInputFiles('#upload-image', { name: 'blue.png', mimeType: 'image/png', buffer: photo });
    await page.fill('#upload-alt', 'A blue rectangle, uploaded');
    const res = await send(page, UPLOAD);
    expect(res.status()).toBe(200);
    const after = await article(target.id);
    expect(after.revision).toBe(before.revision + 1);
    expect(after.featured_image).toMatchObject({
      alt: 'A blue rectangle, uploaded',
      width: 640,
      height: 360,
    });
    expect(after.featured_image?.url).toMatch(new RegExp(`^${web.url}/media/[0-9a-f]{64}\\.png$`));
    expect(page.url()).toBe(`${web.url}/articles/${target.id}?saved=${after.revision}`);
    expect(await page.textContent('#saved-notice')).toContain(`Saved as revision ${after.revision}`);
    expect(await page.getAttribute('figure.featured img', 'src')).toBe(after.featured_image?.url);
    await expect.poll(() => loaded(page, 'figure.featured img'), PATIENCE).toBe(true);
    const row = (await page.textContent(`#revision-${after.revision}`)) ?? '';
    expect(row).toContain('Editor');
    expect(row).toContain('(person)');
    await screenshot(page, 'featured-image-replaced');
    // In the activity log as a change made on the pages, with the revision it made.
    const activity = (await (await web.api(`/activity?article_id=${target.id}`)).json()) as {
      data: { operation: string; source: string; revision: number | null; status: number }[];
    };
    expect(activity.data).toContainEqual(
      expect.objectContaining({
        operation: 'replace_featured_image',
        source: 'editor',
        revision: after.revision,
        status: 200,
      }),
    );
    await page.close();
  });

  it('replaces the featured image from an https address, kept as a copy', async () => {
    const target = demo[1] as Article;
    const before = await article(target.id);
    const page = await imagePage(target.id);
    const res = await sendUrl(page, `${imagesOrigin}/other.png`, 'An orange rectangle');
    expect(res.status()).toBe(200);
    const after = await article(target.id);
    expect(after.revision).toBe(before.revision + 1);
    expect(after.featured_image).toMatchObject({ alt: 'An orange rectangle', width: 300, height: 200 });
    expect(after.featured_image?.url).toMatch(new RegExp(`^${web.url}/media/`));
    expect(await page.textContent('#saved-notice')).toContain(`Saved as revision ${after.revision}`);
    await expect.poll(() => loaded(page, 'figure.featured img'), PATIENCE).toBe(true);
    // The same image again changes nothing and says so.
    await page.goto(`${web.url}/articles/${target.id}/featured-image`);
    expect((await sendUrl(page, `${imagesOrigin}/other.png`, 'An orange rectangle')).status()).toBe(200);
    expect(await page.textContent('#image-unchanged')).toContain('Nothing changed');
    expect((await article(target.id)).revision).toBe(after.revision);
    await page.close();
  });

  it('says "Add a featured image" for an article that has none, on its way in and when refused, then "Replace" once it has one', async () => {
    const page = await context.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${web.url}/articles/${bare}`);
    await Promise.all([page.waitForNavigation(), page.click('a:text-is("Add a featured image")')]);
    expect(await page.title()).toMatch(/^Add a featured image · No picture yet/);
    expect(await page.textContent('h1')).toBe('Add a featured image');
    expect(await page.textContent('nav[aria-label=Breadcrumb] [aria-current=page]')).toBe(
      'Add a featured image',
    );
    expect(await page.textContent(UPLOAD)).toBe('Upload and add');
    expect(await page.textContent(FROM_URL)).toBe('Fetch and add');
    const text = (await page.textContent('main')) ?? '';
    expect(text).not.toMatch(/replace/i);
    expect(await page.textContent('#current + *')).toContain('No featured image.');
    await screenshot(page, 'featured-image-add');
    // Refused: still adding.
    const refused = await sendUrl(page, 'http://example.org/picture.png', 'A picture');
    expect(refused.status()).toBe(422);
    expect(await page.textContent('#refusal-url')).toContain('Not added.');
    expect(await page.textContent('h1')).toBe('Add a featured image');
    // Added: from then on the page replaces it.
    await page.setInputFiles('#upload-image', { name: 'blue.png', mimeType: 'image/png', buffer: photo });
    await page.fill('#upload-alt', 'A blue rectangle');
    expect((await send(page, UPLOAD)).status()).toBe(200);
    expect(await page.textContent('a.button[href$="/featured-image"]')).toBe('Replace featured image');
    await page.goto(`${web.url}/articles/${bare}/featured-image`);
    expect(await page.textContent('h1')).toBe('Replace the featured image');
    expect(await page.title()).toMatch(/^Featured image · No picture yet/);
    expect(await page.textContent(UPLOAD)).toBe('Upload and replace');
    await page.close();
  });

  describe('refusals: the page again, what went wrong beside the form, nothing replaced', () => {
    const refusals: {
      name: string;
      fill: (page: Page) => Promise<void>;
      button: string;
      status: number;
      alert: string;
      message: RegExp;
      invalid: string;
      /** A field that keeps what was typed, and its value. */
      kept: [string, string];
    }[] = [
      {
        name: 'a file that is not an accepted image',
        fill: async (page) => {
          await page.setInputFiles('#upload-image', {
            name: 'drawing.svg',
            mimeType: 'image/svg+xml',
            buffer: Buffer.from(
              '<svg xmlns="http://www.w3.org/2000/svg"><rect width="10" height="10"/></svg>',
            ),
          });
          await page.fill('#upload-alt', 'A drawing');
        },
        button: UPLOAD,
        status: 415,
        alert: '#refusal-upload',
        message: /JPEG, PNG, WebP, GIF or AVIF/,
        invalid: '#upload-image',
        kept: ['#upload-alt', 'A drawing'],
      },
      {
        name: 'a file over 10 MiB',
        fill: async (page) => {
          await page.setInputFiles('#upload-image', {
            name: 'huge.png',
            mimeType: 'image/png',
            buffer: Buffer.concat([photo, Buffer.alloc(10 * 1024 * 1024)]),
          });
          await page.fill('#upload-alt', 'Too big');
        },
        button: UPLOAD,
        status: 413,
        alert: '#refusal-upload',
        message: /larger than 10 MiB/,
        invalid: '#upload-image',
        kept: ['#upload-alt', 'Too big'],
      },
      {
        name: 'an address that is not https',
        fill: async (page) => {
          await page.fill('#url-url', `http://${IMAGE_HOST}:${imagesOrigin.split(':')[2]}/photo.png`);
          await page.fill('#url-alt', 'Over plain http');
        },
        button: FROM_URL,
        status: 422,
        alert: '#refusal-url',
        message: /could not be fetched.*https/,
        invalid: '#url-url',
        kept: ['#url-alt', 'Over plain http'],
      },
      {
        name: 'an alt text of spaces only',
        fill: async (page) => {
          await page.setInputFiles('#upload-image', {
            name: 'blue.png',
            mimeType: 'image/png',
            buffer: photo,
          });
          await page.fill('#upload-alt', '   ');
        },
        button: UPLOAD,
        status: 400,
        alert: '#refusal-upload',
        message: /Give the alt text/,
        invalid: '#upload-alt',
        kept: ['#upload-alt', '   '],
      },
    ];

    for (const r of refusals) {
      it(r.name, async () => {
        const target = demo[0] as Article;
        const before = await article(target.id);
        const page = await imagePage(target.id);
        await r.fill(page);
        const res = await send(page, r.button);
        expect(res.status()).toBe(r.status);
        expect(page.url()).toBe(`${web.url}/articles/${target.id}/featured-image`);
        expect(await page.textContent(r.alert)).toMatch(r.message);
        expect(await page.getAttribute(r.alert, 'role')).toBe('alert');
        expect(await page.getAttribute(r.invalid, 'aria-invalid')).toBe('true');
        expect(await page.inputValue(r.kept[0])).toBe(r.kept[1]);
        expect(await article(target.id)).toEqual(before);
        await page.close();
      });
    }

    it('a form opened before the article changed', async () => {
      const target = demo[0] as Article;
      const page = await imagePage(target.id);
      // Someone else replaces the image meanwhile (the API, the same use case).
      const form = new FormData();
      form.append('image', new Blob([other]), 'other.png');
      form.append('alt', 'Replaced meanwhile');
      expect(
        (await web.api(`/articles/${target.id}/featured-image`, { method: 'POST', body: form })).status,
      ).toBe(200);
      const before = await article(target.id);
      const res = await sendUrl(page, `${imagesOrigin}/photo.png`, 'Mine');
      expect(res.status()).toBe(412);
      expect(await page.textContent('#refusal')).toContain(`it is now at revision ${before.revision}`);
      expect(await page.textContent('figure.featured figcaption')).toBe('Replaced meanwhile');
      // What was typed is kept; the form now names the current revision, so sending it again replaces.
      expect(await page.inputValue('#url-alt')).toBe('Mine');
      expect(await article(target.id)).toEqual(before);
      await screenshot(page, 'featured-image-stale');
      expect((await send(page, FROM_URL)).status()).toBe(200);
      expect((await article(target.id)).revision).toBe(before.revision + 1);
      await page.close();
    });

    it('a body that is not one of the page’s forms: a 400 page, never a 500', async () => {
      const target = demo[0] as Article;
      const before = await article(target.id);
      const page = await imagePage(target.id);
      const csrf = await page.getAttribute('form:has(#url-url) input[name=csrf]', 'value');
      const path = `${web.url}/articles/${target.id}/featured-image`;
      const part = (name: string, value: string, file?: string) =>
        `--b\r\ncontent-disposition: form-data; name="${name}"${file ? `; filename="${file}"` : ''}\r\n\r\n${value}\r\n`;
      const bodies: [string, string][] = [
        ['application/x-www-form-urlencoded', `csrf=${csrf}&url=https%3A%2F%2Fexample.org%2Fa.png&alt=x`],
        ['multipart/form-data; boundary=b', `${part('csrf', csrf ?? '')}--b\r\ncontent-disposition: form-da`],
        [
          'multipart/form-data; boundary=b',
          `${part('csrf', csrf ?? '')}${part('image', 'a', 'a.png')}${part('image', 'b', 'b.png')}${part('alt', 'x')}--b--\r\n`,
        ],
        ['multipart/form-data; boundary=b', `${part('csrf', csrf ?? '')}${part('title', 'x')}--b--\r\n`],
      ];
      for (const [type, data] of bodies) {
        const res = await page.request.post(path, { headers: { 'content-type': type }, data });
        expect(res.status(), data).toBe(400);
        expect(await res.text()).toContain('id="refusal"');
      }
      expect(await article(target.id)).toEqual(before);
      // A good form for an article that is not the person's: the 404 page, the body read and dropped.
      const form = `${part('csrf', csrf ?? '')}${part('image', photo.toString('latin1'), 'a.png')}${part('alt', 'x')}--b--\r\n`;
      const missing = await page.request.post(`${web.url}/articles/art_not_there/featured-image`, {
        headers: { 'content-type': 'multipart/form-data; boundary=b' },
        data: Buffer.from(form, 'latin1'),
      });
      expect(missing.status()).toBe(404);
      await page.close();
    });

    it('a form without the page’s token (403), read to its end and dropped', async () => {
      const target = demo[0] as Article;
      const before = await article(target.id);
      const page = await imagePage(target.id);
      // A form with a wrong token, sent from the page itself.
      await page.$eval('form:has(#url-url) input[name=csrf]', (i) => i.setAttribute('value', 'forged'));
      const res = await sendUrl(page, `${imagesOrigin}/photo.png`, 'Forged');
      expect(res.status()).toBe(403);
      expect(await page.textContent('h1')).toBe('This form has expired');
      expect(await article(target.id)).toEqual(before);
      await page.close();
    });
  });

  it('passes axe with JavaScript off, at 1100 px light and 390 px dark, a refusal shown', async () => {
    for (const [width, colorScheme] of [
      [1100, 'light'],
      [390, 'dark'],
    ] as const) {
      const ctx = await noPageScripts(await web.signedIn({ javaScript: true, width }));
      const page = await ctx.newPage();
      await page.emulateMedia({ colorScheme });
      await page.goto(`${web.url}/articles/${hosted}`);
      await expectAccessible(page, `article with https images at ${width}`);
      await page.goto(`${web.url}/articles/${hosted}/featured-image`);
      await expectAccessible(page, `featured image page at ${width}`);
      await page.fill('#upload-alt', ' ');
      await page.setInputFiles('#upload-image', { name: 'blue.png', mimeType: 'image/png', buffer: photo });
      expect((await send(page, UPLOAD)).status()).toBe(400);
      await expectAccessible(page, `featured image page refused at ${width}`);
      expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
      await screenshot(page, `featured-image-refused-${width}-${colorScheme}`);
      await ctx.close();
    }
  });
});
