import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeUrl,
  authorizeWithoutBrowser,
  createPerson,
  type DocumentServer,
  type Person,
  PUBLIC_CLIENT,
  pkce,
  registerClient,
  startDocumentServer,
  startTestApp,
  type TestApp,
  tokenRequest,
} from './helpers.ts';

/*
 * What the authorization server refuses, and how: errors of an authorization request raised before the
 * person has acted are shown on the service's own page (never sent to the client's redirect URI: anyone
 * may register a client with any https redirect URI); text that does not belong in client metadata or
 * OAuth parameters (control characters, unpaired surrogates) is a clean 400 wherever it comes in; and
 * its own error responses leak nothing and carry X-Request-Id.
 */

/** Anyone may register a client whose redirect URI points anywhere on the web. */
const ATTACKER_REDIRECT = 'https://evil.example/landing';

let t: TestApp;
let docs: DocumentServer;
let dana: Person;
let clientId: string;

async function clientRows(): Promise<number> {
  const row = await t.runtime.db
    .selectFrom('oauth_models')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('kind', '=', 'Client')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** A valid authorization request of the attacker's client, with `changes` applied (undefined removes). */
function request(changes: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: ATTACKER_REDIRECT,
    scope: 'content:read',
    state: 'st-123',
    code_challenge: pkce().challenge,
    code_challenge_method: 'S256',
    ...changes,
  };
}

/** Asserts the service's own error page: 400, HTML, no Location, nothing that sends the browser on. */
async function expectErrorPage(res: Response, code: string): Promise<string> {
  const page = await res.text();
  expect(res.status, page).toBe(400);
  expect(res.headers.get('location')).toBeNull();
  expect(res.headers.get('content-type')).toMatch(/^text\/html/);
  expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
  expect(res.headers.get('cache-control')).toContain('no-store');
  expect(res.headers.get('x-request-id')).toMatch(/\S/);
  expect(page).toContain('<title>Could not connect · Content Service</title>');
  expect(page).toContain(`<code>${code}</code>`);
  expect(page).not.toContain('evil.example');
  expect(page).not.toMatch(/<script|<form|http-equiv/i);
  return page;
}

beforeAll(async () => {
  docs = await startDocumentServer();
  t = await startTestApp({ config: docs.config });
  dana = await createPerson(t.runtime, 'Dana Plumber');
  const res = await registerClient(t.url, {
    ...PUBLIC_CLIENT,
    client_name: 'Harmless Looking Assistant',
    redirect_uris: [ATTACKER_REDIRECT],
  });
  expect(res.status).toBe(201);
  clientId = ((await res.json()) as { client_id: string }).client_id;
});

afterAll(async () => {
  await t?.close();
  await docs?.close();
});

describe('errors before the person acts stay on our page (RFC 9700 section 4.11.2)', () => {
  it.each([
    ['no code_challenge', { code_challenge: undefined, code_challenge_method: undefined }, 'invalid_request'],
    ['code_challenge_method=plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['a code_challenge that is too short', { code_challenge: 'short' }, 'invalid_request'],
    ['prompt=none', { prompt: 'none' }, 'login_required'],
    [
      'prompt=none with response_mode=form_post',
      { prompt: 'none', response_mode: 'form_post' },
      'login_required',
    ],
    [
      'prompt=none with response_mode=fragment',
      { prompt: 'none', response_mode: 'fragment' },
      'login_required',
    ],
    ['another resource', { resource: 'https://other.example/mcp' }, 'invalid_target'],
    ['response_type=token', { response_type: 'token' }, 'unsupported_response_type'],
    ['no response_type', { response_type: undefined }, 'invalid_request'],
    ['an unknown response_mode', { response_mode: 'carrier_pigeon' }, 'unsupported_response_mode'],
    ['a scope with characters no scope has', { scope: 'content:read "quoted"' }, 'invalid_scope'],
    ['a request object', { request: 'eyJhbGciOiJub25lIn0.e30.' }, 'request_not_supported'],
    ['max_age that is not a number', { max_age: 'soon' }, 'invalid_request'],
    ['a nonce without openid', { nonce: 'n-1' }, 'invalid_request'],
  ])('%s: a 400 page on the service, no redirect', async (_name, changes, code) => {
    const res = await fetch(authorizeUrl(t.url, request(changes)), { redirect: 'manual' });
    await expectErrorPage(res, code);
  });

  it('a repeated parameter: a 400 page on the service, no redirect', async () => {
    const url = authorizeUrl(t.url, request());
    url.search += '&state=again';
    await expectErrorPage(await fetch(url, { redirect: 'manual' }), 'invalid_request');
  });

  it('names the problem plainly', async () => {
    const res = await fetch(authorizeUrl(t.url, request({ code_challenge_method: 'plain' })), {
      redirect: 'manual',
    });
    const page = await expectErrorPage(res, 'invalid_request');
    expect(page).toContain('incomplete or has a value that is not allowed');
    expect(page).toContain('not supported value of code_challenge_method');
    const none = await expectErrorPage(
      await fetch(authorizeUrl(t.url, request({ prompt: 'none' })), { redirect: 'manual' }),
      'login_required',
    );
    expect(none).toContain('connecting always needs you to sign in and allow it');
  });

  it('Deny still sends the person back to the assistant with access_denied and its state', async () => {
    const { back, state } = await authorizeWithoutBrowser({
      base: t.url,
      person: dana,
      clientId,
      redirectUri: ATTACKER_REDIRECT,
      decision: 'deny',
    });
    expect(back.origin + back.pathname).toBe(ATTACKER_REDIRECT);
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe(state);
    expect(back.searchParams.get('code')).toBeNull();
  });

  it('Allow still sends the code back to the assistant', async () => {
    const { back, state } = await authorizeWithoutBrowser({
      base: t.url,
      person: dana,
      clientId,
      redirectUri: ATTACKER_REDIRECT,
    });
    expect(back.origin + back.pathname).toBe(ATTACKER_REDIRECT);
    expect(back.searchParams.get('code')).toMatch(/\S/);
    expect(back.searchParams.get('state')).toBe(state);
  });
});

describe('control characters and unpaired surrogates in client metadata (RFC 7591)', () => {
  it.each([
    [
      'client_name',
      { client_name: 'Evil\u0000Assistant' },
      'client_name contains the control character U+0000',
    ],
    ['client_name', { client_name: 'Bell\u0007' }, 'client_name contains the control character U+0007'],
    ['client_name', { client_name: 'Half \ud83d surrogate' }, 'client_name contains an unpaired surrogate'],
    [
      'client_name',
      { client_name: 'C1 \u0085 control' },
      'client_name contains the control character U+0085',
    ],
    ['client_uri', { client_uri: 'https://a.example/\u0000' }, 'client_uri contains the control character'],
    ['logo_uri', { logo_uri: 'https://a.example/\udc00.png' }, 'logo_uri contains an unpaired surrogate'],
    ['policy_uri', { policy_uri: 'https://a.example/\u0001' }, 'policy_uri contains the control character'],
    ['tos_uri', { tos_uri: 'https://a.example/\u007f' }, 'tos_uri contains the control character U+007F'],
    ['contacts', { contacts: ['ok@example.com', 'x\u0000@example.com'] }, 'contacts[1] contains'],
    ['software_id', { software_id: 'id\u0000' }, 'software_id contains the control character'],
    ['software_version', { software_version: '1.0\u0000' }, 'software_version contains'],
    ['scope', { scope: 'content:read\u0000' }, 'scope contains the control character'],
  ])(
    'refuses a bad %s with 400 invalid_client_metadata naming it, storing nothing',
    async (_f, extra, why) => {
      const before = await clientRows();
      const res = await registerClient(t.url, {
        ...PUBLIC_CLIENT,
        redirect_uris: [ATTACKER_REDIRECT],
        ...extra,
      });
      const body = (await res.json()) as { error: string; error_description: string };
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.headers.get('x-request-id')).toMatch(/\S/);
      expect(body.error).toBe('invalid_client_metadata');
      expect(body.error_description).toContain(why);
      expect(await clientRows()).toBe(before);
    },
  );

  it('refuses a control character in a redirect URI with invalid_redirect_uri naming it', async () => {
    const before = await clientRows();
    const res = await registerClient(t.url, {
      ...PUBLIC_CLIENT,
      redirect_uris: [ATTACKER_REDIRECT, 'https://b.example/cb\u0000'],
    });
    const body = (await res.json()) as { error: string; error_description: string };
    expect(res.status).toBe(400);
    expect(body.error).toBe('invalid_redirect_uri');
    expect(body.error_description).toBe('redirect_uris[1] contains the control character U+0000');
    expect(await clientRows()).toBe(before);
  });

  it('accepts names in any script, with emoji (paired surrogates)', async () => {
    const res = await registerClient(t.url, {
      ...PUBLIC_CLIENT,
      client_name: 'Ассистент 助手 🤖',
      redirect_uris: [ATTACKER_REDIRECT],
    });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { client_name: string }).client_name).toBe('Ассистент 助手 🤖');
  });

  it('refuses a metadata document with a NUL in its client_name on the error page, and one with a lone surrogate in a redirect URI', async () => {
    const nul = `${docs.origin}/clients/nul.json`;
    docs.documents.set('/clients/nul.json', {
      client_id: nul,
      client_name: 'Doc\u0000Assistant',
      redirect_uris: [ATTACKER_REDIRECT],
      token_endpoint_auth_method: 'none',
    });
    const surrogate = `${docs.origin}/clients/surrogate.json`;
    docs.documents.set('/clients/surrogate.json', {
      client_id: surrogate,
      client_name: 'Surrogate',
      redirect_uris: [ATTACKER_REDIRECT, 'https://a.example/\ud800'],
      token_endpoint_auth_method: 'none',
    });
    const first = await fetch(authorizeUrl(t.url, request({ client_id: nul })), { redirect: 'manual' });
    const page = await expectErrorPage(first, 'invalid_client_metadata');
    expect(page).toContain('client_name contains the control character U+0000');
    const second = await fetch(authorizeUrl(t.url, request({ client_id: surrogate })), {
      redirect: 'manual',
    });
    const refused = await expectErrorPage(second, 'invalid_redirect_uri');
    expect(refused).toContain('redirect_uris[1] contains an unpaired surrogate');
  });

  it('refuses a metadata document URL with an encoded NUL in its path on the error page', async () => {
    const res = await fetch(authorizeUrl(t.url, request({ client_id: `${docs.origin}/clients/%00.json` })), {
      redirect: 'manual',
    });
    await expectErrorPage(res, 'invalid_client');
  });
});

describe('control characters in authorization and token parameters', () => {
  it.each([
    ['state', { state: 'st\u0000' }],
    ['scope', { scope: 'content:read\u0000' }],
    ['login_hint', { login_hint: 'dana\u0000@example.com' }],
    ['client_id', { client_id: 'client\u0000' }],
    ['redirect_uri', { redirect_uri: `${ATTACKER_REDIRECT}\u0000` }],
    ['code_challenge', { code_challenge: `${'a'.repeat(43)}\u0000` }],
    ['resource', { resource: 'https://x.example/mcp\u0000' }],
    ['ui_locales', { ui_locales: 'en\u001b' }],
    ['an unknown parameter', { whatever: '\u0000' }],
  ])(
    'a NUL (or other control character) in %s at /oauth/authorize: a 400 page, no redirect',
    async (name, changes) => {
      const res = await fetch(authorizeUrl(t.url, request(changes)), { redirect: 'manual' });
      const page = await expectErrorPage(res, 'invalid_request');
      if (name !== 'an unknown parameter')
        expect(page).toContain(`parameter ${name} contains the control character`);
    },
  );

  it('a NUL in a parameter name at /oauth/authorize: a 400 page, no redirect', async () => {
    const url = authorizeUrl(t.url, request());
    url.search += '&sta%00te=x';
    await expectErrorPage(await fetch(url, { redirect: 'manual' }), 'invalid_request');
  });

  it.each([
    ['code', { grant_type: 'authorization_code', code: 'c\u0000', code_verifier: 'v'.repeat(43) }, 400],
    [
      'code_verifier',
      { grant_type: 'authorization_code', code: 'c', code_verifier: `${'v'.repeat(43)}\u0000` },
      400,
    ],
    [
      'redirect_uri',
      { grant_type: 'authorization_code', code: 'c', redirect_uri: `${ATTACKER_REDIRECT}\u0000` },
      400,
    ],
    ['refresh_token', { grant_type: 'refresh_token', refresh_token: 'r\u0000' }, 400],
    ['scope', { grant_type: 'refresh_token', refresh_token: 'r', scope: 'content:read\u0000' }, 400],
    ['resource', { grant_type: 'refresh_token', refresh_token: 'r', resource: 'https://x\u0000' }, 400],
    ['grant_type', { grant_type: 'refresh\u0000token' }, 400],
    ['client_id', { grant_type: 'refresh_token', refresh_token: 'r', client_id: 'c\u0000' }, 401],
    [
      'client_id (a URL)',
      { grant_type: 'refresh_token', refresh_token: 'r', client_id: 'https://a.example/\u0000' },
      401,
    ],
  ])('a NUL in %s at /oauth/token: a JSON error, never a 500', async (_name, form, status) => {
    const res = await tokenRequest(t.url, { client_id: clientId, ...form });
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(res.body.error).toMatch(/^invalid_|^unsupported_grant_type$/);
  });

  it('a NUL in the token at /oauth/revoke: answered as RFC 7009 asks', async () => {
    const res = await fetch(`${t.url}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: 't\u0000', client_id: clientId }).toString(),
    });
    expect(res.status).toBe(200);
  });

  it('a NUL in a query parameter of another endpoint: a JSON invalid_request', async () => {
    const res = await fetch(`${t.url}/oauth/jwks?x=%00`);
    expect(res.status).toBe(400);
    expect(res.headers.get('x-request-id')).toMatch(/\S/);
    expect(await res.json()).toEqual({
      error: 'invalid_request',
      error_description: 'parameter x contains the control character U+0000',
    });
  });
});

describe('addresses under /oauth that no endpoint takes', () => {
  it('answers them 404 problem+json, as every other address of the service, with the request id', async () => {
    for (const [method, path] of [
      ['GET', '/oauth/nothing-here'],
      ['GET', '/oauth/token'],
      ['DELETE', '/oauth/register'],
      ['POST', '/oauth/jwks'],
    ] as const) {
      const res = await fetch(`${t.url}${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
      expect(await res.json()).toEqual({
        type: 'https://content-service.dev/problems/not-found',
        title: 'Not found',
        status: 404,
        detail: `No route ${method} ${path}`,
        instance: path,
        code: 'not_found',
        request_id: res.headers.get('x-request-id'),
      });
    }
    // Its endpoints still answer their own way.
    expect((await fetch(`${t.url}/oauth/jwks`)).status).toBe(200);
  });
});

describe('its own failures', () => {
  it('a 500 of the authorization server leaks no internals and carries X-Request-Id, as a page and as JSON', async () => {
    await sql`alter table oauth_models rename to oauth_models_away`.execute(t.runtime.db);
    try {
      const page = await fetch(authorizeUrl(t.url, request()), { redirect: 'manual' });
      const html = await page.text();
      expect(page.status).toBe(500);
      expect(page.headers.get('location')).toBeNull();
      expect(page.headers.get('x-request-id')).toMatch(/\S/);
      expect(html).toContain('<code>server_error</code>');
      const registration = await registerClient(t.url, {
        ...PUBLIC_CLIENT,
        redirect_uris: [ATTACKER_REDIRECT],
      });
      const json = await registration.text();
      expect(registration.status).toBe(500);
      expect(registration.headers.get('x-request-id')).toMatch(/\S/);
      expect(JSON.parse(json)).toEqual({
        error: 'server_error',
        error_description: 'oops! something went wrong',
      });
      for (const body of [html, json]) {
        expect(body).not.toMatch(/oauth_models|relation|select|insert|\.ts:\d+|\.js:\d+|\n\s+at /i);
      }
    } finally {
      await sql`alter table oauth_models_away rename to oauth_models`.execute(t.runtime.db);
    }
  });
});
