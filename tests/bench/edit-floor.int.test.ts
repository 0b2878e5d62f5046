import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import { buildEditFloor } from '../../bench/floor.ts';
import { addSiteWithArticle, createTestRuntime, setUpAccount } from '../support/runtime.ts';

/*
 * The edit's floor (bench/floor.ts), which the write benchmark measures the real PUT against: the same
 * edit, stored as the real route stores it, answered with the same fields, without the API around it.
 */

let app: FastifyInstance;
let floor: FastifyInstance;
let runtime: Runtime;
let drop: () => Promise<void>;

beforeAll(async () => {
  ({ runtime, drop } = await createTestRuntime('postgres'));
  app = await buildApp({
    runtime,
    config: {
      PUBLIC_URL: 'http://cs.example.test',
      LOG_LEVEL: 'silent',
      MEDIA_DIR: '/tmp/cs-edit-floor-test',
    },
    logger: false,
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await floor?.close();
  await drop?.();
});

it('makes a revision as the real PUT does and answers the same fields, the same article', async () => {
  const { accountId } = await setUpAccount(runtime);
  const { articleId } = await addSiteWithArticle(runtime, accountId);
  const { key } = await runtime.commands.createApiKey(accountId, { name: 'Test key', scope: 'write' });
  floor = await buildEditFloor(runtime, { accountId });

  const real = await app.inject({
    method: 'PUT',
    url: `/api/v1/articles/${articleId}`,
    headers: { authorization: `Bearer ${key}` },
    payload: { title: 'Through the API' },
  });
  expect(real.statusCode).toBe(200);
  const viaFloor = await floor.inject({
    method: 'PUT',
    url: `/floor/articles/${articleId}`,
    payload: { title: 'Through the floor' },
  });
  expect(viaFloor.statusCode).toBe(200);

  const a = real.json() as Record<string, unknown>;
  const b = viaFloor.json() as Record<string, unknown>;
  expect(Object.keys(b)).toEqual(Object.keys(a));
  expect(b).toMatchObject({ id: articleId, title: 'Through the floor', revision: 3, changed: true });
  const { title: _a, revision: _ra, updated_at: _ua, ...restReal } = a;
  const { title: _b, revision: _rb, updated_at: _ub, ...restFloor } = b;
  expect(restFloor).toEqual(restReal);

  // Stored as any edit is: the article reads back at the floor's revision, with its title.
  const read = await app.inject({
    method: 'GET',
    url: `/api/v1/articles/${articleId}`,
    headers: { authorization: `Bearer ${key}` },
  });
  expect(read.json()).toMatchObject({ title: 'Through the floor', revision: 3 });
});

it("answers another account's article as not found, changing nothing", async () => {
  const { accountId } = await setUpAccount(runtime);
  const { articleId } = await addSiteWithArticle(runtime, accountId);
  const { accountId: other } = await setUpAccount(runtime, 'Other Ltd');
  const otherFloor = await buildEditFloor(runtime, { accountId: other });
  try {
    const res = await otherFloor.inject({
      method: 'PUT',
      url: `/floor/articles/${articleId}`,
      payload: { title: 'Not mine' },
    });
    expect(res.statusCode).not.toBe(200);
  } finally {
    await otherFloor.close();
  }
  const { key } = await runtime.commands.createApiKey(accountId, { name: 'Test key', scope: 'read' });
  const read = await app.inject({
    method: 'GET',
    url: `/api/v1/articles/${articleId}`,
    headers: { authorization: `Bearer ${key}` },
  });
  expect(read.json()).toMatchObject({ title: 'Boiler care', revision: 1 });
});
