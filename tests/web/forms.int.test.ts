import { connect } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { FORM_FIELDS_MAX } from '../../apps/server/web/form-body.ts';
import { installFormParser, type WebKit } from '../../apps/server/web/kit.ts';
import { createPerson, freePort, type Person } from '../oauth/helpers.ts';
import { csrfOf, type InjectBrowser, injectBrowser, signInWith } from '../support/inject-browser.ts';
import { addSiteWithArticle, createTestRuntime } from '../support/runtime.ts';

/*
 * The order of a form's checks (docs/web.md "Forms"): who sends it (session, Origin) before its body is
 * read, then a linear parse with a field cap, then the CSRF token. Proved structurally: a request whose
 * body is never sent is answered all the same; a body of too many fields is refused by the cap, with a
 * page, not parsed.
 */

let app: FastifyInstance;
let runtime: Runtime;
let drop: () => Promise<void>;
let dana: Person;
let articleId: string;
let url: string;
let port: number;
let signedIn: InjectBrowser;

/** The cookie header of a browser. */
const cookieOf = (b: InjectBrowser): string => [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; ');

/**
 * Sends the request line and headers of a form POST announcing a body of `length` bytes, and never the
 * body: the status line and headers of the answer, which can only come if the body is not waited for.
 */
function headersOnly(
  path: string,
  headers: Record<string, string>,
  length = 1024 * 1024,
): Promise<{ status: number; head: string; bodySent: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('connect', () => {
      const lines = [
        `POST ${path} HTTP/1.1`,
        `host: 127.0.0.1:${port}`,
        'content-type: application/x-www-form-urlencoded',
        `content-length: ${length}`,
        ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      ];
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    socket.on('data', (chunk: string) => {
      answer += chunk;
      const end = answer.indexOf('\r\n\r\n');
      if (end === -1) return;
      socket.destroy();
      const head = answer.slice(0, end);
      resolve({ status: Number(head.split(' ')[1]), head, bodySent: false });
    });
    socket.on('error', reject);
  });
}

function headerOf(head: string, name: string): string | undefined {
  const line = head.split('\r\n').find((l) => l.toLowerCase().startsWith(`${name}:`));
  return line?.slice(name.length + 1).trim();
}

beforeAll(async () => {
  const test = await createTestRuntime('postgres');
  ({ runtime, drop } = test);
  dana = await createPerson(runtime);
  ({ articleId } = await addSiteWithArticle(runtime, dana.accountId));
  port = await freePort();
  url = `http://127.0.0.1:${port}`;
  app = await buildApp({
    runtime,
    config: { PUBLIC_URL: url, LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-web-forms' },
    logger: false,
  });
  await app.listen({ host: '127.0.0.1', port });
  signedIn = injectBrowser(app, { headers: { origin: url } });
  await signInWith(signedIn, dana);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await drop?.();
});

/** Every form of the pages, as a path a POST goes to. */
const FORMS = (): string[] => [
  `/articles/${articleId}/edit`,
  `/articles/${articleId}/revisions/1/restore`,
  `/articles/${articleId}/featured-image`,
  '/account/password',
  '/connect/keys',
  '/connect/keys/key_x/revoke',
  '/connect/assistants/client_x/disconnect',
  '/connect/webhooks',
  '/connect/webhooks/whk_x/enable',
  '/connect/webhooks/whk_x/disable',
  '/connect/webhooks/whk_x/delete',
  '/connect/webhooks/whk_x/deliveries/dlv_x/redeliver',
  '/connect/webhooks/whk_x/replay',
  '/oauth/interaction/abcdefghijklmnop',
];

describe('who sends a form is checked before its body is read', () => {
  it('an unauthenticated POST to the editor is sent to sign-in while its 1 MiB body is still unsent', async () => {
    const res = await headersOnly(`/articles/${articleId}/edit`, {});
    expect(res.status).toBe(303);
    expect(headerOf(res.head, 'location')).toBe(
      `/sign-in?return_to=${encodeURIComponent(`/articles/${articleId}/edit`)}`,
    );
  });

  it('so is every other form of a signed-in person, to sign-in and back to the page the form is on', async () => {
    const back: Record<string, string> = {
      '/connect/keys': '/connect',
      '/connect/webhooks/whk_x/replay': '/connect/webhooks/whk_x',
      '/oauth/interaction/abcdefghijklmnop': '/oauth/interaction/abcdefghijklmnop',
    };
    for (const path of FORMS()) {
      const res = await headersOnly(path, {});
      expect(res.status, path).toBe(303);
      expect(headerOf(res.head, 'location'), path).toMatch(/^\/sign-in\?return_to=/);
      if (back[path]) {
        expect(headerOf(res.head, 'location'), path).toBe(
          `/sign-in?return_to=${encodeURIComponent(back[path])}`,
        );
      }
    }
  });

  it('a signed-in POST from another site is refused with the 403 page before its body is read', async () => {
    for (const path of FORMS()) {
      const res = await headersOnly(path, { cookie: cookieOf(signedIn), origin: 'https://evil.example' });
      expect(res.status, path).toBe(403);
      expect(headerOf(res.head, 'content-type'), path).toBe('text/html; charset=utf-8');
    }
    const fetchSite = await headersOnly(`/articles/${articleId}/edit`, {
      cookie: cookieOf(signedIn),
      'sec-fetch-site': 'cross-site',
    });
    expect(fetchSite.status).toBe(403);
  });

  it('sign-in and sign-out from another site are refused before their bodies are read', async () => {
    expect((await headersOnly('/sign-in', { origin: 'https://evil.example' })).status).toBe(403);
    expect(
      (await headersOnly('/sign-out', { cookie: cookieOf(signedIn), origin: 'https://evil.example' })).status,
    ).toBe(403);
    // Signing out nobody needs no body either.
    expect((await headersOnly('/sign-out', {})).status).toBe(303);
  });

  it('a route of a form scope that does not say who may send it is refused at startup', async () => {
    const bare = Fastify();
    await bare.register(async (scope) => {
      installFormParser(scope, {} as WebKit);
      expect(() => scope.post('/x', async () => 'ok')).toThrow(/config\.form/);
      scope.get('/y', async () => 'ok');
    });
    await bare.close();
  });
});

describe('form bodies', () => {
  it('a signed-in POST of 1 MiB of `a&a&…` to the editor is refused by the field cap, with a page', async () => {
    const res = await app.inject({
      method: 'POST',
      url: `/articles/${articleId}/edit`,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: url,
        cookie: cookieOf(signedIn),
      },
      payload: 'a&'.repeat(512 * 1024),
    });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.body).toContain(`The form has more than ${FORM_FIELDS_MAX} fields.`);
    expect(res.body).toContain('<main');
  });

  it('a field given twice is refused (which CSRF token would count?)', async () => {
    const page = await signedIn.get('/connect');
    const token = csrfOf(page.body);
    const res = await app.inject({
      method: 'POST',
      url: '/connect/keys',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: url,
        cookie: cookieOf(signedIn),
      },
      payload: `csrf=${token}&name=a&scope=read&name=b`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('The form has the field “name” more than once.');
  });

  it('a form past 16 KiB is the 413 page; a body that is not a form is the 415 page', async () => {
    const big = await signedIn.post('/connect/keys', { name: 'x'.repeat(20 * 1024), scope: 'read' });
    expect(big.statusCode).toBe(413);
    expect(big.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(big.body).toContain('The form is too large');
    const json = await app.inject({
      method: 'POST',
      url: '/connect/keys',
      headers: { 'content-type': 'application/json', origin: url, cookie: cookieOf(signedIn) },
      payload: JSON.stringify({ name: 'x', scope: 'read' }),
    });
    expect(json.statusCode).toBe(415);
    expect(json.headers['content-type']).toBe('text/html; charset=utf-8');
  });

  it('a field a form schema refuses is a 400 page, not JSON', async () => {
    const page = await signedIn.get('/connect');
    const res = await signedIn.post('/connect/keys', { csrf: csrfOf(page.body), name: 'x'.repeat(300) });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
  });

  it('a good form still works: a key is made, and shown on the page its 303 leads to', async () => {
    const page = await signedIn.get('/connect');
    const res = await signedIn.post('/connect/keys', {
      csrf: csrfOf(page.body),
      name: 'Report',
      scope: 'read',
    });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/connect#new-key');
    expect((await signedIn.get('/connect')).body).toContain('id="new-key-value"');
  });
});
