import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listActivity } from '../../projections/activity.ts';
import { connectClient, type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * Resource subscriptions: the 2026-07-28 revision's `subscriptions/listen` (an SSE stream on which the
 * server sends `notifications/resources/updated` for the articles named), on the app at a real port with
 * the SDK's 2.x client. Only the account's articles may be named. The 2025 era's resources/subscribe,
 * within a session, is tested in session-subscriptions.int.test.ts.
 */

async function connect(mcpUrl: string, token: string, mode: 'auto' | 'legacy'): Promise<Client> {
  const client = new Client(
    { name: 'content-service-tests-listen', version: '1.0.0' },
    { versionNegotiation: { mode } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(mcpUrl), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

const articleUri = (id: string): string => `content-service://articles/${id}`;

describe('MCP resource subscriptions', () => {
  let t: McpTestApp;
  let listener: Client;
  let other: Client;
  const updated: string[] = [];

  beforeAll(async () => {
    t = await startMcpTestApp();
    listener = await connect(t.mcpUrl, t.tokens.aWrite, 'auto');
    other = await connect(t.mcpUrl, t.tokens.bWrite, 'auto');
    listener.setNotificationHandler('notifications/resources/updated', (notification) => {
      updated.push(notification.params.uri);
    });
  });
  afterAll(async () => {
    await listener?.close();
    await other?.close();
    await t?.close();
  });

  it('offers subscriptions in both eras (the 2025 era within a session: session-subscriptions.int.test.ts)', async () => {
    expect(listener.getServerCapabilities()?.resources?.subscribe).toBe(true);
    const legacy = await connect(t.mcpUrl, t.tokens.aWrite, 'legacy');
    const legacy1 = await connectClient(t.mcpUrl, t.tokens.aWrite);
    try {
      expect(legacy.getServerCapabilities()?.resources?.subscribe).toBe(true);
      expect(legacy1.getServerCapabilities()?.resources?.subscribe).toBe(true);
    } finally {
      await legacy.close();
      await legacy1.close();
    }
  });

  it('sends notifications/resources/updated on every new revision of a subscribed article, whoever makes it', async () => {
    const watched = t.a.articleIds[0] as string;
    const unwatched = t.a.articleIds[1] as string;
    const subscription = await listener.listen({ resourceSubscriptions: [articleUri(watched)] });
    expect(subscription.honoredFilter.resourceSubscriptions).toEqual([articleUri(watched)]);

    // Another article's revision first: no notification for it.
    const editor = await connectClient(t.mcpUrl, t.tokens.aWrite);
    try {
      const edits = [
        [unwatched, 'Not watched'],
        [watched, 'Watched, through MCP'],
      ] as const;
      for (const [articleId, title] of edits) {
        const result = await editor.callTool({
          name: 'update_article',
          arguments: { article_id: articleId, title },
        });
        expect(result.isError).toBeFalsy();
      }
    } finally {
      await editor.close();
    }
    await vi.waitFor(() => expect(updated).toEqual([articleUri(watched)]), PATIENCE);

    // Through the API: another face, the same notification.
    const response = await fetch(`${t.url}/api/v1/articles/${watched}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.a.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Watched, through the API' }),
    });
    expect(response.status).toBe(200);
    await vi.waitFor(() => expect(updated).toEqual([articleUri(watched), articleUri(watched)]), PATIENCE);

    await subscription.close();
    expect(await subscription.closed).toBe('local');
  });

  it("refuses another account's article, an unknown one and what is not an article, as a read does", async () => {
    const theirs = articleUri(t.a.articleIds[0] as string);
    const unknown = articleUri('art_00000000000000000000000000');
    const site = `content-service://sites/${t.b.siteId}`;
    for (const uri of [theirs, unknown, site]) {
      const refused = await other.listen({ resourceSubscriptions: [uri] }).then(
        () => null,
        (error: unknown) => (error instanceof ProtocolError ? { code: error.code, data: error.data } : error),
      );
      expect(refused, uri).toEqual({ code: -32602, data: { uri } });
    }
  });

  it('ends open subscriptions gracefully when the server closes, and recorded each listen', async () => {
    const subscription = await listener.listen({
      resourceSubscriptions: [articleUri(t.a.articleIds[2] as string)],
    });
    await t.drain();
    expect(await subscription.closed).toBe('graceful');
    const records = async (accountId: string) =>
      (await listActivity(t.runtime.db, accountId, { page: 1, perPage: 200, source: 'mcp' })).rows.filter(
        (r) => r.operation === 'subscribe_resources',
      );
    const mine = await records(t.a.accountId);
    expect(mine.map((r) => [r.article_id, r.status])).toEqual([
      [t.a.articleIds[2], 200],
      [t.a.articleIds[0], 200],
    ]);
    expect(mine[0]?.actor).toEqual({ type: 'oauth_client', id: t.client.id, name: t.client.name });
    const theirs = await records(t.b.accountId);
    expect(theirs.map((r) => r.status)).toEqual([404, 404, 404]);
  });
});
