import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { baseEnv, cli, NODE, ROOT } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

/*
 * Webhooks end to end: the real server (PostgreSQL and BullMQ on Redis, and the embedded default
 * without either), a receiving HTTP server on loopback (allowed by OUTBOUND_ALLOW_NETWORKS), the API
 * to register an endpoint and edit an article. A server killed with SIGKILL after the commit delivers
 * after its restart, once; a server killed while its delivery is in flight delivers it again with the
 * same webhook-id (at least once; the receiver deduplicates by it).
 */

type Received = { headers: IncomingHttpHeaders; body: string; at: number };

type Receiver = {
  url: string;
  received: Received[];
  /** How the next requests are answered: a status, or 'hold' (never answered). */
  answers: Array<number | 'hold'>;
  close(): Promise<void>;
};

async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const answers: Array<number | 'hold'> = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      received.push({ headers: req.headers, body, at: Date.now() });
      const answer = answers.shift() ?? 204;
      if (answer === 'hold') return;
      res.writeHead(answer).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    answers,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function until<T>(check: () => T | undefined | false, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}

type Seeded = { account_id: string; api_key: string; sites: Array<{ id: string }> };

async function seed(env: Record<string, string>): Promise<Seeded> {
  const r = await cli(['seed-demo', '--json', '--sites', '1', '--articles', '3', '--backlinks', '2'], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Seeded;
}

function api(server: ServerProcess, key: string) {
  return async (method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> => {
    const res = await fetch(`${server.url}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  };
}

async function firstArticle(
  call: ReturnType<typeof api>,
  siteId: string,
): Promise<{ id: string; revision: number }> {
  const list = await call('GET', `/sites/${siteId}/articles?from=2000-01-01&to=2100-01-01`);
  const [article] = (list.json as { data: Array<{ id: string; revision: number }> }).data;
  if (!article) throw new Error('no article');
  return article;
}

function messages(receiver: Receiver, secret: string) {
  const wh = new Webhook(secret);
  return receiver.received.map((r) => {
    // Throws unless the signature is the endpoint secret's over this very body and id and time.
    wh.verify(r.body, r.headers as Record<string, string>);
    return {
      id: r.headers['webhook-id'],
      ...(JSON.parse(r.body) as { type: string; data: { id: string; revision: number; title: string } }),
    };
  });
}

const fast = {
  OUTBOUND_ALLOW_NETWORKS: '127.0.0.1/32',
  WEBHOOK_RETRY_SCHEDULE: '1,1,1',
  JOBS_LOCK_SECONDS: '2',
};

describe('webhooks on PostgreSQL and Redis', () => {
  let test: TestDatabase;
  let receiver: Receiver;
  let env: Record<string, string>;
  const prefix = `test-wh-e2e-${process.pid}`;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    receiver = await startReceiver();
    env = {
      ...fast,
      DATABASE_URL: test.databaseUrl as string,
      DATA_DIR: '/nonexistent',
      REDIS_URL: TEST_REDIS_URL,
      JOBS_PREFIX: prefix,
    };
  });
  afterAll(async () => {
    await receiver.close();
    await test.drop();
    const redis = new Redis(TEST_REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  it('delivers an edit made before a SIGKILL once, after the restart, signed', async () => {
    const account = await seed(env);
    // Jobs off: the edit commits and nothing sends it, as if the process died right after the commit.
    let server = await startServer({ ...env, RUN_JOBS: 'false' });
    let secret = '';
    try {
      const call = api(server, account.api_key);
      const created = await call('POST', '/webhooks', { url: receiver.url, events: ['article.updated'] });
      expect(created.status).toBe(201);
      secret = (created.json as { secret: string }).secret;
      const article = await firstArticle(call, account.sites[0]?.id as string);
      const edit = await call('PUT', `/articles/${article.id}`, { title: 'Edited before the crash' });
      expect(edit.status).toBe(200);
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.received).toHaveLength(0);
    } finally {
      server.child.kill('SIGKILL');
      await new Promise((r) => server.child.once('exit', r));
    }
    server = await startServer(env);
    try {
      await until(() => receiver.received.length >= 1);
      // Nothing more comes: one delivery per event and endpoint.
      await new Promise((r) => setTimeout(r, 1_500));
      const got = messages(receiver, secret);
      expect(got).toHaveLength(1);
      expect(got[0]).toMatchObject({ type: 'article.updated', data: { title: 'Edited before the crash' } });
      expect(got[0]?.id).toMatch(/\S/);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    receiver.received.length = 0;
  }, 120_000);

  it('sends a delivery cut off by a SIGKILL again after the restart, with the same webhook-id', async () => {
    const account = await seed(env);
    let server = await startServer(env);
    let secret = '';
    try {
      const call = api(server, account.api_key);
      const created = await call('POST', '/webhooks', { url: receiver.url, events: ['article.updated'] });
      secret = (created.json as { secret: string }).secret;
      const article = await firstArticle(call, account.sites[0]?.id as string);
      // The receiver holds the first request open: the server is killed while it is in flight.
      receiver.answers.push('hold');
      await call('PUT', `/articles/${article.id}`, { title: 'In flight' });
      await until(() => receiver.received.length === 1);
    } finally {
      server.child.kill('SIGKILL');
      await new Promise((r) => server.child.once('exit', r));
    }
    server = await startServer(env);
    try {
      await until(() => receiver.received.length >= 2, 60_000);
      const got = messages(receiver, secret);
      expect(got[1]?.id).toBe(got[0]?.id);
      expect(got[1]).toMatchObject({ type: 'article.updated', data: { title: 'In flight' } });
    } finally {
      expect(await server.stop()).toBe(0);
    }
    receiver.received.length = 0;
  }, 120_000);
  it('runs in `npm run worker` apart from an API process that runs no jobs', async () => {
    const account = await seed(env);
    const api1 = await startServer({ ...env, RUN_JOBS: 'false', RUN_WORKERS: 'false' });
    const worker = spawn(NODE, ['apps/worker/main.js'], {
      cwd: ROOT,
      env: { ...baseEnv(), ...env, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    worker.stdout.on('data', (d: Buffer) => {
      output += d.toString();
    });
    worker.stderr.on('data', (d: Buffer) => {
      output += d.toString();
    });
    const exited = new Promise<number | null>((r) => worker.once('exit', (code) => r(code)));
    try {
      await until(() => output.includes('worker running'), 30_000);
      const call = api(api1, account.api_key);
      const created = await call('POST', '/webhooks', { url: receiver.url, events: ['article.updated'] });
      const { secret } = created.json as { secret: string };
      const article = await firstArticle(call, account.sites[0]?.id as string);
      expect((await call('PUT', `/articles/${article.id}`, { title: 'Sent by the worker' })).status).toBe(
        200,
      );
      await until(() => receiver.received.length >= 1);
      expect(messages(receiver, secret)).toMatchObject([
        { type: 'article.updated', data: { title: 'Sent by the worker' } },
      ]);
    } finally {
      worker.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(await api1.stop()).toBe(0);
      receiver.received.length = 0;
    }
  }, 120_000);
});

describe('webhooks on the embedded default (no database server, no Redis)', () => {
  let dataDir: string;
  let receiver: Receiver;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'cs-wh-'));
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('delivers, retries a receiver that fails twice, and keeps log order', async () => {
    const env = { ...fast, DATA_DIR: dataDir };
    const account = await seed(env);
    const server = await startServer(env);
    try {
      const call = api(server, account.api_key);
      const created = await call('POST', '/webhooks', {
        url: receiver.url,
        events: ['article.updated', 'article.featured_image_replaced'],
      });
      expect(created.status).toBe(201);
      const { secret, id } = created.json as { secret: string; id: string };
      const article = await firstArticle(call, account.sites[0]?.id as string);
      receiver.answers.push(500, 503);
      for (const title of ['First', 'Second', 'Third']) {
        const edit = await call('PUT', `/articles/${article.id}`, { title });
        expect(edit.status).toBe(200);
      }
      // The first delivery fails twice and succeeds on its third attempt; the others wait their turn.
      await until(() => receiver.received.length >= 5);
      const got = messages(receiver, secret);
      expect(got.map((m) => m.data.title)).toEqual(['First', 'First', 'First', 'Second', 'Third']);
      expect(new Set(got.slice(0, 3).map((m) => m.id)).size).toBe(1);

      const deliveries = await call('GET', `/webhooks/${id}/deliveries`);
      expect(deliveries.status).toBe(200);
      const first = (deliveries.json as { data: Array<{ status: string; attempts: number }> }).data.at(-1);
      expect(first).toMatchObject({ status: 'succeeded', attempts: 3 });
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 120_000);

  it('publishes a scheduled article at its time, as a revision by the scheduler, and says so', async () => {
    const env = { ...fast, DATA_DIR: dataDir };
    const account = await seed(env);
    const siteId = account.sites[0]?.id as string;
    // The webhook first: the publication is sent to it whether the server is up at the article's
    // time or starts after it (the scheduler then publishes at once).
    const before = await startServer(env);
    let secret: string;
    try {
      const created = await api(before, account.api_key)('POST', '/webhooks', {
        url: receiver.url,
        events: ['article.published'],
      });
      expect(created.status).toBe(201);
      ({ secret } = created.json as { secret: string });
    } finally {
      expect(await before.stop()).toBe(0);
    }
    const at = new Date(Date.now() + 2_000);
    const file = join(dataDir, 'scheduled.jsonl');
    await writeFile(
      file,
      `${JSON.stringify({
        account_id: account.account_id,
        site_id: siteId,
        title: 'Spring boiler checks',
        body: '<p>Book a check before the cold returns.</p>',
        url: 'https://example.com/spring-boiler-checks',
        status: 'scheduled',
        published_at: at.toISOString(),
      })}\n`,
    );
    const ingested = await cli(['ingest', 'articles', '--file', file], env);
    expect(ingested.code, ingested.stderr).toBe(0);
    receiver.received.length = 0;
    const server = await startServer(env);
    try {
      const call = api(server, account.api_key);
      await until(() => receiver.received.length >= 1, 40_000);
      expect(Date.now()).toBeGreaterThanOrEqual(at.getTime());
      const [published] = messages(receiver, secret);
      expect(published).toMatchObject({ type: 'article.published', data: { title: 'Spring boiler checks' } });
      const articleId = published?.data.id as string;
      const revisions = await call('GET', `/articles/${articleId}/revisions`);
      const last = (
        revisions.json as { data: Array<{ origin: string; actor: { type: string; id: string } }> }
      ).data[0];
      expect(last).toMatchObject({ origin: 'rewrite', actor: { type: 'system', id: 'scheduler' } });
      await new Promise((r) => setTimeout(r, 1_000));
      expect(receiver.received).toHaveLength(1);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 120_000);
});
