import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listActivity } from '../../projections/activity.ts';
import { legacyPost, type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * Resource subscriptions of the 2025 era, with the SDK's 1.x client on the app at a real port:
 * `initialize` starts a session (Mcp-Session-Id, kept in the database), the client's GET stream carries
 * `notifications/resources/updated` for the articles the session subscribed to, DELETE ends the session.
 * Requests without a session stay stateless (tests/mcp/mcp.int.test.ts).
 */

type Connected = { client: Client; transport: StreamableHTTPClientTransport; updated: string[] };

/*
 * Every request of this file goes through its own connection pool, destroyed before the app stops: with
 * SSE streams holding connections, the shared pool may open a connection it then never sends a request
 * on, which the app's server would wait for (until its headers timeout) when it closes.
 */
const agent = new Agent();
const fetch = ((input: string | URL, init?: RequestInit) =>
  undiciFetch(input, { ...(init as object), dispatcher: agent })) as unknown as typeof globalThis.fetch;

async function connect(mcpUrl: string, token: string): Promise<Connected> {
  const client = new Client({ name: 'content-service-tests-sessions', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
    fetch,
  });
  const updated: string[] = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    updated.push(notification.params.uri);
  });
  await client.connect(transport);
  return { client, transport, updated };
}

const articleUri = (id: string): string => `content-service://articles/${id}`;

/** The JSON-RPC error of a refused request, or what else failed. */
const refusalOf = (error: unknown): unknown =>
  error instanceof McpError ? { code: error.code, data: error.data } : error;

describe('MCP resource subscriptions in the 2025 era (sessions)', () => {
  let t: McpTestApp;
  let a: Connected;
  let b: Connected;

  /** The session's GET stream is open on the server: what is appended from now on is notified. */
  const streamOpen = (connected: Connected) =>
    vi.waitFor(() => {
      const id = connected.transport.sessionId as string;
      expect(t.logs.some((l) => l.includes('MCP session stream opened') && l.includes(id))).toBe(true);
    }, PATIENCE);

  const editThroughApi = async (articleId: string, title: string): Promise<void> => {
    const response = await fetch(`${t.url}/api/v1/articles/${articleId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.a.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ title }),
    });
    expect(response.status).toBe(200);
  };

  /** A 2025-era POST to /mcp as a client sends it, with a session id or none. */
  const rawPost = (token: string, body: object, session?: string): Promise<Response> =>
    legacyPost(fetch, t.mcpUrl, token, body, session);

  beforeAll(async () => {
    t = await startMcpTestApp();
    a = await connect(t.mcpUrl, t.tokens.aWrite);
    b = await connect(t.mcpUrl, t.tokens.bWrite);
  });
  afterAll(async () => {
    await a?.client.close();
    await b?.client.close();
    if (!agent.destroyed) await agent.destroy();
    await t?.close();
  });

  it('starts a session at initialize and offers resources/subscribe', () => {
    expect(a.transport.sessionId).toMatch(/^mcps_[0-9a-z]{26}$/);
    expect(b.transport.sessionId).not.toBe(a.transport.sessionId);
    expect(a.client.getServerCapabilities()?.resources?.subscribe).toBe(true);
  });

  it('notifies the revisions of a subscribed article only, until it is unsubscribed', async () => {
    const [watched, unwatched, sentinel] = t.a.articleIds as [string, string, string];
    await streamOpen(a);
    expect(await a.client.subscribeResource({ uri: articleUri(watched) })).toEqual({});
    // Subscribing twice is one subscription.
    await a.client.subscribeResource({ uri: articleUri(watched) });

    await editThroughApi(unwatched, 'Not watched');
    await editThroughApi(watched, 'Watched');
    await vi.waitFor(() => expect(a.updated).toEqual([articleUri(watched)]), PATIENCE);

    // Through MCP, by another session of the same account: the same notification.
    const editor = await connect(t.mcpUrl, t.tokens.aWrite);
    try {
      await streamOpen(editor);
      const result = await editor.client.callTool({
        name: 'update_article',
        arguments: { article_id: watched, title: 'Watched, through MCP' },
      });
      expect(result.isError).toBeFalsy();
      await vi.waitFor(() => expect(a.updated).toEqual([articleUri(watched), articleUri(watched)]), PATIENCE);
      expect(editor.updated).toEqual([]);
    } finally {
      await editor.client.close();
    }

    // Unsubscribed: the next revision of it is not notified; the sentinel's, made after it, is.
    expect(await a.client.unsubscribeResource({ uri: articleUri(watched) })).toEqual({});
    await a.client.subscribeResource({ uri: articleUri(sentinel) });
    await editThroughApi(watched, 'Watched no more');
    await editThroughApi(sentinel, 'Sentinel');
    await vi.waitFor(
      () => expect(a.updated).toEqual([articleUri(watched), articleUri(watched), articleUri(sentinel)]),
      PATIENCE,
    );
    expect(b.updated).toEqual([]);
  });

  it("refuses another account's article, an unknown one and what is not an article, as a read does", async () => {
    const theirs = articleUri(t.a.articleIds[3] as string);
    const unknown = articleUri('art_00000000000000000000000000');
    const site = `content-service://sites/${t.b.siteId}`;
    for (const uri of [theirs, unknown, site]) {
      const refused = await b.client.subscribeResource({ uri }).then(() => null, refusalOf);
      expect(refused, uri).toEqual({ code: -32602, data: { uri } });
    }
  });

  it('refuses resources/subscribe without a session, and answers other requests without one statelessly', async () => {
    const uri = articleUri(t.a.articleIds[0] as string);
    const refused = await rawPost(t.tokens.aWrite, { method: 'resources/subscribe', params: { uri } });
    expect(refused.status).toBe(200);
    expect(await refused.json()).toMatchObject({
      error: { code: -32602, data: { code: 'invalid_request', detail: expect.stringContaining('session') } },
    });
    const listed = await rawPost(t.tokens.aWrite, { method: 'tools/list' });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('mcp-session-id')).toBeNull();
  });

  it("answers 404 to an unknown session id and to another account's", async () => {
    const unknown = await rawPost(
      t.tokens.aWrite,
      { method: 'tools/list' },
      'mcps_00000000000000000000000000',
    );
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: -32001 } });
    const theirs = await rawPost(t.tokens.bWrite, { method: 'tools/list' }, a.transport.sessionId);
    expect(theirs.status).toBe(404);
    const own = await rawPost(t.tokens.aWrite, { method: 'tools/list' }, a.transport.sessionId);
    expect(own.status).toBe(200);
    const stream = await fetch(t.mcpUrl, {
      headers: {
        authorization: `Bearer ${t.tokens.bWrite}`,
        accept: 'text/event-stream',
        'mcp-session-id': a.transport.sessionId as string,
      },
    });
    expect(stream.status).toBe(404);
  });

  it('resumes a stream from Last-Event-ID: the revisions it missed, once per article, then what comes live', async () => {
    const [watched, unwatched] = t.a.articleIds as [string, string];
    /** A session made and subscribed to the watched article as a client does, with raw requests. */
    const newSession = async (): Promise<string> => {
      const init = await rawPost(t.tokens.aWrite, {
        method: 'initialize',
        params: {
          protocolVersion: '2025-11-25',
          capabilities: {},
          clientInfo: { name: 'raw', version: '1' },
        },
      });
      const id = init.headers.get('mcp-session-id') as string;
      expect(id).toMatch(/^mcps_/);
      await init.text();
      const subscribed = await rawPost(
        t.tokens.aWrite,
        { method: 'resources/subscribe', params: { uri: articleUri(watched) } },
        id,
      );
      expect(subscribed.status).toBe(200);
      await subscribed.text();
      return id;
    };
    const session = await newSession();
    // Another session's stream, open throughout: once it has a revision, this process has passed it on
    // live, and a stream opened after that gets it only by a replay.
    const witnessSession = await newSession();

    /** A GET stream of a session, once the server has it open; its events (id and URI) as they come. */
    const openStream = async (of: string, lastEventId?: string) => {
      const openedBefore = t.logs.filter(
        (l) => l.includes('MCP session stream opened') && l.includes(of),
      ).length;
      const stop = new AbortController();
      const res = await fetch(t.mcpUrl, {
        signal: stop.signal,
        headers: {
          authorization: `Bearer ${t.tokens.aWrite}`,
          accept: 'text/event-stream',
          'mcp-session-id': of,
          ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
        },
      });
      expect(res.status).toBe(200);
      const events: { id: string; uri: string }[] = [];
      const reading = (async () => {
        const decoder = new TextDecoder();
        let text = '';
        try {
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
            text += decoder.decode(chunk, { stream: true });
            let end = text.indexOf('\n\n');
            while (end >= 0) {
              const block = text.slice(0, end);
              text = text.slice(end + 2);
              const id = /^id: (.*)$/m.exec(block)?.[1];
              const data = /^data: (.*)$/m.exec(block)?.[1];
              if (id !== undefined && data !== undefined) {
                events.push({ id, uri: (JSON.parse(data) as { params: { uri: string } }).params.uri });
              }
              end = text.indexOf('\n\n');
            }
          }
        } catch {
          // Stopped.
        }
      })();
      await vi.waitFor(() => {
        const lines = t.logs.filter((l) => l.includes('MCP session stream opened') && l.includes(of));
        expect(lines.length).toBeGreaterThan(openedBefore);
      }, PATIENCE);
      return {
        events,
        close: async () => {
          stop.abort();
          await reading;
        },
      };
    };

    const witness = await openStream(witnessSession);
    const first = await openStream(session);
    await editThroughApi(watched, 'Seen live');
    await vi.waitFor(() => expect(first.events).toHaveLength(1), PATIENCE);
    const seen = first.events[0] as { id: string; uri: string };
    expect(seen.uri).toBe(articleUri(watched));
    expect(seen.id).toMatch(/^\d+-\d+$/);
    await first.close();

    // Missed while no stream of the session was open: two revisions of the watched article, one of
    // another; passed on live to the witness before the session's stream opens again.
    await editThroughApi(watched, 'Missed once');
    await editThroughApi(unwatched, 'Not watched');
    await editThroughApi(watched, 'Missed twice');
    await vi.waitFor(() => expect(witness.events).toHaveLength(3), PATIENCE);
    const missed = witness.events[2] as { id: string; uri: string };
    const resumed = await openStream(session, seen.id);
    // Once, with the newest revision's id.
    await vi.waitFor(() => expect(resumed.events).toEqual([missed]), PATIENCE);
    // Then live, on the same stream.
    await editThroughApi(watched, 'Live after the replay');
    await vi.waitFor(() => expect(resumed.events).toHaveLength(2), PATIENCE);
    await resumed.close();

    // Resumed from the newest: nothing to replay, so the first event is the next revision; an id this
    // service never sent (or none) replays nothing either.
    const newest = resumed.events[1] as { id: string; uri: string };
    for (const from of [newest.id, 'not-an-event-id']) {
      const again = await openStream(session, from);
      await editThroughApi(watched, `After ${from}`);
      await vi.waitFor(() => expect(again.events.length).toBeGreaterThanOrEqual(1), PATIENCE);
      expect(again.events[0]?.id).not.toBe(newest.id);
      expect(again.events).toHaveLength(1);
      await again.close();
    }
    await witness.close();
    for (const ending of [session, witnessSession]) {
      const ended = await fetch(t.mcpUrl, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${t.tokens.aWrite}`, 'mcp-session-id': ending },
      });
      expect(ended.status).toBe(204);
    }
  });

  it('refuses a second stream of a session on the same process (409)', async () => {
    const second = await fetch(t.mcpUrl, {
      headers: {
        authorization: `Bearer ${t.tokens.aWrite}`,
        accept: 'text/event-stream',
        'mcp-session-id': a.transport.sessionId as string,
      },
    });
    expect(second.status).toBe(409);
  });

  it('ends a session on DELETE: its id is unknown from then on', async () => {
    const ending = await connect(t.mcpUrl, t.tokens.aWrite);
    const session = ending.transport.sessionId as string;
    await streamOpen(ending);
    await ending.client.subscribeResource({ uri: articleUri(t.a.articleIds[4] as string) });
    const foreign = await fetch(t.mcpUrl, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${t.tokens.bWrite}`, 'mcp-session-id': session },
    });
    expect(foreign.status).toBe(404);
    await ending.transport.terminateSession();
    expect(ending.transport.sessionId).toBeUndefined();
    await ending.client.close();
    const after = await rawPost(t.tokens.aWrite, { method: 'tools/list' }, session);
    expect(after.status).toBe(404);
    const rows = await t.runtime.db
      .selectFrom('mcp_session_subscriptions')
      .select('uri')
      .where('session_id', '=', session)
      .execute();
    expect(rows).toEqual([]);
  });

  it('records each subscribe and unsubscribe in the activity log', async () => {
    await a.client.close();
    await b.client.close();
    await agent.destroy();
    await t.drain();
    const records = async (accountId: string, operation: string) =>
      (await listActivity(t.runtime.db, accountId, { page: 1, perPage: 200, source: 'mcp' })).rows
        .filter((r) => r.operation === operation)
        .map((r) => [r.article_id, r.status]);
    const [watched, , sentinel] = t.a.articleIds as [string, string, string];
    expect(await records(t.a.accountId, 'subscribe_resources')).toEqual([
      [t.a.articleIds[4], 200],
      // The resumed stream's session and its witness.
      [watched, 200],
      [watched, 200],
      [watched, 400],
      [sentinel, 200],
      [watched, 200],
      [watched, 200],
    ]);
    expect(await records(t.a.accountId, 'unsubscribe_resources')).toEqual([[watched, 200]]);
    expect(await records(t.b.accountId, 'subscribe_resources')).toEqual([
      [null, 404],
      ['art_00000000000000000000000000', 404],
      [t.a.articleIds[3], 404],
    ]);
  });
});
