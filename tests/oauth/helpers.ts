import { createHash, randomBytes } from 'node:crypto';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../apps/server/app.ts';
import type { Config } from '../../infra/config.ts';
import type { Runtime } from '../../infra/runtime.ts';
import type { Backend } from '../support/db.ts';
import { createTestRuntime } from '../support/runtime.ts';

/*
 * Helpers of the OAuth and web-page tests: an in-process app on a real port (PUBLIC_URL is its own
 * address, so oidc-provider's URLs are reachable), a cookie jar for driving the pages without a browser,
 * PKCE, and a local redirect target that records what the authorization server sends back.
 */

export async function freePort(): Promise<number> {
  const server = createHttpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export type TestApp = {
  app: FastifyInstance;
  runtime: Runtime;
  url: string;
  close(): Promise<void>;
};

/** buildApp on a fresh PostgreSQL database, listening on 127.0.0.1, with PUBLIC_URL = its address. */
export async function startTestApp(
  opts: {
    logs?: string[];
    config?: Partial<Pick<Config, 'MEDIA_FETCH_CA_FILE' | 'MEDIA_FETCH_ALLOW_NETWORKS'>>;
    /** PostgreSQL by default; `pglite` for the embedded database. */
    backend?: Backend;
  } = {},
): Promise<TestApp> {
  const test = await createTestRuntime(opts.backend ?? 'postgres');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const logs = opts.logs;
  const app = await buildApp({
    runtime: test.runtime,
    config: { PUBLIC_URL: url, LOG_LEVEL: 'info', MEDIA_DIR: '/tmp/cs-oauth-test-media', ...opts.config },
    logger: logs ? { level: 'info', stream: { write: (line: string) => void logs.push(line) } } : false,
  });
  await app.listen({ host: '127.0.0.1', port });
  return {
    app,
    runtime: test.runtime,
    url,
    async close() {
      await app.close();
      await test.drop();
    },
  };
}

export async function createPerson(
  runtime: Runtime,
  name = 'Dana Plumber',
): Promise<{ accountId: string; email: string; password: string; name: string }> {
  const email = `dana.${randomBytes(4).toString('hex')}@example.com`;
  const password = `pw-${randomBytes(8).toString('hex')}`;
  const { accountId } = await runtime.commands.openAccount({ name, email, password });
  return { accountId, email, password, name };
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** A cookie jar over fetch, redirects by hand: enough to drive the pages like a browser without scripts. */
export function browserless(base: string) {
  const jar = new Map<string, string>();
  function store(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (/max-age=0/i.test(line) || value === '') jar.delete(name);
      else jar.set(name, value);
    }
  }
  async function request(
    method: string,
    url: string,
    form?: Record<string, string>,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    const target = new URL(url, base);
    const cookie = [...jar.entries()].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(target, {
      method,
      redirect: 'manual',
      headers: {
        ...(cookie && target.origin === new URL(base).origin ? { cookie } : {}),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...headers,
      },
      ...(form ? { body: new URLSearchParams(form).toString() } : {}),
    });
    if (target.origin === new URL(base).origin) store(res);
    return res;
  }
  /** Follows redirects within the app; stops at a page (200/4xx) or a redirect that leaves the app. */
  async function follow(res: Response): Promise<{ res: Response; url: string }> {
    let current = res;
    let url = current.url;
    while (current.status >= 300 && current.status < 400) {
      const location = current.headers.get('location') ?? '';
      const next = new URL(location, url);
      if (next.origin !== new URL(base).origin) return { res: current, url: next.href };
      url = next.href;
      current = await request('GET', url);
    }
    return { res: current, url };
  }
  return { jar, request, follow };
}

export function hiddenField(page: string, name: string): string {
  const match = new RegExp(`name="${name}" value="([^"]*)"`).exec(page);
  if (!match?.[1]) throw new Error(`no field ${name} in page`);
  return match[1];
}

/** Registers a public client (as MCP clients do) and returns its client_id. */
export async function registerClient(base: string, metadata: Record<string, unknown>): Promise<Response> {
  return fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(metadata),
  });
}

export const PUBLIC_CLIENT = {
  client_name: 'Test Assistant',
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
};

/** A local redirect target that records every request it gets. */
export async function startCallback(): Promise<{
  url: string;
  hits: URL[];
  close(): Promise<void>;
  server: Server;
}> {
  const hits: URL[] = [];
  const server = createHttpServer((req, res) => {
    hits.push(new URL(req.url ?? '/', 'http://127.0.0.1'));
    res.writeHead(200, { 'content-type': 'text/html' }).end('<p>You can close this window.</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/callback`,
    hits,
    server,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type Person = { accountId: string; email: string; password: string; name: string };

/**
 * Drives an authorization without a browser: the authorization request, sign-in (unless the jar is
 * signed in already), the consent page (returned for checks), then Allow or Deny; resolves with where
 * the authorization server sent the browser back to (the client's redirect URI, with code or error).
 */
export async function authorizeWithoutBrowser(opts: {
  base: string;
  person: Person;
  clientId: string;
  redirectUri: string;
  scope?: string;
  resource?: string | null;
  decision?: 'allow' | 'deny';
  jar?: ReturnType<typeof browserless>;
}): Promise<{ back: URL; verifier: string; consentPage: string }> {
  const b = opts.jar ?? browserless(opts.base);
  const { verifier, challenge } = pkce();
  const auth = new URL('/oauth/authorize', opts.base);
  const params: Record<string, string> = {
    response_type: 'code',
    client_id: opts.clientId,
    redirect_uri: opts.redirectUri,
    scope: opts.scope ?? 'content:read content:write',
    state: randomBytes(8).toString('hex'),
    code_challenge: challenge,
    code_challenge_method: 'S256',
  };
  if (opts.resource !== null) params.resource = opts.resource ?? `${opts.base}/mcp`;
  auth.search = new URLSearchParams(params).toString();
  let step = await b.follow(await b.request('GET', auth.href));
  if (new URL(step.url).pathname === '/sign-in') {
    const page = await step.res.text();
    step = await b.follow(
      await b.request('POST', '/sign-in', {
        csrf: hiddenField(page, 'csrf'),
        email: opts.person.email,
        password: opts.person.password,
        return_to: hiddenField(page, 'return_to'),
      }),
    );
  }
  if (!new URL(step.url).pathname.startsWith('/oauth/interaction/')) {
    throw new Error(
      `expected the consent page, got ${step.url} (${step.res.status}): ${await step.res.text()}`,
    );
  }
  const consentPage = await step.res.text();
  const done = await b.follow(
    await b.request('POST', step.url, {
      csrf: hiddenField(consentPage, 'csrf'),
      decision: opts.decision ?? 'allow',
    }),
  );
  return { back: new URL(done.url), verifier, consentPage };
}

export async function tokenRequest(
  base: string,
  form: Record<string, string>,
): Promise<{ status: number; body: Record<string, string> }> {
  const res = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}
