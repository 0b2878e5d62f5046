import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { createHeavyWork, HEAVY_BODY_BYTES, HEAVY_BUSY_DETAIL } from '../../apps/server/http/heavy-work.ts';
import { loadOpenApi, validateResponse } from '../support/openapi.ts';
import { addSiteWithArticle, createTestRuntime, setUpAccount } from '../support/runtime.ts';

/*
 * A large write that finds no turn for heavy work (docs/operations.md "Large requests") is a 503
 * `unavailable` with Retry-After, as the OpenAPI document describes it, and changes nothing.
 */

let app: FastifyInstance;
let runtime: Runtime;
let drop: () => Promise<void>;

beforeAll(async () => {
  ({ runtime, drop } = await createTestRuntime('postgres'));
  app = await buildApp({
    runtime,
    config: { PUBLIC_URL: 'http://cs.example.test', LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-heavy-test' },
    logger: false,
    heavy: createHeavyWork({ atOnce: 0, waiting: 0 }),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await drop?.();
});

it('answers a large edit with 503 unavailable and Retry-After, as documented, and keeps the article as it was', async () => {
  const { accountId } = await setUpAccount(runtime);
  const { articleId } = await addSiteWithArticle(runtime, accountId);
  const { key } = await runtime.commands.createApiKey(accountId, { name: 'Test key', scope: 'write' });
  const address = app.server.address() as { port: number };
  const base = `http://127.0.0.1:${address.port}`;
  const path = `/api/v1/articles/${articleId}`;
  const res = await fetch(`${base}${path}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ body: `<p>${'word '.repeat(HEAVY_BODY_BYTES / 5)}</p>` }),
  });
  const body = (await res.json()) as { code: string; detail: string };
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBe('1');
  expect(body).toMatchObject({ code: 'unavailable', detail: HEAVY_BUSY_DETAIL });
  const doc = await loadOpenApi(base);
  expect(
    validateResponse(doc, { method: 'PUT', path, status: res.status, headers: res.headers, body }),
  ).toEqual([]);

  const article = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } });
  expect(((await article.json()) as { revision: number }).revision).toBe(1);
});
