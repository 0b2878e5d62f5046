import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashOAuthId } from '../../apps/server/oauth/adapter.ts';
import {
  authorizeUrl,
  authorizeWithoutBrowser,
  createPerson,
  type DocumentServer,
  type Person,
  PUBLIC_CLIENT,
  pkce,
  registerClient,
  startCallback,
  startDocumentServer,
  startTestApp,
  type TestApp,
  tokenRequest,
} from './helpers.ts';

/*
 * The authorization server in-process, on a real port: metadata, registration rules, PKCE, resource
 * indicators, the code flow through the sign-in and consent pages (driven without a browser here; the
 * e2e test drives them in Chromium), refresh rotation, revocation, the token verifier /mcp uses,
 * disconnecting, and client ID metadata documents served by a local HTTPS server.
 */

let t: TestApp;
let callback: Awaited<ReturnType<typeof startCallback>>;
let docs: DocumentServer;
let docsOrigin: string;
let documents: Map<string, unknown>;
let dana: Person;
let lee: Person;

async function newClient(extra: Record<string, unknown> = {}): Promise<string> {
  const res = await registerClient(t.url, { ...PUBLIC_CLIENT, redirect_uris: [callback.url], ...extra });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

/** A connection: consent allowed, code exchanged with PKCE and `resource`. */
async function connect(
  person: Person,
  opts: { scope?: string; clientId?: string } = {},
): Promise<{ clientId: string; access: string; refresh: string; scope: string }> {
  const clientId = opts.clientId ?? (await newClient());
  const { back, verifier } = await authorizeWithoutBrowser({
    base: t.url,
    person,
    clientId,
    redirectUri: callback.url,
    ...(opts.scope ? { scope: opts.scope } : {}),
  });
  const code = back.searchParams.get('code');
  expect(code, back.href).toBeTruthy();
  const token = await tokenRequest(t.url, {
    grant_type: 'authorization_code',
    code: code ?? '',
    redirect_uri: callback.url,
    client_id: clientId,
    code_verifier: verifier,
    resource: `${t.url}/mcp`,
  });
  expect(token.status, JSON.stringify(token.body)).toBe(200);
  return {
    clientId,
    access: token.body.access_token ?? '',
    refresh: token.body.refresh_token ?? '',
    scope: token.body.scope ?? '',
  };
}

beforeAll(async () => {
  docs = await startDocumentServer();
  docsOrigin = docs.origin;
  documents = docs.documents;
  callback = await startCallback();
  t = await startTestApp({ config: docs.config });
  dana = await createPerson(t.runtime, 'Dana Plumber');
  lee = await createPerson(t.runtime, 'Lee Dentist');
});

afterAll(async () => {
  await t?.close();
  await callback?.close();
  await docs?.close();
});

describe('metadata', () => {
  it('publishes RFC 8414 metadata at the origin root, for the issuer PUBLIC_URL', async () => {
    const res = await fetch(`${t.url}/.well-known/oauth-authorization-server`);
    expect(res.status).toBe(200);
    const as = (await res.json()) as Record<string, unknown>;
    expect(as).toMatchObject({
      issuer: t.url,
      authorization_endpoint: `${t.url}/oauth/authorize`,
      token_endpoint: `${t.url}/oauth/token`,
      registration_endpoint: `${t.url}/oauth/register`,
      revocation_endpoint: `${t.url}/oauth/revoke`,
      code_challenge_methods_supported: ['S256'],
      response_types_supported: ['code'],
      client_id_metadata_document_supported: true,
    });
    expect(as.scopes_supported).toEqual(expect.arrayContaining(['content:read', 'content:write']));
    expect(as.grant_types_supported).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token']));
    expect(as.token_endpoint_auth_methods_supported).toContain('none');
    // The OpenID Connect twin some clients try first says the same.
    const oidc = (await (await fetch(`${t.url}/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
    expect(oidc.token_endpoint).toBe(as.token_endpoint);
  });

  it.each(['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource'])(
    'publishes RFC 9728 metadata at %s pointing at the authorization server',
    async (path) => {
      const res = await fetch(`${t.url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      const prm = (await res.json()) as { resource: string; authorization_servers: string[] };
      expect(prm).toEqual({
        resource: `${t.url}/mcp`,
        authorization_servers: [t.url],
        scopes_supported: ['content:read', 'content:write'],
        bearer_methods_supported: ['header'],
        resource_name: 'Content Service',
      });
      // Follow it as a client does: the authorization server's metadata names the same issuer.
      const server = prm.authorization_servers[0] ?? '';
      const as = (await (await fetch(`${server}/.well-known/oauth-authorization-server`)).json()) as {
        issuer: string;
      };
      expect(as.issuer).toBe(server);
    },
  );

  it('names the path-aware document as the resource metadata URL for WWW-Authenticate', () => {
    expect(t.app.oauth.resourceMetadataUrl).toBe(`${t.url}/.well-known/oauth-protected-resource/mcp`);
    expect(t.app.oauth.mcpResource).toBe(`${t.url}/mcp`);
  });
});

describe('dynamic client registration', () => {
  it.each([
    [
      'native, http://localhost:<port>/callback',
      { application_type: 'native', redirect_uris: ['http://localhost:43117/callback'] },
      'native',
    ],
    [
      'no type, http://127.0.0.1:<port>/callback',
      { redirect_uris: ['http://127.0.0.1:43117/callback'] },
      'native',
    ],
    ['no type, https callback', { redirect_uris: ['https://assistant.example.com/oauth/callback'] }, 'web'],
  ])('registers a client as real clients do: %s', async (_name, metadata, type) => {
    const res = await registerClient(t.url, { ...PUBLIC_CLIENT, ...metadata });
    expect(res.status).toBe(201);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.application_type).toBe(type);
    expect(body.client_id).toEqual(expect.any(String));
    expect(body.redirect_uris).toEqual(metadata.redirect_uris);
  });

  it.each([
    [
      'a lookalike of localhost',
      { redirect_uris: ['http://localhost.evil.example/callback'] },
      /not loopback/,
    ],
    [
      'http on a host that is not loopback',
      { redirect_uris: ['http://assistant.example.com/callback'] },
      /not loopback/,
    ],
    [
      'a native client on http://example',
      { application_type: 'native', redirect_uris: ['http://example.com/cb'] },
      /not loopback/,
    ],
    ['no redirect_uris', {}, /redirect_uris/],
    ['an empty redirect_uris', { redirect_uris: [] }, /redirect_uris/],
    ['another scheme', { redirect_uris: ['myapp://callback'] }, /https/],
  ])('refuses %s', async (_name, metadata, why) => {
    const res = await registerClient(t.url, { ...PUBLIC_CLIENT, ...metadata });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; error_description: string };
    expect(['invalid_client_metadata', 'invalid_redirect_uri']).toContain(body.error);
    expect(body.error_description).toMatch(why);
  });
});

describe('authorization requests', () => {
  /** The authorization server's own error page: 400, HTML, no redirect anywhere. */
  async function refusedOnOurPage(params: Record<string, string>): Promise<string> {
    const res = await fetch(authorizeUrl(t.url, params), { redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    return res.text();
  }

  it('refuses PKCE plain and a missing code challenge on its own page, never at the client', async () => {
    const clientId = await newClient();
    const base = {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: callback.url,
      scope: 'content:read',
      state: 's1',
    };
    const plain = await refusedOnOurPage({
      ...base,
      code_challenge: 'x'.repeat(43),
      code_challenge_method: 'plain',
    });
    expect(plain).toContain('<code>invalid_request</code>: not supported value of code_challenge_method');
    const missing = await refusedOnOurPage(base);
    expect(missing).toContain('<code>invalid_request</code>');
    expect(missing).toMatch(/PKCE/);
    expect(callback.hits.filter((hit) => hit.searchParams.get('state') === 's1')).toEqual([]);
  });

  it('refuses a resource other than PUBLIC_URL/mcp (invalid_target) on its own page', async () => {
    const clientId = await newClient();
    const { challenge } = pkce();
    const page = await refusedOnOurPage({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: callback.url,
      scope: 'content:read',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      resource: 'https://other.example/mcp',
    });
    expect(page).toContain('<code>invalid_target</code>');
  });

  it('refuses a redirect URI that was not registered, without redirecting to it', async () => {
    const clientId = await newClient();
    const { challenge } = pkce();
    const url = new URL('/oauth/authorize', t.url);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: 'https://evil.example/cb',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    }).toString();
    const res = await fetch(url, { redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('redirect_uri');
  });
});

describe('the code flow and its tokens', () => {
  it('shows the consent page with the assistant, its redirect host, the account and the access, then issues tokens', async () => {
    const clientId = await newClient({ client_name: 'Claude <Test>' });
    const { back, verifier, consentPage } = await authorizeWithoutBrowser({
      base: t.url,
      person: dana,
      clientId,
      redirectUri: callback.url,
    });
    expect(consentPage).toContain('Connect Claude &lt;Test&gt; to your account?');
    expect(consentPage).toContain(`<code>${new URL(callback.url).host}</code>`);
    expect(consentPage).toContain(`${dana.name} (${dana.email})`);
    expect(consentPage).toContain('Read and write');
    expect(back.searchParams.get('iss')).toBe(t.url);
    const code = back.searchParams.get('code') ?? '';
    expect(code).not.toBe('');

    // Without the verifier, or with a wrong one, the code is worth nothing.
    const noVerifier = await tokenRequest(t.url, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: callback.url,
      client_id: clientId,
    });
    expect(noVerifier.status).toBe(400);
    expect(noVerifier.body.error).toBe('invalid_grant');
    const wrongVerifier = await tokenRequest(t.url, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: callback.url,
      client_id: clientId,
      code_verifier: pkce().verifier,
    });
    expect(wrongVerifier.body.error).toBe('invalid_grant');
    expect(verifier).not.toBe('');
  });

  it('exchanges a code with PKCE and resource for an access token bound to the account, the client and the access', async () => {
    const c = await connect(dana);
    expect(c.scope).toBe('content:read content:write');
    expect(c.refresh).not.toBe('');
    const principal = await t.app.oauth.verifyMcpToken(c.access);
    expect(principal).toEqual({
      accountId: dana.accountId,
      scope: 'write',
      actor: { type: 'oauth_client', id: c.clientId, name: 'Test Assistant' },
    });
  });

  it('gives a read-only grant a read principal', async () => {
    const c = await connect(lee, { scope: 'content:read' });
    expect(c.scope).toBe('content:read');
    expect(await t.app.oauth.verifyMcpToken(c.access)).toMatchObject({
      accountId: lee.accountId,
      scope: 'read',
    });
  });

  it('works without a resource in the token request (the granted one is used)', async () => {
    const clientId = await newClient();
    const { back, verifier } = await authorizeWithoutBrowser({
      base: t.url,
      person: dana,
      clientId,
      redirectUri: callback.url,
    });
    const token = await tokenRequest(t.url, {
      grant_type: 'authorization_code',
      code: back.searchParams.get('code') ?? '',
      redirect_uri: callback.url,
      client_id: clientId,
      code_verifier: verifier,
    });
    expect(token.status).toBe(200);
    expect(await t.app.oauth.verifyMcpToken(token.body.access_token ?? '')).toMatchObject({
      accountId: dana.accountId,
    });
  });

  it('rotates refresh tokens: the new pair works, the old refresh token is refused', async () => {
    const c = await connect(dana);
    const refreshed = await tokenRequest(t.url, {
      grant_type: 'refresh_token',
      refresh_token: c.refresh,
      client_id: c.clientId,
      resource: `${t.url}/mcp`,
    });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.refresh_token).toBeTruthy();
    expect(refreshed.body.refresh_token).not.toBe(c.refresh);
    expect(await t.app.oauth.verifyMcpToken(refreshed.body.access_token ?? '')).toMatchObject({
      accountId: dana.accountId,
      scope: 'write',
    });
    const again = await tokenRequest(t.url, {
      grant_type: 'refresh_token',
      refresh_token: c.refresh,
      client_id: c.clientId,
    });
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
  });

  it('revokes tokens (RFC 7009): a revoked access token, or a revoked refresh token and its grant, verifies as nothing', async () => {
    const c = await connect(dana);
    const revoke = async (token: string, clientId: string): Promise<number> =>
      (
        await fetch(`${t.url}/oauth/revoke`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token, client_id: clientId }).toString(),
        })
      ).status;
    expect(await revoke(c.access, c.clientId)).toBe(200);
    expect(await t.app.oauth.verifyMcpToken(c.access)).toBeNull();

    const d = await connect(dana);
    // Another client cannot revoke it (answered 200 all the same, as RFC 7009 wants).
    expect(await revoke(d.refresh, c.clientId)).toBe(200);
    expect(await t.app.oauth.verifyMcpToken(d.access)).not.toBeNull();
    expect(await revoke(d.refresh, d.clientId)).toBe(200);
    expect(await t.app.oauth.verifyMcpToken(d.access)).toBeNull();
    const refreshed = await tokenRequest(t.url, {
      grant_type: 'refresh_token',
      refresh_token: d.refresh,
      client_id: d.clientId,
    });
    expect(refreshed.body.error).toBe('invalid_grant');
  });

  it('Deny ends the authorization with access_denied: no code, no token', async () => {
    const clientId = await newClient();
    const { back } = await authorizeWithoutBrowser({
      base: t.url,
      person: dana,
      clientId,
      redirectUri: callback.url,
      decision: 'deny',
    });
    expect(back.origin + back.pathname).toBe(callback.url);
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('code')).toBeNull();
    expect(await t.app.oauth.listConnectedClients(dana.accountId)).not.toContainEqual(
      expect.objectContaining({ clientId }),
    );
  });
});

describe('the verifier /mcp uses', () => {
  it('refuses garbage and unknown tokens', async () => {
    for (const token of ['', 'short', 'x'.repeat(43), 'not a token at all!', `${'a'.repeat(600)}`]) {
      expect(await t.app.oauth.verifyMcpToken(token)).toBeNull();
    }
  });

  it('refuses a token minted for another resource', async () => {
    const c = await connect(dana);
    const provider = await t.app.oauth.provider();
    const real = await provider.AccessToken.find(c.access);
    if (!real?.grantId) throw new Error('no token');
    const other = new provider.AccessToken({
      accountId: dana.accountId,
      clientId: c.clientId,
      grantId: real.grantId,
      scope: 'content:read content:write',
      aud: 'https://other.example/mcp',
    });
    const value = await other.save();
    expect(await provider.AccessToken.find(value)).toBeTruthy();
    expect(await t.app.oauth.verifyMcpToken(value)).toBeNull();
    // The genuine token of the same grant still works.
    expect(await t.app.oauth.verifyMcpToken(c.access)).not.toBeNull();
  });

  it('refuses an expired token, even within the library clock tolerance', async () => {
    const c = await connect(dana);
    const db = t.runtime.db;
    const id = hashOAuthId(c.access);
    const past = Math.floor(Date.now() / 1000) - 5;
    await db
      .updateTable('oauth_models')
      .set({ payload: sql`jsonb_set(payload, '{exp}', to_jsonb(${past}::int))` })
      .where('kind', '=', 'AccessToken')
      .where('id', '=', id)
      .execute();
    expect(await t.app.oauth.verifyMcpToken(c.access)).toBeNull();
    await db
      .updateTable('oauth_models')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('kind', '=', 'AccessToken')
      .where('id', '=', id)
      .execute();
    expect(await t.app.oauth.verifyMcpToken(c.access)).toBeNull();
  });

  it('stores hashes, never the tokens', async () => {
    const c = await connect(dana);
    const rows = await sql<{ row: string }>`select row_to_json(m)::text as row from oauth_models m`.execute(
      t.runtime.db,
    );
    const dump = rows.rows.map((r) => r.row).join('\n');
    expect(dump).not.toContain(c.access);
    expect(dump).not.toContain(c.refresh);
    expect(dump).toContain(hashOAuthId(c.access));
  });

  it('binds each token to its own account', async () => {
    const a = await connect(dana);
    const b = await connect(lee);
    expect((await t.app.oauth.verifyMcpToken(a.access))?.accountId).toBe(dana.accountId);
    expect((await t.app.oauth.verifyMcpToken(b.access))?.accountId).toBe(lee.accountId);
  });
});

describe('connected assistants', () => {
  it('lists them, and disconnecting one kills its access and refresh tokens at once', async () => {
    const person = await createPerson(t.runtime, 'Sam Roofer');
    const clientId = await newClient({ client_name: 'Roof Assistant' });
    const first = await connect(person, { clientId, scope: 'content:read' });
    const second = await connect(person, { clientId });
    const other = await connect(person, { scope: 'content:read' });
    expect(await t.app.oauth.verifyMcpToken(first.access)).not.toBeNull();
    await t.app.oauth.flush();

    const listed = await t.app.oauth.listConnectedClients(person.accountId);
    expect(listed).toHaveLength(2);
    expect(listed[0]).toMatchObject({
      clientId,
      name: 'Roof Assistant',
      redirectHost: new URL(callback.url).host,
      access: 'write',
      connectedAt: expect.any(Date),
      lastUsedAt: expect.any(Date),
    });
    expect(listed[1]).toMatchObject({ clientId: other.clientId, access: 'read' });
    expect(listed[1]?.lastUsedAt).toBeUndefined();

    await t.app.oauth.disconnectClient(person.accountId, clientId);
    expect(await t.app.oauth.verifyMcpToken(first.access)).toBeNull();
    expect(await t.app.oauth.verifyMcpToken(second.access)).toBeNull();
    const refreshed = await tokenRequest(t.url, {
      grant_type: 'refresh_token',
      refresh_token: second.refresh,
      client_id: clientId,
    });
    expect(refreshed.body.error).toBe('invalid_grant');
    expect((await t.app.oauth.listConnectedClients(person.accountId)).map((c) => c.clientId)).toEqual([
      other.clientId,
    ]);
    // The other assistant is untouched.
    expect(await t.app.oauth.verifyMcpToken(other.access)).toMatchObject({ scope: 'read' });
  });

  it('disconnecting for another account changes nothing', async () => {
    const c = await connect(dana);
    await t.app.oauth.disconnectClient(lee.accountId, c.clientId);
    expect(await t.app.oauth.verifyMcpToken(c.access)).not.toBeNull();
  });
});

describe('client ID metadata documents', () => {
  it('accepts an https client_id whose document names it, fetched through the SSRF guard', async () => {
    const clientId = `${docsOrigin}/clients/assistant.json`;
    documents.set('/clients/assistant.json', {
      client_id: clientId,
      client_name: 'Document Assistant',
      redirect_uris: [callback.url],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    const c = await connect(dana, { clientId });
    expect(await t.app.oauth.verifyMcpToken(c.access)).toEqual({
      accountId: dana.accountId,
      scope: 'write',
      actor: { type: 'oauth_client', id: clientId, name: 'Document Assistant' },
    });
  });

  it('refuses a document whose client_id is another URL, and one that is not there', async () => {
    const clientId = `${docsOrigin}/clients/impostor.json`;
    documents.set('/clients/impostor.json', {
      client_id: `${docsOrigin}/clients/assistant.json`,
      client_name: 'Impostor',
      redirect_uris: [callback.url],
      token_endpoint_auth_method: 'none',
    });
    for (const id of [clientId, `${docsOrigin}/clients/missing.json`]) {
      const { challenge } = pkce();
      const url = new URL('/oauth/authorize', t.url);
      url.search = new URLSearchParams({
        response_type: 'code',
        client_id: id,
        redirect_uri: callback.url,
        code_challenge: challenge,
        code_challenge_method: 'S256',
      }).toString();
      const res = await fetch(url, { redirect: 'manual' });
      expect(res.status).toBe(400);
      expect(await res.text()).toContain('invalid_client');
    }
  });

  it('refuses a document whose redirect URIs break the rules', async () => {
    const clientId = `${docsOrigin}/clients/http.json`;
    documents.set('/clients/http.json', {
      client_id: clientId,
      client_name: 'Plain HTTP',
      redirect_uris: ['http://assistant.example.com/callback'],
      token_endpoint_auth_method: 'none',
    });
    const { challenge } = pkce();
    const url = new URL('/oauth/authorize', t.url);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: 'http://assistant.example.com/callback',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    }).toString();
    const res = await fetch(url, { redirect: 'manual' });
    expect(res.status).toBe(400);
  });
});
