import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { EMAIL_POLICY } from '../../apps/server/web/throttle.ts';
import { authorizeUrl, createPerson, type Person, PUBLIC_CLIENT, pkce } from '../oauth/helpers.ts';
import { csrfOf, type InjectBrowser, injectBrowser } from '../support/inject-browser.ts';
import { createTestRuntime } from '../support/runtime.ts';

/*
 * The sign-in and sign-out pages through `inject`: no account enumeration, slowing and locking after
 * failures (an email is only slowed; an email from one client, and a client address, are locked), no
 * race past the throttle, the device cookie, CSRF (token and origin), the session cookie, `return_to`.
 *
 * The pages' clock stands still unless a test moves it (`advance`): waits end only when a test says so.
 */

const PUBLIC_URL = 'http://cs.example.test';

let app: FastifyInstance;
let runtime: Runtime;
let drop: () => Promise<void>;
let dana: Person;
let addressCounter = 0;
let clock = Date.now();
const advance = (ms: number): void => {
  clock += ms;
};

/** A fresh client address per test, so one test's failures never slow another's. */
function newAddress(): string {
  addressCounter += 1;
  return `198.51.100.${addressCounter}`;
}

type Browser = InjectBrowser;
const browser = (address: string): Browser => injectBrowser(app, { remoteAddress: address });

async function trySignIn(b: Browser, email: string, password: string): Promise<LightMyRequestResponse> {
  const form = await b.get('/sign-in');
  return b.post('/sign-in', { csrf: csrfOf(form.body), email, password });
}

function errorOf(page: string): string {
  return /<p class="error" role="alert">([^<]*)<\/p>/.exec(page)?.[1] ?? '';
}

beforeAll(async () => {
  const test = await createTestRuntime('postgres');
  runtime = test.runtime;
  drop = test.drop;
  app = await buildApp({
    runtime,
    config: { PUBLIC_URL, LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-web-test' },
    logger: false,
    webNow: () => new Date(clock),
  });
  dana = await createPerson(runtime);
});

afterAll(async () => {
  await app?.close();
  await drop?.();
});

describe('sign-in', () => {
  it('shows a form that works without JavaScript, with a CSRF field and a pre-sign-in cookie', async () => {
    const b = browser(newAddress());
    const res = await b.get('/sign-in?return_to=/oauth/interaction/abc');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.body).toContain('<form method="post" action="/sign-in">');
    expect(res.body).not.toContain('<script');
    expect(res.body).toContain('name="return_to" value="/oauth/interaction/abc"');
    expect(csrfOf(res.body)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const cookie = res.cookies.find((c) => c.name === 'cs_csrf');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
  });

  it('signs in: a session cookie (HttpOnly, SameSite=Lax, Path=/), then back to return_to', async () => {
    const b = browser(newAddress());
    const form = await b.get('/sign-in?return_to=/sign-in%3Fdone%3D1');
    const res = await b.post('/sign-in', {
      csrf: csrfOf(form.body),
      email: dana.email.toUpperCase(),
      password: dana.password,
      return_to: '/sign-in?done=1',
    });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/sign-in?done=1');
    const session = res.cookies.find((c) => c.name === 'cs_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
    expect(session?.secure).toBeFalsy();
    expect(session?.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Only a hash is stored.
    const rows = await runtime.db.selectFrom('web_sessions').select('id_hash').execute();
    expect(rows.map((r) => r.id_hash)).not.toContain(session?.value);
    // Signed in, the sign-in page sends the person on: to their sites, or where they were going.
    const again = await b.get('/sign-in');
    expect(again.statusCode).toBe(303);
    expect(again.headers.location).toBe('/sites');
    expect((await b.get('/sign-in?return_to=/connect')).headers.location).toBe('/connect');
  });

  it('never sends people elsewhere after signing in (no open redirect)', async () => {
    const b = browser(newAddress());
    const form = await b.get('/sign-in');
    const res = await b.post('/sign-in', {
      csrf: csrfOf(form.body),
      email: dana.email,
      password: dana.password,
      return_to: '//evil.example/',
    });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/sites');
  });

  it('answers a wrong password and an unknown email the same way', async () => {
    const wrong = await trySignIn(browser(newAddress()), dana.email, 'not-the-password');
    const unknown = await trySignIn(browser(newAddress()), 'nobody.here@example.com', 'not-the-password');
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(wrong.statusCode);
    expect(errorOf(wrong.body)).toBe(
      'That email and password do not match an account. Check them and try again.',
    );
    const normalise = (r: LightMyRequestResponse, email: string): string =>
      r.body.replace(email, 'EMAIL').replace(/name="csrf" value="[^"]+"/, 'CSRF');
    expect(normalise(unknown, 'nobody.here@example.com')).toBe(normalise(wrong, dana.email));
    expect(Object.keys(unknown.headers).sort()).toEqual(Object.keys(wrong.headers).sort());
  });

  it('slows an email after repeated failures from anywhere, whatever the password, but never locks it', async () => {
    const person = await createPerson(runtime, 'Slow Test');
    const statuses: number[] = [];
    const errors: string[] = [];
    for (let i = 0; i < 10; i++) {
      // Each attempt from another address: this is the email's count, not an address's.
      const res = await trySignIn(browser(newAddress()), person.email, `wrong-${i}`);
      statuses.push(res.statusCode);
      errors.push(errorOf(res.body));
    }
    expect(statuses.slice(0, 3)).toEqual([401, 401, 401]);
    expect(statuses.slice(3)).toEqual(Array(7).fill(429));
    expect(errors[3]).toMatch(/^Too many failed attempts\. Wait \d+ seconds?, then try again\.$/);
    const early = await trySignIn(browser(newAddress()), person.email, person.password);
    expect(early.statusCode).toBe(429);
    expect(errorOf(early.body)).toBe('Too many failed attempts. Wait 1 second, then try again.');
    expect(early.headers['retry-after']).toBe('1');
    // An unknown email is slowed the same way (nothing to learn from the wait).
    for (let i = 0; i < 10; i++) await trySignIn(browser(newAddress()), 'ghost@example.com', `wrong-${i}`);
    const ghost = await trySignIn(browser(newAddress()), 'ghost@example.com', 'anything');
    expect(errorOf(ghost.body)).toBe(errorOf(early.body));
    // The refused attempts did not count: the wait is still the one after the third failure.
    advance(1_000);
    expect((await trySignIn(browser(newAddress()), person.email, person.password)).statusCode).toBe(303);
  });

  it('locks an email from the address that failed, not from elsewhere', async () => {
    const person = await createPerson(runtime, 'Lockout Test');
    const a = newAddress();
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      advance(31_000); // past any wait: every attempt is checked until the lock
      statuses.push((await trySignIn(browser(a), person.email, `wrong-${i}`)).statusCode);
    }
    expect(statuses).toEqual([...Array(10).fill(401), 429]);
    const fromA = await trySignIn(browser(a), person.email, person.password);
    expect(fromA.statusCode).toBe(429);
    expect(errorOf(fromA.body)).toMatch(/is paused for 15 minutes/);
    expect(Number(fromA.headers['retry-after'])).toBeGreaterThan(800);
    // From another address, the right password signs in after at most the email's longest wait.
    advance(30_000);
    const fromB = await trySignIn(browser(newAddress()), person.email, person.password);
    expect(fromB.statusCode).toBe(303);
    // Address A stays locked: a success elsewhere does not lift another client's lock.
    expect((await trySignIn(browser(a), person.email, person.password)).statusCode).toBe(429);
  });

  it('lets the person in on a known browser at once, whatever others try on the email', async () => {
    const person = await createPerson(runtime, 'Known Device');
    const home = newAddress();
    const mine = browser(home);
    expect((await trySignIn(mine, person.email, person.password)).statusCode).toBe(303);
    const device = mine.cookies.get('cs_device') ?? '';
    expect(device).toMatch(/^[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/);
    expect(
      (await mine.post('/sign-out', { csrf: csrfOf((await mine.get('/account/password')).body) })).statusCode,
    ).toBe(303);
    expect(mine.cookies.get('cs_device')).toBe(device);
    // An attacker hammers the email from the person's own network (locking it there)...
    const shared = browser(home);
    for (let i = 0; i < 12; i++) {
      advance(31_000);
      await trySignIn(shared, person.email, `guess-${i}`);
    }
    expect((await trySignIn(shared, person.email, person.password)).statusCode).toBe(429);
    // ...and from many addresses (keeping the email slowed).
    for (let i = 0; i < 12; i++) await trySignIn(browser(newAddress()), person.email, `guess-${i}`);
    expect((await trySignIn(browser(newAddress()), person.email, person.password)).statusCode).toBe(429);
    const back = await trySignIn(mine, person.email, person.password);
    expect(back.statusCode).toBe(303);
    // The cookie is bound to the email: for another email it is an unknown browser like any other.
    const other = browser(newAddress());
    other.cookies.set('cs_device', device);
    for (let i = 0; i < 3; i++) await trySignIn(other, 'someone.else@example.com', 'wrong');
    expect((await trySignIn(other, 'someone.else@example.com', 'wrong')).statusCode).toBe(429);
    // A forged cookie is an unknown browser too.
    const forged = browser(newAddress());
    forged.cookies.set('cs_device', `${device.slice(0, 23)}${'A'.repeat(43)}`);
    expect((await trySignIn(forged, person.email, person.password)).statusCode).toBe(429);
  });

  it('verifies no more passwords for concurrent attempts than for sequential ones', async () => {
    const person = await createPerson(runtime, 'Race Test');
    const b = browser(newAddress());
    const csrf = csrfOf((await b.get('/sign-in')).body);
    const passwords = [...Array.from({ length: 29 }, (_, i) => `wrong-${i}`), person.password];
    const responses = await Promise.all(
      passwords.map((password) => b.post('/sign-in', { csrf, email: person.email, password })),
    );
    const statuses = responses.map((r) => r.statusCode);
    // 401 or 303: a password was verified; 429: refused unchecked.
    const verified = statuses.filter((s) => s === 401 || s === 303).length;
    expect(verified).toBeLessThanOrEqual(EMAIL_POLICY.freeFailures);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30 - verified);
  });

  it('locks a client address after many failures across emails', async () => {
    const address = newAddress();
    let last: LightMyRequestResponse | undefined;
    for (let i = 0; i < 100; i++) last = await trySignIn(browser(address), `someone${i}@example.com`, 'nope');
    expect(last?.statusCode).toBe(429);
    const person = await createPerson(runtime, 'Shared Network');
    const locked = await trySignIn(browser(address), person.email, person.password);
    expect(locked.statusCode).toBe(429);
    expect(errorOf(locked.body)).toMatch(/paused/);
    const elsewhere = await trySignIn(browser(newAddress()), person.email, person.password);
    expect(elsewhere.statusCode).toBe(303);
  });

  it("forgets an email's failures after a success", async () => {
    const person = await createPerson(runtime, 'Forgetful');
    for (let i = 0; i < 2; i++) await trySignIn(browser(newAddress()), person.email, 'wrong');
    expect((await trySignIn(browser(newAddress()), person.email, person.password)).statusCode).toBe(303);
    for (let i = 0; i < 3; i++) {
      expect((await trySignIn(browser(newAddress()), person.email, 'wrong')).statusCode).toBe(401);
    }
  });
});

describe('return_to and odd input', () => {
  const japanese = '/connect?x=日本';
  const encoded = '/connect?x=%E6%97%A5%E6%9C%AC';

  it('keeps a return_to outside Latin-1 percent-encoded: the form, then the redirect after signing in', async () => {
    const b = browser(newAddress());
    const form = await b.get(`/sign-in?return_to=${encodeURIComponent(japanese)}`);
    expect(form.statusCode).toBe(200);
    expect(form.body).toContain(`name="return_to" value="${encoded}"`);
    const res = await b.post('/sign-in', {
      csrf: csrfOf(form.body),
      email: dana.email,
      password: dana.password,
      return_to: japanese,
    });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(encoded);
    // Signed in, GET /sign-in with it redirects there at once.
    const again = await b.get(`/sign-in?return_to=${encodeURIComponent(japanese)}`);
    expect(again.statusCode).toBe(303);
    expect(again.headers.location).toBe(encoded);
  });

  it('drops a return_to with control characters', async () => {
    const b = browser(newAddress());
    for (const bad of ['/connect\u0000x', '/connect?x=\r\nset-cookie: a=b', '/connect?x=\u0085']) {
      const form = await b.get(`/sign-in?return_to=${encodeURIComponent(bad)}`);
      expect(form.statusCode).toBe(200);
      expect(form.body).not.toContain('name="return_to"');
    }
    for (const raw of ['/connect%00x', '/connect%ff%fe']) {
      expect((await b.get(`/sign-in?return_to=${raw}`)).statusCode).toBe(200);
    }
    const form = await b.get('/sign-in');
    const res = await b.post('/sign-in', {
      csrf: csrfOf(form.body),
      email: dana.email,
      password: dana.password,
      return_to: '/connect\u0000?x=日本',
    });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/sites');
  });

  it('answers an email with a NUL or other control character with the page, not a 500', async () => {
    const b = browser(newAddress());
    for (const email of ['dana\u0000@example.com', 'a\u0007b@example.com']) {
      const form = await b.get('/sign-in');
      const res = await b.post('/sign-in', { csrf: csrfOf(form.body), email, password: 'whatever' });
      expect(res.statusCode).toBe(400);
      expect(errorOf(res.body)).toBe('That is not an email address. Check it and try again.');
    }
  });
});

describe('change password', () => {
  it('asks who you are first', async () => {
    const res = await browser(newAddress()).get('/account/password');
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/sign-in?return_to=%2Faccount%2Fpassword');
  });

  it('changes the password: the current one checked, the new one twice, other browsers signed out', async () => {
    const person = await createPerson(runtime, 'Changing Pat');
    const here = browser(newAddress());
    const there = browser(newAddress());
    expect((await trySignIn(here, person.email, person.password)).statusCode).toBe(303);
    expect((await trySignIn(there, person.email, person.password)).statusCode).toBe(303);

    const form = await here.get('/account/password');
    expect(form.statusCode).toBe(200);
    expect(form.headers['cache-control']).toBe('no-store');
    expect(form.body).toContain('<form method="post" action="/account/password">');
    expect(form.body).toContain('<a href="/account/password">Change password</a>');
    const csrf = csrfOf(form.body);
    const change = (fields: Record<string, string>): Promise<LightMyRequestResponse> =>
      here.post('/account/password', { csrf, ...fields });
    const next = 'a brand new password';

    expect(
      (await here.post('/account/password', { current: person.password, password: next, repeat: next }))
        .statusCode,
    ).toBe(403);
    const wrong = await change({ current: 'not my password', password: next, repeat: next });
    expect(wrong.statusCode).toBe(401);
    expect(errorOf(wrong.body)).toBe('That is not your current password.');
    const short = await change({ current: person.password, password: 'short', repeat: 'short' });
    expect(short.statusCode).toBe(400);
    expect(errorOf(short.body)).toBe('The new password must be at least 12 characters long.');
    const differ = await change({ current: person.password, password: next, repeat: `${next}!` });
    expect(differ.statusCode).toBe(400);
    expect(errorOf(differ.body)).toBe('The two new passwords are not the same.');
    // Nothing of the refused attempts was applied: the old password still signs in.
    expect((await trySignIn(browser(newAddress()), person.email, person.password)).statusCode).toBe(303);

    const done = await change({ current: person.password, password: next, repeat: next });
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/account/password?changed=1');
    const after = await here.get('/account/password?changed=1');
    expect(after.statusCode).toBe(200);
    expect(after.body).toContain('Your password was changed.');
    expect((await there.get('/sign-in')).body).toContain('<h1>Sign in</h1>');
    expect((await trySignIn(browser(newAddress()), person.email, person.password)).statusCode).toBe(401);
    expect((await trySignIn(browser(newAddress()), person.email, next)).statusCode).toBe(303);

    const account = await runtime.db
      .selectFrom('accounts')
      .select('id')
      .where('email', '=', person.email)
      .executeTakeFirstOrThrow();
    const events = await runtime.store.readStream(`account-${account.id}`);
    expect(events.at(-1)).toMatchObject({
      type: 'PasswordChanged',
      data: { holder: 'account', holderId: account.id, by: 'holder' },
    });
    expect(JSON.stringify(events.map((e) => e.data))).not.toContain('$argon2');
  });

  it('gives the browser that changed the password a new session: the old cookie value signs nobody in', async () => {
    const person = await createPerson(runtime, 'Rotating Rita');
    const here = browser(newAddress());
    expect((await trySignIn(here, person.email, person.password)).statusCode).toBe(303);
    const before = here.cookies.get('cs_session') ?? '';
    expect(before).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const next = 'a rotated new password';
    const csrf = csrfOf((await here.get('/account/password')).body);
    const done = await here.post('/account/password', {
      csrf,
      current: person.password,
      password: next,
      repeat: next,
    });
    expect(done.statusCode).toBe(303);
    const issued = done.cookies.find((c) => c.name === 'cs_session');
    expect(issued).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
    const after = here.cookies.get('cs_session') ?? '';
    expect(after).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(after).not.toBe(before);
    // The new value is signed in (the page after the change), the old one is not.
    const page = await here.get('/account/password?changed=1');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('Your password was changed.');
    const stale = await app.inject({
      method: 'GET',
      url: '/account/password',
      headers: { cookie: `cs_session=${before}` },
    });
    expect(stale.statusCode).toBe(303);
    expect(stale.headers.location).toBe('/sign-in?return_to=%2Faccount%2Fpassword');
    const sessions = await runtime.db
      .selectFrom('web_sessions')
      .select('id_hash')
      .where('account_id', '=', person.accountId)
      .execute();
    expect(sessions).toHaveLength(1);
  });

  it('pauses after many wrong current passwords', async () => {
    const person = await createPerson(runtime, 'Guessing Gus');
    const b = browser(newAddress());
    expect((await trySignIn(b, person.email, person.password)).statusCode).toBe(303);
    const csrf = csrfOf((await b.get('/account/password')).body);
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      advance(31_000);
      const res = await b.post('/account/password', {
        csrf,
        current: `guess-${i}`,
        password: 'a brand new password',
        repeat: 'a brand new password',
      });
      statuses.push(res.statusCode);
    }
    expect(statuses).toEqual([...Array(10).fill(401), 429]);
  });
});

describe('CSRF', () => {
  it('refuses a sign-in POST without the token, with a wrong one, or without the pre-sign-in cookie', async () => {
    const b = browser(newAddress());
    const form = await b.get('/sign-in');
    const csrf = csrfOf(form.body);
    const none = await b.post('/sign-in', { email: dana.email, password: dana.password });
    expect(none.statusCode).toBe(403);
    expect(none.body).toContain('This form has expired');
    const wrong = await b.post('/sign-in', {
      csrf: `${csrf.slice(0, -2)}xx`,
      email: dana.email,
      password: dana.password,
    });
    expect(wrong.statusCode).toBe(403);
    const other = browser(newAddress());
    const noCookie = await other.post('/sign-in', { csrf, email: dana.email, password: dana.password });
    expect(noCookie.statusCode).toBe(403);
    expect(none.cookies.find((c) => c.name === 'cs_session')).toBeUndefined();
  });

  it('refuses a POST from another site even with the right token', async () => {
    const b = browser(newAddress());
    const csrf = csrfOf((await b.get('/sign-in')).body);
    const form = { csrf, email: dana.email, password: dana.password };
    expect((await b.post('/sign-in', form, { origin: 'https://evil.example' })).statusCode).toBe(403);
    expect((await b.post('/sign-in', form, { origin: 'null' })).statusCode).toBe(403);
    expect((await b.post('/sign-in', form, { 'sec-fetch-site': 'cross-site' })).statusCode).toBe(403);
    expect((await b.post('/sign-in', form, { 'sec-fetch-site': 'same-site' })).statusCode).toBe(403);
    const ok = await b.post('/sign-in', form, { origin: PUBLIC_URL, 'sec-fetch-site': 'same-origin' });
    expect(ok.statusCode).toBe(303);
  });

  it('signs out only with the session token', async () => {
    const b = browser(newAddress());
    expect((await trySignIn(b, dana.email, dana.password)).statusCode).toBe(303);
    const page = await b.get('/account/password');
    const token = csrfOf(page.body);
    expect((await b.post('/sign-out', {})).statusCode).toBe(403);
    expect((await b.post('/sign-out', { csrf: 'forged' })).statusCode).toBe(403);
    expect((await b.get('/sign-in')).headers.location).toBe('/sites');
    const out = await b.post('/sign-out', { csrf: token });
    expect(out.statusCode).toBe(303);
    expect(out.headers.location).toBe('/sign-in');
    expect(b.cookies.has('cs_session')).toBe(false);
    expect((await b.get('/sign-in')).body).toContain('<h1>Sign in</h1>');
  });

  it('refuses a consent POST without the right token', async () => {
    const b = browser(newAddress());
    expect((await trySignIn(b, dana.email, dana.password)).statusCode).toBe(303);
    const res = await b.post('/oauth/interaction/some-interaction', { decision: 'allow', csrf: 'forged' });
    expect(res.statusCode).toBe(403);
    expect(res.body).toContain('This form has expired');
  });
});

describe('over https', () => {
  const HTTPS_URL = 'https://cs.example.test';
  const HSTS = 'max-age=31536000; includeSubDomains';
  let secure: FastifyInstance;

  beforeAll(async () => {
    secure = await buildApp({
      runtime,
      config: { PUBLIC_URL: HTTPS_URL, LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-web-test' },
      logger: false,
    });
  });
  afterAll(async () => {
    await secure?.close();
  });

  it('names the cookies __Host- (Secure, Path=/, no Domain) and signs in with them', async () => {
    const b = injectBrowser(secure, { remoteAddress: newAddress() });
    const form = await b.get('/sign-in');
    const csrfCookie = form.cookies.find((c) => c.name === '__Host-cs_csrf');
    expect(csrfCookie).toMatchObject({ secure: true, path: '/', httpOnly: true });
    expect(csrfCookie?.domain).toBeUndefined();
    expect(form.cookies.map((c) => c.name)).not.toContain('cs_csrf');
    const res = await b.post('/sign-in', {
      csrf: csrfOf(form.body),
      email: dana.email,
      password: dana.password,
    });
    expect(res.statusCode).toBe(303);
    for (const name of ['__Host-cs_session', '__Host-cs_device']) {
      const cookie = res.cookies.find((c) => c.name === name);
      expect(cookie, name).toMatchObject({ secure: true, path: '/', httpOnly: true });
      expect(cookie?.domain).toBeUndefined();
    }
    expect(res.cookies.map((c) => c.name)).not.toContain('cs_session');
    expect((await b.get('/sign-in')).headers.location).toBe('/sites');
    // The plain name is not read under https: a cookie set over http cannot stand in for it.
    const plain = await secure.inject({
      method: 'GET',
      url: '/sites',
      headers: { cookie: `cs_session=${b.cookies.get('__Host-cs_session') ?? ''}` },
    });
    expect(plain.statusCode).toBe(303);
    expect(plain.headers.location).toMatch(/^\/sign-in/);
  });

  it("names oidc-provider's cookies __Host- or __Secure- (theirs is the interaction's path); a connection is made with them", async () => {
    const redirectUri = 'http://127.0.0.1:8976/callback';
    const registered = await secure.inject({
      method: 'POST',
      url: '/oauth/register',
      headers: { 'content-type': 'application/json' },
      payload: { ...PUBLIC_CLIENT, redirect_uris: [redirectUri] },
    });
    expect(registered.statusCode).toBe(201);
    const clientId = (registered.json() as { client_id: string }).client_id;
    const { verifier, challenge } = pkce();
    const url = authorizeUrl(HTTPS_URL, {
      client_id: clientId,
      response_type: 'code',
      redirect_uri: redirectUri,
      scope: 'content:read',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 's',
    });
    // Signed in first, then the authorization: its redirects followed within the service.
    const b = injectBrowser(secure, { remoteAddress: newAddress() });
    const form = await b.get('/sign-in');
    await b.post('/sign-in', { csrf: csrfOf(form.body), email: dana.email, password: dana.password });
    const local = (location: unknown): string => {
      const to = new URL(String(location), HTTPS_URL);
      return to.origin === HTTPS_URL ? `${to.pathname}${to.search}` : to.href;
    };
    const authorize = await b.get(`${url.pathname}${url.search}`);
    expect(authorize.statusCode).toBe(303);
    expect(authorize.headers['strict-transport-security']).toBe(HSTS);
    const names = authorize.cookies.map((c) => c.name);
    expect(names).toEqual(
      expect.arrayContaining(['__Secure-cs_oauth_interaction', '__Secure-cs_oauth_resume']),
    );
    for (const cookie of authorize.cookies) {
      expect(cookie.name, cookie.name).toMatch(/^__(Host|Secure)-/);
      expect(cookie.secure, cookie.name).toBe(true);
      if (cookie.name.startsWith('__Host-')) expect(cookie.path).toBe('/');
    }
    /** Follows the redirects that stay within the service; stops at a page or one that leaves it. */
    const follow = async (
      res: LightMyRequestResponse,
    ): Promise<{ res: LightMyRequestResponse; at: string }> => {
      let at = '';
      let current = res;
      while (current.statusCode === 303 && local(current.headers.location).startsWith('/')) {
        at = local(current.headers.location);
        current = await b.get(at);
      }
      return { res: current, at };
    };
    // oidc-provider's login prompt (answered with the web session), then the consent page.
    const consent = await follow(authorize);
    expect(consent.at).toMatch(/^\/oauth\/interaction\//);
    expect(consent.res.statusCode).toBe(200);
    const answer = (
      await follow(await b.post(consent.at, { csrf: csrfOf(consent.res.body), decision: 'allow' }))
    ).res;
    const back = new URL(String(answer.headers.location));
    expect(`${back.origin}${back.pathname}`).toBe(redirectUri);
    const code = back.searchParams.get('code') ?? '';
    expect(code).not.toBe('');
    const token = await secure.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri,
        client_id: clientId,
        code_verifier: verifier,
      }).toString(),
    });
    expect(token.statusCode, token.body).toBe(200);
    expect(token.json()).toMatchObject({ token_type: 'Bearer', scope: 'content:read' });
  });

  it('sends Strict-Transport-Security on every answer: pages, the API, errors, OAuth, the docs', async () => {
    for (const url of [
      '/sign-in',
      '/api/v1/sites',
      '/healthz',
      '/no/such/page',
      '/.well-known/oauth-authorization-server',
      '/docs',
      '/api/v1/openapi.json',
      '/api/v1/articles/%ff%fe',
    ]) {
      const res = await secure.inject({ method: 'GET', url });
      expect(res.headers['strict-transport-security'], url).toBe(HSTS);
    }
  });

  it('sends no Strict-Transport-Security and keeps the plain cookie names under http', async () => {
    const res = await app.inject({ method: 'GET', url: '/sign-in' });
    expect(res.headers['strict-transport-security']).toBeUndefined();
    expect(res.cookies.map((c) => c.name)).toEqual(['cs_csrf']);
    const api = await app.inject({ method: 'GET', url: '/api/v1/sites' });
    expect(api.headers['strict-transport-security']).toBeUndefined();
  });
});

describe('the Connect Site page with odd input', () => {
  it('a key name with a control character is refused on the page, and no key is made', async () => {
    const b = browser(newAddress());
    expect((await trySignIn(b, dana.email, dana.password)).statusCode).toBe(303);
    const page = await b.get('/connect');
    const before = (
      await runtime.db.selectFrom('api_keys').select('id').where('account_id', '=', dana.accountId).execute()
    ).length;
    const res = await b.post('/connect/keys', {
      csrf: csrfOf(page.body),
      name: 'Reports\u0000',
      scope: 'read',
    });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res.body)).toContain('U+0000');
    const after = (
      await runtime.db.selectFrom('api_keys').select('id').where('account_id', '=', dana.accountId).execute()
    ).length;
    expect(after).toBe(before);
    const revoke = await b.post('/connect/keys/%00/revoke', { csrf: csrfOf(page.body) });
    expect(revoke.statusCode).toBe(400);
  });
});
