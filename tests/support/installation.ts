import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sql } from 'kysely';
import sharp from 'sharp';
import { expect } from 'vitest';
import { SOURCE_TABLES } from '../../infra/archive/format.ts';
import type { Db } from '../../infra/db/schema.ts';
import { type Receiver, until } from '../../reliability/crash-support.ts';
import {
  authorizeWithoutBrowser,
  browserless,
  freePort,
  PUBLIC_CLIENT,
  registerClient,
  startCallback,
  tokenRequest,
} from '../oauth/helpers.ts';
import { csrfOf } from './inject-browser.ts';
import { cli } from './process.ts';
import { snapshotReadModels } from './runtime.ts';
import { startServer } from './server.ts';

/*
 * A seeded installation for the export, import and move tests: made through a real server (every face
 * writes as it does in use), then found again through a real server on the copy. It has an account
 * with its password and a web session, an API key, an article with several edits, a restore, a
 * featured image and an edit through MCP (an OAuth client, its grant and tokens), a webhook endpoint
 * whose deliveries succeeded, and the activity of all of it.
 */

export type Installation = {
  /** The server's address, the same on the copy: OAuth tokens are for its `/mcp`. */
  publicUrl: string;
  port: number;
  email: string;
  password: string;
  apiKey: string;
  accountId: string;
  articleId: string;
  /** The article's revision once seeded. */
  revision: number;
  imageUrl: string;
  image: Buffer;
  webhookId: string;
  deliveries: number;
  accessToken: string;
  refreshToken: string;
  clientId: string;
  /** The cookie jar of the browser that signed in (its session must still be good on the copy). */
  browser: ReturnType<typeof browserless>;
};

/** The environment a server of the installation runs with, besides where its database is. */
export function serverEnv(port: number): Record<string, string> {
  return {
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8',
    RATE_LIMIT_PER_MINUTE: '100000',
    WEBHOOK_RETRY_SCHEDULE: '1,1,1',
    DEMO_ON_FIRST_START: 'false',
  };
}

/** Waits until `ready()` holds (polling), failing the test after `timeoutMs`. */
async function waitFor(ready: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  expect(await until(ready, timeoutMs)).toBe(true);
}

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

type Deliveries = { data: Array<{ id: string; status: string; event_id: string }> };

async function deliveriesOf(base: string, key: string, webhookId: string): Promise<Deliveries['data']> {
  const res = await fetch(`${base}/api/v1/webhooks/${webhookId}/deliveries?per_page=100`, {
    headers: { authorization: `Bearer ${key}` },
  });
  expect(res.status).toBe(200);
  return (await json<Deliveries>(res)).data;
}

async function mcpClient(base: string, accessToken: string): Promise<Client> {
  const client = new Client({ name: 'archive-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${accessToken}` } },
    }),
  );
  return client;
}

/** Seeds an installation through a real server on `env` (DATABASE_URL or DATA_DIR, MEDIA_DIR); stops it. */
export async function seedInstallation(
  env: Record<string, string>,
  receiver: Receiver,
): Promise<Installation> {
  const seeded = await cli(
    ['seed-demo', '--json', '--sites', '1', '--articles', '3', '--backlinks', '4'],
    env,
  );
  expect(seeded.code, seeded.stderr).toBe(0);
  const demo = JSON.parse(seeded.stdout) as {
    account_id: string;
    email: string;
    password: string;
    api_key: string;
    sites: Array<{ id: string }>;
  };
  const port = await freePort();
  const server = await startServer({ ...env, ...serverEnv(port) });
  const callback = await startCallback();
  try {
    const base = `http://127.0.0.1:${port}`;
    const key = demo.api_key;
    const call = (method: string, path: string, body?: unknown): Promise<Response> =>
      fetch(`${base}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });

    const hook = await call('POST', '/webhooks', {
      url: receiver.url,
      events: ['article.updated', 'article.featured_image_replaced'],
    });
    expect(hook.status).toBe(201);
    const webhookId = (await json<{ id: string }>(hook)).id;

    const list = await json<{ data: Array<{ id: string }> }>(
      await call('GET', `/sites/${demo.sites[0]?.id}/articles?from=2000-01-01&to=2100-01-01`),
    );
    const articleId = list.data[0]?.id as string;
    for (const title of ['First edit', 'Second edit', 'Third edit']) {
      const res = await call('PUT', `/articles/${articleId}`, { title, reason: 'export test' });
      expect(res.status).toBe(200);
    }
    const restored = await call('POST', `/articles/${articleId}/revisions/2/restore`);
    expect(restored.status).toBe(200);

    const image = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#cc6633' } })
      .png()
      .toBuffer();
    const form = new FormData();
    form.append('image', new Blob([image], { type: 'image/png' }), 'photo.png');
    form.append('alt', 'An orange square');
    const upload = await fetch(`${base}/api/v1/articles/${articleId}/featured-image`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(upload.status).toBe(200);
    const imageUrl = (await json<{ featured_image: { url: string } }>(upload)).featured_image.url;

    // An assistant connects (the person signs in on the web, then allows it) and edits through MCP.
    const registered = await registerClient(base, { ...PUBLIC_CLIENT, redirect_uris: [callback.url] });
    const clientId = (await json<{ client_id: string }>(registered)).client_id;
    const browser = browserless(base);
    const person = { accountId: demo.account_id, email: demo.email, password: demo.password, name: 'Demo' };
    const { back, verifier } = await authorizeWithoutBrowser({
      base,
      person,
      clientId,
      redirectUri: callback.url,
      jar: browser,
    });
    const tokens = await tokenRequest(base, {
      grant_type: 'authorization_code',
      code: back.searchParams.get('code') ?? '',
      redirect_uri: callback.url,
      client_id: clientId,
      code_verifier: verifier,
      resource: `${base}/mcp`,
    });
    expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
    const mcp = await mcpClient(base, tokens.body.access_token as string);
    try {
      const result = (await mcp.callTool({
        name: 'update_article',
        arguments: { article_id: articleId, title: 'Edited by an assistant' },
      })) as { isError?: boolean };
      expect(result.isError ?? false).toBe(false);
    } finally {
      await mcp.close();
    }

    // Every delivery sent (3 edits, the restore, the image, the assistant's edit), and the activity written.
    let deliveries: Deliveries['data'] = [];
    await waitFor(async () => {
      deliveries = await deliveriesOf(base, key, webhookId);
      return deliveries.length >= 6 && deliveries.every((d) => d.status === 'succeeded');
    }, 30_000);
    await waitFor(async () => {
      const activity = await json<{ data: Array<{ operation: string; source: string }> }>(
        await call('GET', '/activity?per_page=100'),
      );
      return activity.data.some((a) => a.source === 'mcp' && a.operation === 'update_article');
    }, 30_000);
    const article = await json<{ revision: number }>(await call('GET', `/articles/${articleId}`));
    return {
      publicUrl: base,
      port,
      email: demo.email,
      password: demo.password,
      apiKey: key,
      accountId: demo.account_id,
      articleId,
      revision: article.revision,
      imageUrl,
      image,
      webhookId,
      deliveries: deliveries.length,
      accessToken: tokens.body.access_token as string,
      refreshToken: tokens.body.refresh_token as string,
      clientId,
      browser,
    };
  } finally {
    await callback.close();
    expect(await server.stop()).toBe(0);
  }
}

/**
 * Starts a real server on `env` (the copy) at the installation's address and finds everything there:
 * the API key, the article's history with its restore, the activity (the MCP edit's too), the featured
 * image, the person's web session and password, the assistant's access and refresh tokens, the
 * webhook endpoint with its deliveries; then an edit, whose webhook is the only new delivery (the
 * subscription went on where it was, sending nothing twice).
 */
export async function findInstallation(
  env: Record<string, string>,
  inst: Installation,
  receiver: Receiver,
): Promise<void> {
  const server = await startServer({ ...env, ...serverEnv(inst.port) });
  try {
    const base = inst.publicUrl;
    const call = (method: string, path: string, body?: unknown): Promise<Response> =>
      fetch(`${base}/api/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${inst.apiKey}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });

    const history = await call('GET', `/articles/${inst.articleId}/revisions?per_page=100`);
    expect(history.status).toBe(200);
    const revisions = (
      await json<{ data: Array<{ revision: number; restored_from: number | null }> }>(history)
    ).data;
    expect(revisions.map((r) => r.revision).sort((a, b) => a - b)).toEqual(
      Array.from({ length: inst.revision }, (_, i) => i + 1),
    );
    expect(revisions.some((r) => r.restored_from === 2)).toBe(true);

    const activity = await json<{ data: Array<{ operation: string; source: string }> }>(
      await call('GET', '/activity?per_page=100'),
    );
    const operations = activity.data.map((a) => `${a.source}:${a.operation}`);
    expect(operations).toContain('api:restore_revision');
    expect(operations).toContain('api:replace_featured_image');
    expect(operations).toContain('mcp:update_article');

    const image = await fetch(new URL(new URL(inst.imageUrl).pathname, base));
    expect(image.status).toBe(200);
    expect(Buffer.from(await image.arrayBuffer()).equals(inst.image)).toBe(true);

    // The browser that signed in is still signed in; the password signs in anew.
    const signedIn = await inst.browser.request('GET', '/sites');
    expect(signedIn.status).toBe(200);
    const fresh = browserless(base);
    const form = await fresh.request('GET', '/sign-in');
    const signIn = await fresh.request('POST', '/sign-in', {
      csrf: csrfOf(await form.text()),
      email: inst.email,
      password: inst.password,
    });
    expect(signIn.status).toBe(303);
    expect(signIn.headers.get('location')).toBe('/sites');
    const wrong = await browserless(base).request('GET', '/sites');
    expect(wrong.status).toBe(303);

    // The assistant's tokens: the access token reads through MCP, the refresh token gives new ones.
    const mcp = await mcpClient(base, inst.accessToken);
    try {
      const tools = await mcp.listTools();
      expect(tools.tools.map((t) => t.name)).toContain('update_article');
    } finally {
      await mcp.close();
    }
    const refreshed = await tokenRequest(base, {
      grant_type: 'refresh_token',
      refresh_token: inst.refreshToken,
      client_id: inst.clientId,
    });
    expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);

    // The webhook endpoint and its deliveries; a new edit is the one new delivery.
    expect((await deliveriesOf(base, inst.apiKey, inst.webhookId)).length).toBe(inst.deliveries);
    const received = receiver.ids.length;
    const edit = await call('PUT', `/articles/${inst.articleId}`, { title: 'Edited on the copy' });
    expect(edit.status).toBe(200);
    expect((await json<{ revision: number }>(edit)).revision).toBe(inst.revision + 1);
    await waitFor(() => receiver.ids.length > received, 30_000);
    const after = await deliveriesOf(base, inst.apiKey, inst.webhookId);
    expect(after.length).toBe(inst.deliveries + 1);
    await waitFor(
      async () =>
        (await deliveriesOf(base, inst.apiKey, inst.webhookId)).every((d) => d.status === 'succeeded'),
      30_000,
    );
    expect(receiver.ids.length).toBe(received + 1);
  } finally {
    expect(await server.stop()).toBe(0);
  }
}

/** What an import must reproduce, as text: every read model's rows, the log, every source table's rows. */
export function installationSnapshot(db: Db): Promise<Record<string, string[]>> {
  // Times as text in one zone, whatever each server's own.
  return db.transaction().execute(async (trx) => {
    await sql`set local timezone to 'UTC'`.execute(trx);
    const out = await snapshotReadModels(trx);
    out.events = (
      await sql<{
        row: string;
      }>`select (to_jsonb(e) - 'transaction_id')::text as row from events e order by position`.execute(trx)
    ).rows.map((r) => r.row);
    for (const t of SOURCE_TABLES) {
      out[`source:${t.name}`] = (
        await sql<{ row: string }>`select to_jsonb(t)::text as row from ${sql.table(t.name)} t`.execute(trx)
      ).rows
        .map((r) => r.row)
        .sort();
    }
    return out;
  });
}
