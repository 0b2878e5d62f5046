import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/process.ts';
import { startServer } from '../support/server.ts';

/*
 * A start loads what serving needs, and what only some requests need is loaded by the first of them
 * (docs/operations.md, "Start"): a server on the embedded database, without REDIS_URL or
 * METRICS_PORT, answers without having loaded the authorization server (oidc-provider, Koa, jose), the
 * MCP SDK, BullMQ and Redis's client, the metrics library, the image library, the outbound HTTP
 * client (the package's, nor Node's own), OpenTelemetry's API (tracing is off: infra/telemetry/spans.ts)
 * or the progress bar's library (a terminal's, apps/cli/progress.ts); nor PGlite, which runs in the database's own thread (infra/db/pglite-thread.ts); nor ever
 * fastify's own schema compilers (ajv, fast-json-stringify's compiler). The first
 * request for the authorization server's metadata loads it (the control: the check can fail). The main
 * thread's modules are recorded by tests/fixtures/record-modules.ts (`--import`).
 */

/** Module URLs of what a start leaves to the requests that need it (or to another thread). */
const ON_DEMAND = [
  '/node_modules/oidc-provider/',
  '/node_modules/koa/',
  '/node_modules/jose/',
  '/node_modules/@modelcontextprotocol/',
  '/node_modules/bullmq/',
  '/node_modules/ioredis/',
  '/node_modules/prom-client/',
  '/node_modules/sharp/',
  '/node_modules/undici/',
  // Node's own fetch, which an ESM import of node:http loads (infra/http-status.ts).
  'internal:internal/deps/undici/',
  '/node_modules/@opentelemetry/',
  '/node_modules/cli-progress/',
  '/node_modules/@electric-sql/pglite/',
  // Never: fastify's own schema compilers, for the app's are zod and JSON.stringify (apps/server/app.ts).
  '/node_modules/ajv/',
  '/node_modules/@fastify/ajv-compiler/',
  '/node_modules/@fastify/fast-json-stringify-compiler/',
];

describe('what a server start loads', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-start-loading-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Starts the embedded server, asks for `paths`, stops it; the modules its main thread loaded. */
  async function modulesOf(name: string, paths: string[]): Promise<string[]> {
    const file = join(dir, `${name}.txt`);
    const server = await startServer({
      DATA_DIR: join(dir, 'data'),
      DEMO_ON_FIRST_START: 'false',
      NODE_OPTIONS: `--import=${resolve(ROOT, 'tests/fixtures/record-modules.ts')}`,
      CS_TEST_MODULES_FILE: file,
    });
    try {
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      for (const path of paths) expect((await fetch(`${server.url}${path}`)).status).toBe(200);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    return (await readFile(file, 'utf8')).split('\n');
  }

  const loaded = (modules: string[]): string[] =>
    ON_DEMAND.filter((part) => modules.some((url) => url.includes(part)));

  it('answers without loading what only some requests need', async () => {
    const modules = await modulesOf('start', []);
    expect(modules.some((url) => url.endsWith('apps/server/serve.ts'))).toBe(true);
    expect(modules.some((url) => url.includes('/node_modules/fastify/'))).toBe(true);
    expect(loaded(modules)).toEqual([]);
  });

  it('loads the authorization server with the first request for it (the control)', async () => {
    const modules = await modulesOf('oauth', ['/.well-known/oauth-authorization-server']);
    expect(loaded(modules)).toEqual([
      '/node_modules/oidc-provider/',
      '/node_modules/koa/',
      '/node_modules/jose/',
      // Koa's ESM import of node:http.
      'internal:internal/deps/undici/',
    ]);
  });
});
