import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { sampleValue } from '../support/metrics.ts';
import { baseEnv, NODE, ROOT, run } from '../support/process.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * The metrics listener of the processes themselves: the worker serves its own (projector lag, queues,
 * the database, and its detailed readiness), closes it when it stops; a METRICS_PORT that cannot be had stops the start with one
 * line naming it.
 */

describe('the metrics of the processes', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('the worker serves its metrics on METRICS_PORT and closes the listener when it stops', async () => {
    const lines: string[] = [];
    const worker: ChildProcess = spawn(NODE, ['apps/worker/main.js'], {
      cwd: ROOT,
      env: { ...baseEnv(), DATABASE_URL: db.databaseUrl, METRICS_PORT: '0', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => worker.once('exit', resolve));
    const keep = (d: Buffer) => lines.push(...d.toString().split('\n'));
    worker.stdout?.on('data', keep);
    worker.stderr?.on('data', keep);
    try {
      let url = '';
      await vi.waitFor(() => {
        url =
          lines.map((l) => /metrics listening at (http:\/\/\S+\/metrics)/.exec(l)?.[1]).find(Boolean) ?? '';
        expect(url, lines.join('\n')).not.toBe('');
        expect(lines.some((l) => l.includes('worker running'))).toBe(true);
      }, PATIENCE);
      const text = await (await fetch(url)).text();
      expect(sampleValue(text, 'content_service_database_up')).toBe(1);
      expect(text).toMatch(/content_service_projector_lag_events\{projector="site_stats@1"\} \d+/);
      expect(text).toMatch(/content_service_projector_lag_events\{projector="webhooks@1"\} \d+/);
      expect(text).toMatch(/content_service_job_queue_jobs\{queue="webhooks",state="waiting"\} \d+/);
      expect(text).toContain('nodejs_eventloop_lag_p99_seconds');
      // No HTTP face in the worker: no request ever observed.
      expect(sampleValue(text, 'content_service_http_request_duration_seconds_count')).toBe(0);
      // Its detailed readiness, beside the metrics (the worker has no public port).
      const ready = await fetch(url.replace(/\/metrics$/, '/readyz'));
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({
        status: 'ready',
        checks: {
          database: { ok: true, kind: 'postgres' },
          migrations: { ok: true, pending: [] },
          jobs: { ok: true, kind: 'in-process' },
        },
      });

      worker.kill('SIGTERM');
      expect(await exited).toBe(0);
      await expect(fetch(url)).rejects.toThrow();
    } finally {
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
  });

  it('a METRICS_PORT in use stops the start with one line naming it', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const r = await run(NODE, ['apps/server/main.js'], {
        DATABASE_URL: db.databaseUrl,
        PORT: '0',
        METRICS_PORT: String(port),
        LOG_LEVEL: 'warn',
      });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`METRICS_PORT=${port}`);
      expect(r.stderr).toContain('EADDRINUSE');
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });
});
