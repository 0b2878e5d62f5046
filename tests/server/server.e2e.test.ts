import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { NODE, run } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { TEST_REDIS_URL } from '../support/services.ts';
import { PATIENCE } from '../support/wait.ts';

describe('server on the embedded default', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'cs-server-'));
  });
  afterAll(async () => rm(dataDir, { recursive: true, force: true }));

  it('serves with no database server, answers health and readiness, and stops cleanly on SIGTERM', async () => {
    const server = await startServer({ DATA_DIR: dataDir });
    try {
      const health = await fetch(`${server.url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      expect(health.headers.get('x-request-id')).toMatch(/^req_/);

      const ready = await fetch(`${server.url}/readyz`, { headers: { 'x-request-id': 'probe-1' } });
      expect(ready.status).toBe(200);
      expect(ready.headers.get('x-request-id')).toMatch(/^req_/);
      const body = (await ready.json()) as {
        status: string;
        checks: {
          database: { kind: string };
          migrations: { pending: string[] };
          projections: { name: string; lag: number }[];
          jobs: { ok: boolean; kind: string; queues: { queue: string; waiting: number }[] };
        };
      };
      expect(body.status).toBe('ready');
      expect(body.checks.database.kind).toBe('pglite');
      expect(body.checks.jobs).toMatchObject({ ok: true, kind: 'in-process' });
      expect(body.checks.jobs.queues.map((q) => q.queue)).toEqual(['webhooks', 'publishing', 'maintenance']);
      expect(body.checks.migrations.pending).toEqual([]);
      expect(body.checks.projections.map((p) => p.name)).toContain('site_stats@1');

      const missing = await fetch(`${server.url}/nope`);
      expect(missing.status).toBe(404);
      expect(missing.headers.get('content-type')).toContain('application/problem+json');
      expect(await missing.json()).toMatchObject({ status: 404, code: 'not_found' });
    } finally {
      expect(await server.stop()).toBe(0);
    }
    const logs = server
      .logs()
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg?: string });
    expect(logs.some((l) => l.msg === 'stopped')).toBe(true);
  });

  it('refuses to start on a bad variable, with one line that names it', async () => {
    const r = await run(NODE, ['apps/server/main.ts'], { DATA_DIR: dataDir, PORT: 'eighty' });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('Invalid configuration: PORT="eighty": expected a port number');
  });
});

describe('server on PostgreSQL', () => {
  let test: TestDatabase;
  let server: ServerProcess;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    server = await startServer({ DATABASE_URL: test.databaseUrl, DATA_DIR: '/nonexistent' });
  });
  afterAll(async () => {
    await server.stop();
    await test.drop();
  });

  it('is ready on postgres and finishes a request in flight when told to stop', async () => {
    const ready = await fetch(`${server.url}/readyz`);
    expect(((await ready.json()) as { checks: { database: { kind: string } } }).checks.database.kind).toBe(
      'postgres',
    );
    // A request whose body is still arriving when SIGTERM comes is answered, not cut off. The server
    // has read its head once it says `100 Continue`; the rest of the body follows once it is stopping.
    const { port } = new URL(server.url);
    let headRead: () => void = () => {};
    const inFlight = new Promise<void>((resolve) => {
      headRead = resolve;
    });
    let finishBody: () => void = () => {};
    const answered = new Promise<number>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/healthz',
        headers: { 'content-type': 'application/json', 'content-length': '11', expect: '100-continue' },
      });
      req.on('continue', () => {
        req.write('{"a":');
        headRead();
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.flushHeaders();
      finishBody = () => req.end('"bcd"}');
    });
    await inFlight;
    const code = server.stop();
    await vi.waitFor(() => expect(server.logs().join('\n')).toContain('shutting down'), PATIENCE);
    finishBody();
    expect(await answered).toBe(404);
    expect(await code).toBe(0);
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
  });
});

describe('readiness and the job queues', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await test.drop();
    const redis = new Redis(TEST_REDIS_URL);
    const keys = await redis.keys(`test-readyz-${process.pid}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  type Jobs = { ok: boolean; kind: string; error?: string; queues: { queue: string; failed: number }[] };

  it('reports the BullMQ queues with REDIS_URL', async () => {
    const server = await startServer({
      DATABASE_URL: test.databaseUrl,
      DATA_DIR: '/nonexistent',
      REDIS_URL: TEST_REDIS_URL,
      JOBS_PREFIX: `test-readyz-${process.pid}`,
    });
    try {
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).toBe(200);
      const jobs = ((await ready.json()) as { checks: { jobs: Jobs } }).checks.jobs;
      expect(jobs).toMatchObject({ ok: true, kind: 'bullmq' });
      expect(jobs.queues).toHaveLength(3);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('stays ready when Redis does not answer, and says the queues did not', async () => {
    const server = await startServer({
      DATABASE_URL: test.databaseUrl,
      DATA_DIR: '/nonexistent',
      // Nothing listens there: the queues wait for a Redis that never comes.
      REDIS_URL: 'redis://127.0.0.1:1',
      RUN_JOBS: 'false',
    });
    try {
      const started = Date.now();
      const ready = await fetch(`${server.url}/readyz`);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(ready.status).toBe(200);
      const jobs = ((await ready.json()) as { checks: { jobs: Jobs } }).checks.jobs;
      expect(jobs).toEqual({
        ok: false,
        kind: 'bullmq',
        error: 'the job queues did not answer; the server log says why',
        queues: [],
      });
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });
});

describe('readiness when the database is gone', () => {
  it('/readyz answers 503 without the database’s own words (they go to the log)', async () => {
    const test = await createTestDatabase('postgres');
    const server = await startServer({ DATABASE_URL: test.databaseUrl, DATA_DIR: '/nonexistent' });
    try {
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
      const name = new URL(test.databaseUrl as string).pathname.slice(1);
      await test.drop();
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).toBe(503);
      const text = await ready.text();
      // What the database said (its connection was ended, or it does not exist) names it: the log only.
      expect(text).not.toContain(name);
      expect(text).not.toMatch(/does not exist|terminating|administrator/);
      expect(JSON.parse(text)).toMatchObject({ status: 'not_ready', checks: { database: { ok: false } } });
      await vi.waitFor(() => {
        const logged = server
          .logs()
          .some((line) => line.includes('readiness check: the database did not answer'));
        expect(logged, `a readiness log line:\n${server.logs().join('\n')}`).toBe(true);
      }, PATIENCE);
    } finally {
      await server.stop();
      await test.drop();
    }
  });
});
