import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp.ts';
import { cli, NODE, ROOT, run } from '../support/process.ts';
import { startServer } from '../support/server.ts';

/*
 * Tracing off costs nothing: a server started without an OTLP endpoint (or with one, but
 * OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none) loads nothing of OpenTelemetry: not its API
 * (infra/telemetry/spans.ts is given it when tracing starts), the SDK, its exporter, the
 * instrumentations or the ESM loader hook, and sends nothing to the endpoint. The modules a server
 * loads are recorded by tests/fixtures/record-modules.ts (`--import`). The same server with the endpoint loads them: the
 * check can fail. A bad OTEL_* value stops the server, the worker and the CLI with a line naming it.
 */

/** Module URLs that mean OpenTelemetry's API, its SDK or an instrumentation was loaded. */
const SDK_PARTS = [
  '@opentelemetry/api/',
  'infra/telemetry/sdk.ts',
  '@opentelemetry/sdk-trace',
  '@opentelemetry/exporter-trace-otlp-proto',
  '@opentelemetry/context-async-hooks',
  '@opentelemetry/instrumentation',
  '@fastify/otel',
  'bullmq-otel',
  'import-in-the-middle',
  'require-in-the-middle',
];

describe('a server with tracing off', () => {
  let db: TestDatabase;
  let collector: OtlpReceiver;
  let dir: string;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    collector = await startOtlpReceiver({ discard: true });
    dir = await mkdtemp(join(tmpdir(), 'cs-tracing-off-'));
    const seeded = await cli(['seed-demo', '--json', '--sites', '1', '--articles', '1', '--backlinks', '0'], {
      DATABASE_URL: db.databaseUrl,
    });
    if (seeded.code !== 0) throw new Error(seeded.stderr);
  });
  afterAll(async () => {
    await collector?.close();
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  /** Starts the server with `env`, reads a page of the API and the docs, stops it; the modules it loaded. */
  async function modulesOf(name: string, env: Record<string, string>): Promise<string[]> {
    const file = join(dir, `${name}.txt`);
    const server = await startServer({
      DATABASE_URL: db.databaseUrl as string,
      NODE_OPTIONS: `--import=${resolve(ROOT, 'tests/fixtures/record-modules.ts')}`,
      CS_TEST_MODULES_FILE: file,
      ...env,
    });
    try {
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${server.url}/api/v1/sites`)).status).toBe(401);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    return (await readFile(file, 'utf8')).split('\n');
  }

  const loadedParts = (modules: string[]): string[] =>
    SDK_PARTS.filter((part) => modules.some((url) => url.includes(part)));

  it.each([
    ['without OTEL variables', {}],
    ['with an endpoint and OTEL_SDK_DISABLED=true', { OTEL_SDK_DISABLED: 'true' }],
    ['with an endpoint and OTEL_TRACES_EXPORTER=none', { OTEL_TRACES_EXPORTER: 'none' }],
  ])('loads nothing of OpenTelemetry and sends nothing %s', async (name, extra) => {
    const env: Record<string, string> =
      name === 'without OTEL variables'
        ? { OTEL_SERVICE_NAME: 'ignored-without-an-endpoint' }
        : { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '10', ...extra };
    const modules = await modulesOf(name.replace(/\W+/g, '-'), env);
    // The record is the server's: its entry point and the server are there.
    expect(modules.some((url) => url.endsWith('apps/server/serve.ts'))).toBe(true);
    expect(loadedParts(modules)).toEqual([]);
    expect(collector.requests).toEqual([]);
  });

  it('loads them, and exports, with an endpoint (the control)', async () => {
    const modules = await modulesOf('on', {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: '10',
    });
    expect(loadedParts(modules)).toEqual(SDK_PARTS);
    expect(collector.requests.length).toBeGreaterThan(0);
  });
});

describe('a bad OTEL_* value', () => {
  it('stops the server, the worker and the CLI with one line naming the variable', async () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318', DATA_DIR: '/nonexistent' };
    const line =
      'Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT="collector:4318": expected an http:// or https:// URL\n';
    for (const entry of ['apps/server/main.js', 'apps/worker/main.js']) {
      const r = await run(NODE, [entry], env);
      expect({ entry, code: r.code, stderr: r.stderr }).toEqual({ entry, code: 1, stderr: line });
    }
    const r = await cli(['projections', 'status'], {
      DATA_DIR: '/nonexistent',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_TRACES_SAMPLER: 'sometimes',
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^Invalid configuration: OTEL_TRACES_SAMPLER="sometimes": expected one of [^\n]+\n$/,
    );
  });
});
