import { Agent, type IncomingMessage, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * The drain on SIGTERM (SHUTDOWN_DRAIN_SECONDS, docs/operations.md "Stopping"): the real server on a
 * port; from the signal on /readyz answers 503 `stopping` while every other request is still served,
 * each answer closing its connection (a load balancer's kept-alive connection is not reused); then
 * the graceful close, and exit 0.
 */

type Answer = { status: number; connection: string | undefined; body: string; socketClosed: Promise<void> };

/** GET `path` on `agent`'s connections; `socketClosed` resolves when the connection it went over closes. */
async function get(base: string, path: string, agent: Agent): Promise<Answer> {
  const req = request(new URL(path, base), { agent });
  const socketClosed = new Promise<void>((resolve) => {
    req.once('socket', (socket) => socket.once('close', () => resolve()));
  });
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    req.once('response', resolve);
    req.once('error', reject);
  });
  req.end();
  const res = await response;
  let body = '';
  for await (const chunk of res) body += String(chunk);
  return { status: res.statusCode ?? 0, connection: res.headers.connection, body, socketClosed };
}

describe('draining on SIGTERM', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await test.drop();
  });

  it('answers /readyz 503 stopping and serves every other request with Connection: close; a second SIGTERM ends the drain', async () => {
    const server = await startServer({
      DATABASE_URL: test.databaseUrl,
      DATA_DIR: '/nonexistent',
      // Longer than any test: the drain ends by the second signal.
      SHUTDOWN_DRAIN_SECONDS: '300',
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // A connection kept alive, as a load balancer keeps its own.
      const before = await get(server.url, '/readyz', agent);
      expect(before).toMatchObject({ status: 200, body: '{"status":"ready"}' });
      expect(before.connection).toBe('keep-alive');

      server.child.kill('SIGTERM');
      let stopping: Answer | undefined;
      await vi.waitFor(async () => {
        stopping = await get(server.url, '/readyz', agent);
        expect(stopping.status).toBe(503);
      }, PATIENCE);
      expect(JSON.parse(stopping?.body ?? '')).toEqual({ status: 'stopping' });
      expect(stopping?.connection).toBe('close');

      // Still served, database and all, each on a connection closed once answered.
      for (const path of ['/healthz', '/sign-in', '/api/v1/openapi.json']) {
        const answer = await get(server.url, path, agent);
        expect(answer.status, path).toBe(200);
        expect(answer.connection, path).toBe('close');
        await answer.socketClosed;
      }
      const lines = await server.logsNow();
      expect(lines.some((l) => l.includes('draining: /readyz answers 503 stopping'))).toBe(true);
      expect(lines.some((l) => l.includes('shutting down'))).toBe(false);

      expect(await server.stop()).toBe(0);
      const logs = server.logs().join('\n');
      expect(logs).toContain('draining cut short');
      expect(logs.indexOf('shutting down')).toBeGreaterThan(logs.indexOf('draining cut short'));
      expect(logs).toContain('"msg":"stopped"');
    } finally {
      agent.destroy();
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
  });

  it('ends the drain after SHUTDOWN_DRAIN_SECONDS by itself, then closes and exits 0', async () => {
    const server = await startServer({
      DATABASE_URL: test.databaseUrl,
      DATA_DIR: '/nonexistent',
      SHUTDOWN_DRAIN_SECONDS: '1',
    });
    const signalled = Date.now();
    expect(await server.stop()).toBe(0);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(1_000);
    const logs = server.logs().join('\n');
    const draining = logs.indexOf('draining: /readyz answers 503 stopping');
    expect(draining).toBeGreaterThanOrEqual(0);
    expect(logs.indexOf('shutting down')).toBeGreaterThan(draining);
    expect(logs).not.toContain('draining cut short');
  });
});
