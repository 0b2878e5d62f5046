import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

/** A browser without scripts over `app.inject`: a cookie jar, page loads and form posts. */
export type InjectBrowser = {
  cookies: Map<string, string>;
  get(url: string): Promise<LightMyRequestResponse>;
  post(
    url: string,
    form: Record<string, string>,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
};

/**
 * A browser on `app`: keeps the cookies it is given (and drops those cleared), sends them back;
 * forms go urlencoded with `headers` (an `origin`, say) and the post's own. From `remoteAddress` when given.
 */
export function injectBrowser(
  app: FastifyInstance,
  opts: { remoteAddress?: string; headers?: Record<string, string> } = {},
): InjectBrowser {
  const cookies = new Map<string, string>();
  const keep = (res: LightMyRequestResponse): LightMyRequestResponse => {
    for (const c of res.cookies) {
      if (c.maxAge === 0 || c.value === '') cookies.delete(c.name);
      else cookies.set(c.name, c.value);
    }
    return res;
  };
  const cookieHeader = (): Record<string, string> =>
    cookies.size > 0 ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {};
  const from = opts.remoteAddress === undefined ? {} : { remoteAddress: opts.remoteAddress };
  return {
    cookies,
    async get(url) {
      return keep(await app.inject({ method: 'GET', url, ...from, headers: cookieHeader() }));
    },
    async post(url, form, headers = {}) {
      return keep(
        await app.inject({
          method: 'POST',
          url,
          ...from,
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            ...opts.headers,
            ...cookieHeader(),
            ...headers,
          },
          payload: new URLSearchParams(form).toString(),
        }),
      );
    },
  };
}

/** The CSRF token of a page's form. */
export function csrfOf(page: string): string {
  return /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? '';
}

/** Signs `b` in through the sign-in form; the answer must be the 303 of a signed-in person. */
export async function signInWith(b: InjectBrowser, who: { email: string; password: string }): Promise<void> {
  const form = await b.get('/sign-in');
  const res = await b.post('/sign-in', { csrf: csrfOf(form.body), email: who.email, password: who.password });
  if (res.statusCode !== 303) throw new Error(`signing in answered ${res.statusCode}`);
}
