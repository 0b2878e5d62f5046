import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { purgeExpiredSessions } from '../../infra/jobs/housekeeping.ts';
import { legacyPost, type McpTestApp, startMcpTestApp } from '../support/mcp-app.ts';
import { readSse, type SseReading } from '../support/sse.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * A notification stream lasts as long as what opened it holds (apps/server/mcp/stream-watch.ts): a
 * session's GET stream and a 2026-07-28 listen end once their token is refused (a disconnect, an
 * expiry), a session's stream once its session ended elsewhere; a session whose stream is open is kept
 * seen, so it does not expire while its client only listens. The app checks its streams every 100 ms
 * here (15 s by default); its clock is the test's.
 */

const HOUR_MS = 3_600_000;
const START = Date.parse('2026-11-05T12:00:00Z');

/* Every request through its own pool, destroyed before the app stops (streams hold connections). */
const agent = new Agent();
const fetch = ((input: string | URL, init?: RequestInit) =>
  undiciFetch(input, { ...(init as object), dispatcher: agent })) as unknown as typeof globalThis.fetch;

const articleUri = (id: string): string => `content-service://articles/${id}`;

describe('how long an MCP notification stream lasts', () => {
  let t: McpTestApp;
  let clock = START;
  const open: SseReading[] = [];

  beforeAll(async () => {
    t = await startMcpTestApp({ now: () => new Date(clock), streamCheckMs: 100 });
  });
  afterAll(async () => {
    for (const reading of open) await reading.stop();
    if (!agent.destroyed) await agent.destroy();
    await t?.close();
  });

  /** A 2025-era POST as a client sends it; its answer read. */
  const post = async (token: string, body: object, session?: string): Promise<Response> => {
    const response = await legacyPost(fetch, t.mcpUrl, token, body, session);
    await response.arrayBuffer();
    return response;
  };

  /** A new session of the token, subscribed to the account's first article. */
  const newSession = async (token: string): Promise<string> => {
    const init = await post(token, {
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    const session = init.headers.get('mcp-session-id') as string;
    expect(session).toMatch(/^mcps_/);
    const uri = articleUri(t.a.articleIds[0] as string);
    expect((await post(token, { method: 'resources/subscribe', params: { uri } }, session)).status).toBe(200);
    return session;
  };

  /** The session's GET stream, once the app has it open. */
  const openStream = async (token: string, session: string): Promise<SseReading> => {
    const abort = new AbortController();
    const response = await fetch(t.mcpUrl, {
      signal: abort.signal,
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-session-id': session },
    });
    expect(response.status).toBe(200);
    const reading = readSse(response, abort);
    open.push(reading);
    await vi.waitFor(
      () =>
        expect(t.logs.some((l) => l.includes('MCP session stream opened') && l.includes(session))).toBe(true),
      PATIENCE,
    );
    return reading;
  };

  const endedLine = (session: string, why: string): boolean =>
    t.logs.some((l) => l.includes(`MCP stream ended: ${why}`) && l.includes(session));

  it("ends a session's stream once its token is refused, and only that stream", async () => {
    const refused = t.issueToken(t.a, 'write');
    const kept = t.issueToken(t.a, 'write');
    const session = await newSession(refused);
    const other = await newSession(kept);
    const stream = await openStream(refused, session);
    const witness = await openStream(kept, other);

    t.revokeToken(refused);
    expect(await stream.done).toBe('ended');
    expect(endedLine(session, 'its access token is no longer valid')).toBe(true);
    // Opened again with the refused token: 401, as any request with it.
    const again = await fetch(t.mcpUrl, {
      headers: { authorization: `Bearer ${refused}`, accept: 'text/event-stream', 'mcp-session-id': session },
    });
    expect(again.status).toBe(401);
    await again.arrayBuffer();

    // The other stream, its token valid, still carries notifications.
    const response = await fetch(`${t.url}/api/v1/articles/${t.a.articleIds[0]}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.a.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Seen by the stream that stays' }),
    });
    expect(response.status).toBe(200);
    await vi.waitFor(() => expect(witness.events).toHaveLength(1), PATIENCE);
    await witness.stop();
  });

  it("ends a session's stream once the session ended on another process", async () => {
    const token = t.issueToken(t.a, 'write');
    const session = await newSession(token);
    const stream = await openStream(token, session);
    // What a DELETE on another process does: the session's row is gone; this process has the stream.
    await t.runtime.db.deleteFrom('mcp_sessions').where('id', '=', session).execute();
    expect(await stream.done).toBe('ended');
    expect(endedLine(session, 'its session has ended or expired')).toBe(true);
  });

  it('keeps a session whose stream is open from expiring, while one without a stream expires', async () => {
    const token = t.issueToken(t.a, 'write');
    const listening = await newSession(token);
    const idle = await newSession(token);
    const stream = await openStream(token, listening);
    const seenAt = async (session: string) =>
      (
        await t.runtime.db
          .selectFrom('mcp_sessions')
          .select('last_seen_at')
          .where('id', '=', session)
          .executeTakeFirst()
      )?.last_seen_at.getTime();

    // 23 hours on, no request: the open stream's check marks its session seen, not the other.
    clock = START + 23 * HOUR_MS;
    await vi.waitFor(async () => expect(await seenAt(listening)).toBe(clock), PATIENCE);
    expect(await seenAt(idle)).toBe(START);

    // 30 hours on, housekeeping: the idle session is gone, the listening one kept and still answered.
    clock = START + 30 * HOUR_MS;
    await purgeExpiredSessions({ db: t.runtime.db, now: () => new Date(clock) });
    expect((await post(token, { method: 'tools/list' }, idle)).status).toBe(404);
    expect((await post(token, { method: 'tools/list' }, listening)).status).toBe(200);
    expect(stream.events).toEqual([]);
    await stream.stop();
    clock = START;
  });

  it('ends a 2026-07-28 listen once its token is refused', async () => {
    const token = t.issueToken(t.a, 'read');
    const client = new Client(
      { name: 'content-service-tests-lifetime', version: '1.0.0' },
      { versionNegotiation: { mode: 'auto' } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(t.mcpUrl), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
        fetch,
      }),
    );
    try {
      const subscription = await client.listen({
        resourceSubscriptions: [articleUri(t.a.articleIds[1] as string)],
      });
      const ended = () =>
        t.logs.filter((l) => l.includes('MCP stream ended: its access token is no longer valid')).length;
      const before = ended();
      t.revokeToken(token);
      expect(await subscription.closed).toBe('remote');
      expect(ended()).toBe(before + 1);
    } finally {
      await client.close();
    }
  });
});
