import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import type { Config } from '../../infra/config.ts';
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
    config?: Partial<Pick<Config, 'MEDIA_FETCH_CA_FILE' | 'OUTBOUND_ALLOW_NETWORKS'>>;
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

function hiddenField(page: string, name: string): string {
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

/** The client metadata documents' host: 127.0.0.2, trusted through MEDIA_FETCH_CA_FILE and OUTBOUND_ALLOW_NETWORKS. */
const DOC_HOST = '127.0.0.2';

export type DocumentServer = {
  /** `https://127.0.0.2:<port>` */
  origin: string;
  /** Path -> JSON document (a missing path is a 404). */
  documents: Map<string, unknown>;
  /** Response headers per path, besides content-type. */
  headers: Map<string, Record<string, string>>;
  /** Every path requested, in order. */
  hits: string[];
  /** The config that makes the app trust this server (its CA file, its address). */
  config: { MEDIA_FETCH_CA_FILE: string; OUTBOUND_ALLOW_NETWORKS: string[] };
  close(): Promise<void>;
};

/** A local HTTPS server of client ID metadata documents, with a self-signed certificate for 127.0.0.2. */
export async function startDocumentServer(): Promise<DocumentServer> {
  const dir = await mkdtemp(join(tmpdir(), 'cs-oauth-'));
  execFileSync(
    'openssl',
    [
      ...[
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
      ],
      ...['-subj', '/CN=client-docs.test', '-addext', `subjectAltName=IP:${DOC_HOST}`],
      ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')],
    ],
    { stdio: 'ignore' },
  );
  const documents = new Map<string, unknown>();
  const headers = new Map<string, Record<string, string>>();
  const hits: string[] = [];
  const server = createHttpsServer(
    { key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) },
    (req, res) => {
      const path = req.url ?? '';
      hits.push(path);
      const doc = documents.get(path);
      if (doc === undefined) return res.writeHead(404).end();
      res
        .writeHead(200, { 'content-type': 'application/json', ...headers.get(path) })
        .end(JSON.stringify(doc));
    },
  );
  await new Promise<void>((resolve) => server.listen(0, DOC_HOST, resolve));
  return {
    origin: `https://${DOC_HOST}:${(server.address() as AddressInfo).port}`,
    documents,
    headers,
    hits,
    config: { MEDIA_FETCH_CA_FILE: join(dir, 'cert.pem'), OUTBOUND_ALLOW_NETWORKS: [`${DOC_HOST}/32`] },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The URL of an authorization request with these parameters (undefined ones left out). */
export function authorizeUrl(base: string, params: Record<string, string | undefined>): URL {
  const url = new URL('/oauth/authorize', base);
  const defined = Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined);
  url.search = new URLSearchParams(defined).toString();
  return url;
}

export type Person = { accountId: string; email: string; password: string; name: string };

/**
 * Drives an authorization without a browser: the authorization request, sign-in (unless the jar is
 * signed in already), the consent page (returned for checks), then Allow or Deny; resolves with where
 * the authorization server sent the browser back to (the client's redirect URI, with code or error),
 * and the consent page's address (`/oauth/interaction/<uid>`).
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
}): Promise<{ back: URL; verifier: string; consentPage: string; state: string; interaction: string }> {
  const b = opts.jar ?? browserless(opts.base);
  const { verifier, challenge } = pkce();
  const state = randomBytes(8).toString('hex');
  const auth = new URL('/oauth/authorize', opts.base);
  const params: Record<string, string> = {
    response_type: 'code',
    client_id: opts.clientId,
    redirect_uri: opts.redirectUri,
    scope: opts.scope ?? 'content:read content:write',
    state,
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
  return { back: new URL(done.url), verifier, consentPage, state, interaction: step.url };
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
