import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { startPgProxy } from '../support/pg-proxy.ts';
import { NODE, ROOT, run } from '../support/process.ts';
import { metricsBaseOf, type ServerProcess, startServer } from '../support/server.ts';
import { TEST_REDIS_URL } from '../support/services.ts';
import { PATIENCE } from '../support/wait.ts';

/** The detailed readiness, served on the metrics listener (apps/readiness.ts). */
type Details = {
  status: string;
  checks: {
    database: { ok: boolean; kind: string; error?: string };
    migrations: { pending: string[] };
    projections: { name: string; lag: number }[];
    jobs: { ok: boolean; kind: string; error?: string; queues: { queue: string; waiting: number }[] };
  };
};

async function details(server: ServerProcess): Promise<{ status: number; body: Details }> {
  const res = await fetch(`${metricsBaseOf(server)}/readyz`);
  return { status: res.status, body: (await res.json()) as Details };
}

describe('server on the embedded default', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'cs-server-'));
  });
  afterAll(async () => rm(dataDir, { recursive: true, force: true }));

  it('serves with no database server, answers health and readiness, and stops cleanly on SIGTERM', async () => {
    const server = await startServer({ DATA_DIR: dataDir, METRICS_PORT: '0' });
    try {
      const health = await fetch(`${server.url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      expect(health.headers.get('x-request-id')).toMatch(/^req_/);

      // The public readiness says ready or not, nothing more; the details are on the metrics listener.
      const ready = await fetch(`${server.url}/readyz`, { headers: { 'x-request-id': 'probe-1' } });
      expect(ready.status).toBe(200);
      expect(ready.headers.get('x-request-id')).toMatch(/^req_/);
      expect(await ready.json()).toEqual({ status: 'ready' });
      const { status, body } = await details(server);
      expect(status).toBe(200);
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

  it('keeps its worker threads in the compile cache too: a restart reads the engine’s thread and the sanitise worker compiled', async () => {
    // As `npm start` runs: no NODE_COMPILE_CACHE, so the cache is in the temporary folder (main.js
    // turns it on and names it to the threads it starts). Node says what it reads from the cache.
    const tmp = await mkdtemp(join(tmpdir(), 'cs-server-cache-'));
    const dir = join(tmp, 'data');
    const env = {
      DATA_DIR: dir,
      TMPDIR: tmp,
      NODE_COMPILE_CACHE: undefined,
      NODE_DEBUG_NATIVE: 'COMPILE_CACHE',
      SANITIZE_THREADS: '1',
      DEMO_ON_FIRST_START: 'false',
    };
    // `retrieving transpile cache for StrippedTypeScript <path or file: URL>...success`, and never `no
    // transpile cache for ...` for it. The threads print beside each other on one stderr, and a line
    // may be cut by another thread's before its `success`: the start of the line is what is looked for.
    const fromCache = (lines: string[], file: string): boolean => {
      const about = lines.filter((line) => line.includes(join(ROOT, file)));
      return (
        about.some((line) => line.includes('retrieving transpile cache for StrippedTypeScript')) &&
        !about.some((line) => line.includes('no transpile cache for StrippedTypeScript'))
      );
    };
    // `writing cache for StrippedTypeScript <path> to temporary file <file>...` then, in a write of its
    // own, `success`: another thread's output may come between the two, so the line's start is what is
    // looked for (whether the write took is what the restart below checks).
    const cached = (lines: string[], file: string): boolean =>
      lines.some(
        (line) => line.includes('writing cache for StrippedTypeScript') && line.includes(join(ROOT, file)),
      );
    let running: ServerProcess | undefined;
    try {
      const first = await startServer(env);
      running = first;
      // The sanitise pool's thread starts once the server listens: it has written what it compiled
      // before this server is stopped (a thread that is ended writes nothing). With nothing cached it
      // compiles as a first start does: as patient as startServer is with a start (60 s).
      await vi.waitFor(
        async () => {
          expect(cached(await first.logsNow(), 'infra/sanitize-worker.ts')).toBe(true);
        },
        { timeout: 60_000, interval: 200 },
      );
      running = undefined;
      expect(await first.stop()).toBe(0);
      const again = await startServer(env);
      running = again;
      // The engine's thread has loaded by the time the server listens, the sanitise pool's soon after.
      await vi.waitFor(async () => {
        const lines = await again.logsNow();
        expect({
          engine: fromCache(lines, 'infra/db/pglite-thread.ts'),
          sanitiser: fromCache(lines, 'infra/sanitize-worker.ts'),
          server: fromCache(lines, 'apps/server/serve.ts'),
        }).toEqual({ engine: true, sanitiser: true, server: true });
      }, PATIENCE);
      running = undefined;
      expect(await again.stop()).toBe(0);
    } finally {
      // A server left by a failure is stopped first: its folder is not removed under it.
      await running?.stop();
      await rm(tmp, { recursive: true, force: true });
    }
  }, 180_000);

  it('starts from what `npm install` compiled: no module of the start is compiled again', async () => {
    // The cache as the postinstall leaves it (apps/server/compile-ahead.ts), in the temporary folder as
    // `npm start` keeps it. V8 refuses code compiled under other flags than its own ("was rejected"):
    // the flags a process sets are set before anything is compiled (infra/compile-cache.js), by the
    // postinstall as by the server.
    const tmp = await mkdtemp(join(tmpdir(), 'cs-server-ahead-'));
    let server: ServerProcess | undefined;
    try {
      const ahead = await run(NODE, ['apps/server/compile-ahead.ts'], {
        TMPDIR: tmp,
        NODE_COMPILE_CACHE: undefined,
      });
      expect(ahead.code, ahead.stderr).toBe(0);
      server = await startServer({
        DATA_DIR: join(tmp, 'data'),
        TMPDIR: tmp,
        NODE_COMPILE_CACHE: undefined,
        NODE_DEBUG_NATIVE: 'COMPILE_CACHE',
        DEMO_ON_FIRST_START: 'false',
      });
      const lines = await server.logsNow();
      const app = `file://${join(ROOT, 'apps/server/app.ts')}`;
      expect(lines.some((line) => line.includes(`V8 code cache for ESM ${app} was accepted`))).toBe(true);
      expect(lines.filter((line) => line.includes('was rejected'))).toEqual([]);
      const stopping = server;
      server = undefined;
      expect(await stopping.stop()).toBe(0);
    } finally {
      await server?.stop();
      await rm(tmp, { recursive: true, force: true });
    }
  }, 180_000);

  it('refuses to start on a bad variable, with one line that names it', async () => {
    const r = await run(NODE, ['apps/server/main.js'], { DATA_DIR: dataDir, PORT: 'eighty' });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('Invalid configuration: PORT="eighty": expected a port number');
  });
});

describe('server on PostgreSQL', () => {
  let test: TestDatabase;
  let server: ServerProcess;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    server = await startServer({
      DATABASE_URL: test.databaseUrl,
      DATA_DIR: '/nonexistent',
      METRICS_PORT: '0',
    });
  });
  afterAll(async () => {
    await server.stop();
    await test.drop();
  });

  it('is ready on postgres and finishes a request in flight when told to stop', async () => {
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    expect((await details(server)).body.checks.database.kind).toBe('postgres');
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

  it('reports the BullMQ queues with REDIS_URL', async () => {
    const server = await startServer({
      DATABASE_URL: test.databaseUrl,
      DATA_DIR: '/nonexistent',
      REDIS_URL: TEST_REDIS_URL,
      JOBS_PREFIX: `test-readyz-${process.pid}`,
      METRICS_PORT: '0',
    });
    try {
      const ready = await details(server);
      expect(ready.status).toBe(200);
      const jobs = ready.body.checks.jobs;
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
      METRICS_PORT: '0',
    });
    try {
      const started = Date.now();
      const ready = await details(server);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(ready.status).toBe(200);
      expect(ready.body.checks.jobs).toEqual({
        ok: false,
        kind: 'bullmq',
        error: 'the job queues did not answer; the log says why',
        queues: [],
      });
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });
});

describe('readiness when the database is away', () => {
  it('stays in the pool (public /readyz 200) and answers 503 itself; the details say why, without the database’s words', async () => {
    const test = await createTestDatabase('postgres');
    const proxy = await startPgProxy(test.databaseUrl as string);
    const server = await startServer({
      DATABASE_URL: proxy.url,
      DATA_DIR: '/nonexistent',
      METRICS_PORT: '0',
    });
    try {
      expect((await details(server)).status).toBe(200);
      await proxy.cut();
      // The public readiness reads no database: the load balancer keeps sending, and the replica
      // answers for itself.
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready' });
      const call = await fetch(`${server.url}/api/v1/sites`, {
        headers: { authorization: `Bearer cs_live_${'0'.repeat(48)}` },
      });
      expect(call.status).toBe(503);
      expect(call.headers.get('content-type')).toContain('application/problem+json');
      expect(call.headers.get('retry-after')).toBe('5');
      expect(await call.json()).toMatchObject({ status: 503, code: 'unavailable' });

      const res = await fetch(`${metricsBaseOf(server)}/readyz`);
      expect(res.status).toBe(503);
      const text = await res.text();
      // What the driver said (the address refused) stays in the log.
      expect(text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|terminat/);
      expect(JSON.parse(text)).toMatchObject({
        status: 'not_ready',
        checks: { database: { ok: false, error: 'the database did not answer; the log says why' } },
      });
      await vi.waitFor(() => {
        const logged = server
          .logs()
          .some((line) => line.includes('readiness check: the database did not answer'));
        expect(logged, `a readiness log line:\n${server.logs().join('\n')}`).toBe(true);
      }, PATIENCE);

      await proxy.restore();
      await vi.waitFor(async () => expect((await details(server)).status).toBe(200), PATIENCE);
    } finally {
      await server.stop();
      await proxy.close();
      await test.drop();
    }
  });
});
