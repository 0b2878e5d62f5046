import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../apps/server/app.ts';
import { newApiKey } from '../../infra/ids.ts';
import { createTestRuntime } from '../support/runtime.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * The app's own log through a stream, as a test gives it: whatever a request carries of the service's
 * keys and tokens (a query value under any name, a path segment, a header), no line holds it.
 */

const lines: string[] = [];
let app: FastifyInstance;
let drop: () => Promise<void>;

beforeAll(async () => {
  const test = await createTestRuntime('postgres');
  drop = test.drop;
  app = await buildApp({
    runtime: test.runtime,
    config: { PUBLIC_URL: 'http://cs.example.test', LOG_LEVEL: 'info', MEDIA_DIR: '/tmp/cs-log-test' },
    logger: { level: 'info', stream: { write: (line: string) => void lines.push(line) } },
  });
});

afterAll(async () => {
  await app?.close();
  await drop?.();
});

describe('the access log', () => {
  it('holds no key or token of the request, wherever it was put', async () => {
    const key = newApiKey().key;
    const token = randomBytes(32).toString('base64url');
    const requests = [
      { url: `/api/v1/sites?q=${key}&page=2`, headers: {} },
      { url: `/api/v1/sites/${token}`, headers: { 'x-whatever': key } },
      { url: `/no/such/page/${key}?again=${token}`, headers: {} },
      { url: `/oauth/interaction/${token}`, headers: { authorization: `Bearer ${key}` } },
      { url: `/sign-in?return_to=/x/${token}`, headers: { cookie: `cs_session=${token}` } },
    ];
    for (const r of requests) {
      const res = await app.inject({ method: 'GET', url: r.url, headers: r.headers });
      const id = String(res.headers['x-request-id']);
      await expect
        .poll(() => lines.some((l) => l.includes(id) && l.includes('request completed')), PATIENCE)
        .toBe(true);
    }
    const logged = lines.join('\n');
    expect(logged).not.toContain(key);
    expect(logged).not.toContain(key.slice(8, 30));
    expect(logged).not.toContain(token);
    expect(logged).toContain('page=2');
    expect(logged).toContain('/api/v1/sites/[redacted]');
  });
});
