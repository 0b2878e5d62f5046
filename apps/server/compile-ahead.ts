import { useCompileCache } from '../../infra/compile-cache.js';

/*
 * `npm install`'s postinstall: has Node compile the modules a server start loads into Node's compile
 * cache, as main.js turns it on (docs/operations.md, "Start"), so that the first start after an install
 * reads them compiled, as every later start does (about 0.8 s of a first start's 2-core machine time).
 * It loads them and runs nothing of the server. Where the cache cannot be written nothing is kept,
 * with no message: only that first start is slower.
 */
useCompileCache();
const { loadStartModules } = await import('./start-modules.ts');
await Promise.all([
  // What main.js and serve.ts import themselves, the database driver open.ts loads, then what serve.ts
  // loads while the database opens.
  import('../../infra/telemetry/tracing.ts'),
  import('pino'),
  import('../../infra/config.ts'),
  import('../../infra/db/open.ts'),
  import('../../infra/db/statement-cache.ts'),
  import('pg'),
  import('../../infra/log-destination.ts'),
  import('./http/log-redaction.ts'),
  loadStartModules(),
  // The admin socket, served on the embedded database.
  import('../../infra/admin-socket.ts'),
  import('../cli/through-server.ts'),
  // What the worker threads load: the embedded engine's (infra/db/pglite-thread.ts, which runs only
  // as a thread) and the sanitise pool's.
  import('@electric-sql/pglite'),
  import('@electric-sql/pglite-socket'),
  import('../../infra/db/embedded-template.ts'),
  import('../../infra/sanitize-worker.ts'),
]);
// What @fastify/swagger loads only once it is registered (its document builders, yaml), on an app of
// its own that serves nothing.
const [{ default: fastify }, { default: swagger }] = await Promise.all([
  import('fastify'),
  import('@fastify/swagger'),
]);
const app = fastify();
await app.register(swagger, { openapi: {} });
await app.ready();
await app.close();
