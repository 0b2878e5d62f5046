import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { type Recorded, recordingClient } from '../support/http.ts';
import { loadOpenApi, type OpenApiDoc, validateResponse } from '../support/openapi.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * The webhook routes of CONTRACT "Webhooks" over HTTP against a real server: statuses, the secret
 * shown once, the read-only key refused, tenancy, the limit of 10, deliveries (rows inserted here as
 * the delivery engine writes them) and redelivery, the activity log; every answer checked against the
 * OpenAPI document, which lists the routes.
 */

type Seed = { account_id: string; api_key: string };
type Json = Record<string, unknown>;
type Endpoint = {
  id: string;
  url: string;
  enabled: boolean;
  disabled_reason: string | null;
  secret?: string;
};
type Problem = { status: number; code: string; detail: string; errors?: { in: string; name: string }[] };

async function seedAccount(env: Record<string, string>): Promise<Seed> {
  const r = await cli(['seed-demo', '--json', '--sites', '1', '--articles', '1', '--backlinks', '0'], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Seed;
}

const PATHS: [template: string, methods: string[]][] = [
  ['/api/v1/webhooks', ['get', 'post']],
  ['/api/v1/webhooks/{id}', ['delete', 'get', 'patch']],
  ['/api/v1/webhooks/{id}/deliveries', ['get']],
  ['/api/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver', ['post']],
  ['/api/v1/webhooks/{id}/replay', ['post']],
];

describe('webhook API v1 through a real server', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let server: ServerProcess;
  let client: ReturnType<typeof recordingClient>;
  let doc: OpenApiDoc;
  let a: Seed;
  let b: Seed;
  let readKey: string;

  const hook = { url: 'https://hooks.example.com/content', events: ['article.published'] };
  const create = (body: unknown, key = a.api_key) => client.call('POST', '/api/v1/webhooks', { key, body });
  const patch = (id: string, body: unknown, key = a.api_key) =>
    client.call('PATCH', `/api/v1/webhooks/${id}`, { key, body });

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    env = { DATABASE_URL: db.databaseUrl as string };
    a = await seedAccount(env);
    b = await seedAccount(env);
    readKey = (
      JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--scope', 'read'], env)).stdout,
      ) as {
        api_key: string;
      }
    ).api_key;
    server = await startServer({
      ...env,
      RATE_LIMIT_PER_MINUTE: '100000',
      OUTBOUND_ALLOW_NETWORKS: '10.20.0.0/16',
    });
    client = recordingClient(server.url);
    doc = await loadOpenApi(server.url);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('lists every webhook route in the OpenAPI document, write keys only', () => {
    for (const [template, methods] of PATHS) {
      const item = doc.paths[template] as Record<string, Json> | undefined;
      expect(item, template).toBeDefined();
      expect(Object.keys(item ?? {}).sort(), template).toEqual(methods);
      for (const method of methods) {
        const op = item?.[method] as Json;
        expect(op.tags, `${method} ${template}`).toEqual(['webhooks']);
        expect(op.summary).toEqual(expect.any(String));
        expect(op.operationId).toEqual(expect.any(String));
        expect(op.security).toEqual([{ bearerAuth: [] }, { apiKey: [] }]);
        expect(Object.keys(op.responses as Json)).toEqual(expect.arrayContaining(['401', '403', '429']));
      }
    }
    const responses = (path: string, method: string) =>
      Object.keys(((doc.paths[path]?.[method] ?? {}) as Json).responses as Json).sort();
    expect(responses('/api/v1/webhooks', 'post')).toEqual([
      '201',
      '400',
      '401',
      '403',
      '409',
      '413',
      '415',
      '429',
      '500',
      '503',
    ]);
    expect(responses('/api/v1/webhooks/{id}', 'delete')).toEqual([
      '204',
      '400',
      '401',
      '403',
      '404',
      '429',
      '500',
      '503',
    ]);
    expect(responses('/api/v1/webhooks/{id}/replay', 'post')).toContain('202');
    const schemas = (doc.components as Record<string, Record<string, Json>>).schemas ?? {};
    expect(Object.keys(schemas)).toEqual(
      expect.arrayContaining(['WebhookEndpoint', 'NewWebhookEndpoint', 'WebhookDelivery', 'WebhookReplay']),
    );
    // The secret is in the answer that creates an endpoint only.
    expect((schemas.NewWebhookEndpoint?.required as string[]) ?? []).toContain('secret');
    expect(Object.keys((schemas.WebhookEndpoint?.properties as Json) ?? {})).not.toContain('secret');
  });

  it('registers, lists, reads, disables, enables and deletes an endpoint', async () => {
    const created = await create({ ...hook, description: 'Team chat' });
    expect(created.status).toBe(201);
    const endpoint = created.body as Endpoint;
    expect(endpoint).toMatchObject({
      url: hook.url,
      events: hook.events,
      description: 'Team chat',
      enabled: true,
      disabled_reason: null,
    });
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);

    const list = await client.get('/api/v1/webhooks', a.api_key);
    expect(list.status).toBe(200);
    expect(list.headers.link).toContain('rel="self"');
    expect((list.body as { data: Endpoint[] }).data.map((e) => e.id)).toContain(endpoint.id);
    const one = await client.get(`/api/v1/webhooks/${endpoint.id}`, a.api_key);
    expect(one.status).toBe(200);
    const { secret: _secret, ...shown } = endpoint;
    expect(one.body).toEqual(shown);
    // The secret never shows again.
    expect(JSON.stringify([list.body, one.body])).not.toContain(endpoint.secret);

    const off = await patch(endpoint.id, { enabled: false });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({
      enabled: false,
      disabled_reason: 'account',
      disabled_at: expect.any(String),
    });
    const on = await patch(endpoint.id, { enabled: true, description: null });
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({
      enabled: true,
      disabled_reason: null,
      disabled_at: null,
      description: null,
    });

    const gone = await client.call('DELETE', `/api/v1/webhooks/${endpoint.id}`, { key: a.api_key });
    expect(gone.status).toBe(204);
    expect(gone.body).toBe('');
    expect((await client.get(`/api/v1/webhooks/${endpoint.id}`, a.api_key)).status).toBe(404);
    expect((await client.call('DELETE', `/api/v1/webhooks/${endpoint.id}`, { key: a.api_key })).status).toBe(
      404,
    );
  });

  it('refuses bad input with 400 naming the field, and changes nothing', async () => {
    const before = ((await client.get('/api/v1/webhooks', a.api_key)).body as { meta: { total: number } })
      .meta.total;
    const name = async (r: Promise<Recorded>): Promise<string> => {
      const res = await r;
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      const problem = res.body as Problem;
      expect(problem.code).toBe('invalid_request');
      return problem.errors?.map((e) => `${e.in}:${e.name}`).join(',') ?? '';
    };
    expect(await name(create({ ...hook, url: 'http://hooks.example.com/' }))).toBe('body:url');
    expect(await name(create({ ...hook, url: 'https://127.0.0.1/hook' }))).toBe('body:url');
    expect(await name(create({ ...hook, url: 'https://me:pw@hooks.example.com/' }))).toBe('body:url');
    expect(await name(create({ ...hook, events: [] }))).toBe('body:events');
    expect(await name(create({ ...hook, events: ['report.ready', 'report.ready'] }))).toBe('body:events');
    expect(await name(create({ ...hook, events: ['article.deleted'] }))).toBe('body:events.0');
    expect(await name(create({ ...hook, description: 'd'.repeat(501) }))).toBe('body:description');
    expect(await name(create({ ...hook, secret: 'whsec_mine' }))).toBe('body:secret');
    expect(await name(create({ events: hook.events }))).toBe('body:url');
    expect(
      ((await client.get('/api/v1/webhooks', a.api_key)).body as { meta: { total: number } }).meta.total,
    ).toBe(before);
    // Inside OUTBOUND_ALLOW_NETWORKS http is accepted.
    const internal = await create({ ...hook, url: 'http://10.20.0.7:8080/hook' });
    expect(internal.status).toBe(201);

    const id = (internal.body as Endpoint).id;
    expect(await name(patch(id, {}))).toBe('body:url');
    expect(await name(patch(id, { enabled: 'yes' }))).toBe('body:enabled');
    expect(await name(patch(id, { url: 'ftp://hooks.example.com/' }))).toBe('body:url');
    const replay = (from: unknown) =>
      client.call('POST', `/api/v1/webhooks/${id}/replay`, { key: a.api_key, body: { from } });
    expect(await name(replay('2026-11-01'))).toBe('body:from');
    expect(await name(replay('3026-11-01T00:00:00Z'))).toBe('body:from');
    expect(await name(client.get(`/api/v1/webhooks/${id}/deliveries?per_page=101`, a.api_key))).toBe(
      'query:per_page',
    );
    expect((await client.call('DELETE', `/api/v1/webhooks/${id}`, { key: a.api_key })).status).toBe(204);
  });

  it('refuses a read-only key with 403, reads included, and no key with 401', async () => {
    const endpoint = (await create(hook)).body as Endpoint;
    const refused: Recorded[] = [
      await create(hook, readKey),
      await client.get('/api/v1/webhooks', readKey),
      await client.get(`/api/v1/webhooks/${endpoint.id}`, readKey),
      await patch(endpoint.id, { enabled: false }, readKey),
      await client.call('DELETE', `/api/v1/webhooks/${endpoint.id}`, { key: readKey }),
      await client.get(`/api/v1/webhooks/${endpoint.id}/deliveries`, readKey),
      await client.call('POST', `/api/v1/webhooks/${endpoint.id}/replay`, {
        key: readKey,
        body: { from: '2026-11-01T00:00:00Z' },
      }),
    ];
    expect(refused.map((r) => [r.status, (r.body as Problem).code])).toEqual(
      refused.map(() => [403, 'insufficient_scope']),
    );
    const anonymous = await client.get('/api/v1/webhooks');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(((await client.get(`/api/v1/webhooks/${endpoint.id}`, a.api_key)).body as Endpoint).enabled).toBe(
      true,
    );
    expect((await client.call('DELETE', `/api/v1/webhooks/${endpoint.id}`, { key: a.api_key })).status).toBe(
      204,
    );
  });

  it("answers another account's endpoint with 404, as one that does not exist", async () => {
    const theirs = (await create(hook, b.api_key)).body as Endpoint;
    const mine: Recorded[] = [
      await client.get(`/api/v1/webhooks/${theirs.id}`, a.api_key),
      await patch(theirs.id, { enabled: false }),
      await client.call('DELETE', `/api/v1/webhooks/${theirs.id}`, { key: a.api_key }),
      await client.get(`/api/v1/webhooks/${theirs.id}/deliveries`, a.api_key),
      await client.call('POST', `/api/v1/webhooks/${theirs.id}/deliveries/dlv_x/redeliver`, {
        key: a.api_key,
      }),
      await client.call('POST', `/api/v1/webhooks/${theirs.id}/replay`, {
        key: a.api_key,
        body: { from: '2026-11-01T00:00:00Z' },
      }),
      await client.get('/api/v1/webhooks/whe_nope', a.api_key),
    ];
    expect(mine.map((r) => [r.status, (r.body as Problem).code])).toEqual(mine.map(() => [404, 'not_found']));
    expect((mine[0] as Recorded).body as Problem).toMatchObject({
      detail: `No webhook endpoint ${theirs.id}`,
    });
    expect((mine[6] as Recorded).body as Problem).toMatchObject({ detail: 'No webhook endpoint whe_nope' });
    expect(((await client.get(`/api/v1/webhooks/${theirs.id}`, b.api_key)).body as Endpoint).enabled).toBe(
      true,
    );
  });

  it('refuses an eleventh endpoint with 409 conflict', async () => {
    const c = await seedAccount(env);
    for (let i = 0; i < 10; i++) {
      expect((await create({ ...hook, url: `https://hooks.example.com/${i}` }, c.api_key)).status).toBe(201);
    }
    const eleventh = await create(hook, c.api_key);
    expect(eleventh.status).toBe(409);
    expect(eleventh.body).toMatchObject({
      code: 'conflict',
      detail: expect.stringMatching(/10 webhook endpoints/),
    });
    const list = await client.get('/api/v1/webhooks?per_page=4&page=3', c.api_key);
    expect(list.body).toMatchObject({ meta: { page: 3, per_page: 4, total: 10, total_pages: 3 } });
    expect((list.body as { data: unknown[] }).data).toHaveLength(2);
  });

  it('lists deliveries with their attempts and redelivers one (202)', async () => {
    const endpoint = (await create(hook)).body as Endpoint;
    const payload = { id: 'evt-1', type: 'article.published', created_at: '2026-11-02T09:30:00Z', data: {} };
    await db.handle.db
      .insertInto('webhook_deliveries')
      .values({
        id: 'dlv_e2e_1',
        endpoint_id: endpoint.id,
        account_id: a.account_id,
        event_id: 'evt-1',
        event_type: 'article.published',
        payload: JSON.stringify(payload),
        source: 'live',
        source_id: null,
        status: 'failed',
        attempts: 2,
        next_attempt_at: new Date('2026-11-02T09:35:00Z'),
        last_attempt_at: new Date('2026-11-02T09:35:00Z'),
        last_status_code: 500,
        last_duration_ms: 120,
        last_error: 'HTTP 500',
        delivered_at: null,
        created_at: new Date('2026-11-02T09:30:00Z'),
      })
      .execute();
    await db.handle.db
      .insertInto('webhook_attempts')
      .values([
        {
          delivery_id: 'dlv_e2e_1',
          attempt: 1,
          at: new Date('2026-11-02T09:30:00Z'),
          status_code: null,
          duration_ms: 10_000,
          error: 'timed out',
        },
        {
          delivery_id: 'dlv_e2e_1',
          attempt: 2,
          at: new Date('2026-11-02T09:35:00Z'),
          status_code: 500,
          duration_ms: 120,
          error: 'HTTP 500',
        },
      ])
      .execute();
    const list = await client.get(`/api/v1/webhooks/${endpoint.id}/deliveries`, a.api_key);
    expect(list.status).toBe(200);
    expect((list.body as { data: Json[] }).data).toEqual([
      expect.objectContaining({
        id: 'dlv_e2e_1',
        status: 'failed',
        last_status_code: 500,
        attempt_log: [
          { attempt: 2, at: '2026-11-02T09:35:00Z', status_code: 500, duration_ms: 120, error: 'HTTP 500' },
          {
            attempt: 1,
            at: '2026-11-02T09:30:00Z',
            status_code: null,
            duration_ms: 10_000,
            error: 'timed out',
          },
        ],
      }),
    ]);

    const again = await client.call(
      'POST',
      `/api/v1/webhooks/${endpoint.id}/deliveries/dlv_e2e_1/redeliver`,
      {
        key: a.api_key,
      },
    );
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({
      source: 'redelivery',
      status: 'pending',
      event_id: 'evt-1',
      attempts: 0,
    });
    const row = await db.handle.db
      .selectFrom('webhook_deliveries')
      .select(['source_id', 'payload'])
      .where('id', '=', (again.body as { id: string }).id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ source_id: 'dlv_e2e_1', payload });
    const missing = await client.call(
      'POST',
      `/api/v1/webhooks/${endpoint.id}/deliveries/dlv_nope/redeliver`,
      {
        key: a.api_key,
      },
    );
    expect(missing.status).toBe(404);
  });

  it('replays from a time: 202 with the replay id and how many deliveries it queued', async () => {
    // The seeded account's one article was created before the endpoint: live delivery skips it, a
    // replay from before it queues it.
    const c = await seedAccount(env);
    const endpoint = (
      await create({ url: 'https://hooks.example.com/replay', events: ['article.created'] }, c.api_key)
    ).body as { id: string };
    const replayed = await client.call('POST', `/api/v1/webhooks/${endpoint.id}/replay`, {
      key: c.api_key,
      body: { from: '2000-01-01T00:00:00Z' },
    });
    expect(replayed.status).toBe(202);
    expect(replayed.body).toEqual({ replay_id: expect.stringMatching(/^rpl_/), queued: 1 });
    const deliveries = await client.call('GET', `/api/v1/webhooks/${endpoint.id}/deliveries`, {
      key: c.api_key,
    });
    expect((deliveries.body as { data: Array<{ source: string; event_type: string }> }).data).toEqual([
      expect.objectContaining({ source: 'replay', event_type: 'article.created' }),
    ]);
    // From after every event: nothing to queue.
    const none = await client.call('POST', `/api/v1/webhooks/${endpoint.id}/replay`, {
      key: c.api_key,
      body: { from: new Date().toISOString() },
    });
    expect(none.body).toMatchObject({ queued: 0 });
  });

  it('declares Idempotency-Key on POST, PATCH and DELETE, and Idempotent-Replayed on their answers', () => {
    const operation = (path: string, method: string) => (doc.paths[path]?.[method] ?? {}) as Json;
    for (const [path, method, status] of [
      ['/api/v1/webhooks', 'post', '201'],
      ['/api/v1/webhooks/{id}', 'patch', '200'],
      ['/api/v1/webhooks/{id}', 'delete', '204'],
    ] as const) {
      const op = operation(path, method);
      expect(op.parameters, `${method} ${path}`).toEqual(
        expect.arrayContaining([expect.objectContaining({ in: 'header', name: 'idempotency-key' })]),
      );
      const answer = (op.responses as Record<string, Json>)[status] as { headers?: Json };
      expect(Object.keys(answer.headers ?? {}), `${method} ${path}`).toContain('Idempotent-Replayed');
    }
  });

  describe('with an Idempotency-Key', () => {
    const keyed = (method: string, path: string, key: string, body?: unknown, apiKey = a.api_key) =>
      client.call(method, path, {
        key: apiKey,
        headers: { 'idempotency-key': key },
        ...(body === undefined ? {} : { body }),
      });
    const total = async (apiKey = a.api_key): Promise<number> =>
      ((await client.get('/api/v1/webhooks', apiKey)).body as { meta: { total: number } }).meta.total;
    const refusedKey = (r: Recorded): unknown => [
      r.status,
      (r.body as Problem).code,
      (r.body as Problem).errors?.map((e) => `${e.in}:${e.name}`),
    ];

    it('registers once: a retry gets the first answer, secret included, and no second endpoint', async () => {
      const before = await total();
      const body = { ...hook, description: 'Registered once' };
      const first = await keyed('POST', '/api/v1/webhooks', 'register-1', body);
      expect(first.status).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const again = await keyed('POST', '/api/v1/webhooks', 'register-1', body);
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expect((again.body as Endpoint).secret).toMatch(/^whsec_/);
      expect(await total()).toBe(before + 1);

      // The same key with another request: refused, nothing made.
      const other = await keyed('POST', '/api/v1/webhooks', 'register-1', {
        ...body,
        description: 'Another',
      });
      expect(refusedKey(other)).toEqual([400, 'invalid_request', ['header:idempotency-key']]);
      expect(await total()).toBe(before + 1);
      // The key is the account's: another account may use the same one for its own endpoint.
      const theirs = await keyed('POST', '/api/v1/webhooks', 'register-1', body, b.api_key);
      expect(theirs.status).toBe(201);
      expect((theirs.body as Endpoint).id).not.toBe((first.body as Endpoint).id);
      expect(
        (await client.call('DELETE', `/api/v1/webhooks/${(theirs.body as Endpoint).id}`, { key: b.api_key }))
          .status,
      ).toBe(204);
      expect(
        (await client.call('DELETE', `/api/v1/webhooks/${(first.body as Endpoint).id}`, { key: a.api_key }))
          .status,
      ).toBe(204);
    });

    it('registers once when two requests with the key arrive at once', async () => {
      const before = await total();
      const body = { ...hook, description: 'Raced' };
      const answers = await Promise.all(
        Array.from({ length: 4 }, () => keyed('POST', '/api/v1/webhooks', 'register-race', body)),
      );
      expect(answers.map((r) => r.status)).toEqual([201, 201, 201, 201]);
      const ids = new Set(answers.map((r) => (r.body as Endpoint).id));
      expect(ids.size).toBe(1);
      expect(new Set(answers.map((r) => (r.body as Endpoint).secret)).size).toBe(1);
      expect(answers.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(3);
      expect(await total()).toBe(before + 1);
      expect(
        (await client.call('DELETE', `/api/v1/webhooks/${[...ids][0]}`, { key: a.api_key })).status,
      ).toBe(204);
    });

    it('registers anew with a key older than 24 hours', async () => {
      const first = await keyed('POST', '/api/v1/webhooks', 'register-old', hook);
      expect(first.status).toBe(201);
      await db.handle.db
        .updateTable('idempotency_keys')
        .set({ created_at: new Date(Date.now() - 25 * 3600_000) })
        .where('account_id', '=', a.account_id)
        .where('key', '=', 'register-old')
        .execute();
      const later = await keyed('POST', '/api/v1/webhooks', 'register-old', hook);
      expect(later.status).toBe(201);
      expect(later.headers['idempotent-replayed']).toBeUndefined();
      expect((later.body as Endpoint).id).not.toBe((first.body as Endpoint).id);
      for (const r of [first, later]) {
        expect(
          (await client.call('DELETE', `/api/v1/webhooks/${(r.body as Endpoint).id}`, { key: a.api_key }))
            .status,
        ).toBe(204);
      }
    });

    it('changes once: a retry gets the first answer and changes nothing, even after another change', async () => {
      const endpoint = (await create(hook)).body as Endpoint;
      const path = `/api/v1/webhooks/${endpoint.id}`;
      const off = await keyed('PATCH', path, 'change-1', { enabled: false });
      expect(off.status).toBe(200);
      expect(off.headers['idempotent-replayed']).toBeUndefined();
      expect(off.body).toMatchObject({ enabled: false, disabled_reason: 'account' });
      // Enabled again, without the key; then the retry of the first change.
      expect((await patch(endpoint.id, { enabled: true })).status).toBe(200);
      const again = await keyed('PATCH', path, 'change-1', { enabled: false });
      expect(again.status).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(off.body);
      expect(((await client.get(path, a.api_key)).body as Endpoint).enabled).toBe(true);

      const other = await keyed('PATCH', path, 'change-1', { enabled: false, description: 'x' });
      expect(refusedKey(other)).toEqual([400, 'invalid_request', ['header:idempotency-key']]);
      expect(
        ((await client.get(path, a.api_key)).body as Endpoint & { description: unknown }).description,
      ).toBeNull();
      // A refusal keeps nothing: the key is free for the request it then names.
      const missing = await keyed('PATCH', '/api/v1/webhooks/whe_nope', 'change-2', { enabled: false });
      expect(missing.status).toBe(404);
      expect((await keyed('PATCH', path, 'change-2', { enabled: false })).status).toBe(200);
      expect((await client.call('DELETE', path, { key: a.api_key })).status).toBe(204);
    });

    it('deletes once: a retry is answered 204 again, not 404', async () => {
      const endpoint = (await create(hook)).body as Endpoint;
      const other = (await create({ ...hook, url: 'https://hooks.example.com/other' })).body as Endpoint;
      const path = `/api/v1/webhooks/${endpoint.id}`;
      const gone = await keyed('DELETE', path, 'delete-1');
      expect(gone.status).toBe(204);
      expect(gone.headers['idempotent-replayed']).toBeUndefined();
      const again = await keyed('DELETE', path, 'delete-1');
      expect(again.status).toBe(204);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe('');
      expect((await client.get(path, a.api_key)).status).toBe(404);
      // The same key for another endpoint's deletion: refused, that one left as it was.
      const elsewhere = await keyed('DELETE', `/api/v1/webhooks/${other.id}`, 'delete-1');
      expect(refusedKey(elsewhere)).toEqual([400, 'invalid_request', ['header:idempotency-key']]);
      expect((await client.get(`/api/v1/webhooks/${other.id}`, a.api_key)).status).toBe(200);
      expect((await client.call('DELETE', `/api/v1/webhooks/${other.id}`, { key: a.api_key })).status).toBe(
        204,
      );
    });

    it('changes and deletes once when requests with the key arrive at once', async () => {
      const endpoint = (await create(hook)).body as Endpoint;
      const path = `/api/v1/webhooks/${endpoint.id}`;
      const changes = await Promise.all(
        Array.from({ length: 4 }, () => keyed('PATCH', path, 'change-race', { description: 'Raced' })),
      );
      expect(changes.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      for (const r of changes) expect(r.body).toEqual(changes[0]?.body);
      expect(changes.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(3);
      // A deletion that finds the endpoint gone because the first request deleted it meanwhile: a replay.
      const deletions = await Promise.all(
        Array.from({ length: 4 }, () => keyed('DELETE', path, 'delete-race')),
      );
      expect(deletions.map((r) => r.status)).toEqual([204, 204, 204, 204]);
      expect(deletions.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(3);
      expect((await client.get(path, a.api_key)).status).toBe(404);
    });
  });

  it('records every webhook call in the activity log under its operation', async () => {
    const marker = `wh-${Date.now()}`;
    await client.call('GET', '/api/v1/webhooks', { key: a.api_key, headers: { 'x-request-id': marker } });
    const operations = await vi.waitFor(async () => {
      const page = (await client.get('/api/v1/activity?per_page=100', a.api_key)).body as {
        data: { operation: string; client_request_id: string; site_id: string | null; status: number }[];
      };
      const record = page.data.find((r) => r.client_request_id === marker);
      expect(record).toMatchObject({ operation: 'list_webhooks', site_id: null, status: 200 });
      return page.data.map((r) => r.operation);
    }, PATIENCE);
    expect(operations).toEqual(
      expect.arrayContaining([
        'create_webhook',
        'list_webhooks',
        'get_webhook',
        'update_webhook',
        'delete_webhook',
        'list_webhook_deliveries',
        'redeliver_webhook',
      ]),
    );
  });

  it('answers as the OpenAPI document says, every time', () => {
    const webhookCalls = client.recorded.filter((r) => r.path.startsWith('/api/v1/webhooks'));
    expect(new Set(webhookCalls.map((r) => r.status))).toEqual(
      new Set([200, 201, 202, 204, 400, 401, 403, 404, 409]),
    );
    expect(client.recorded.flatMap((r) => validateResponse(doc, r))).toEqual([]);
  });
});
