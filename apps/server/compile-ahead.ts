import { enableCompileCache } from 'node:module';

/*
 * `npm install`'s postinstall: has Node compile the modules a server start loads into Node's compile
 * cache, as main.js turns it on (docs/operations.md, "Start"), so that the first start after an install
 * reads them compiled, as every later start does (about 0.8 s of a first start's 2-core machine time).
 * It loads them and runs nothing of the server. Where the cache cannot be written nothing is kept,
 * with no message: only that first start is slower.
 */
enableCompileCache();
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
]);
