// @ts-check
import { constants, enableCompileCache } from 'node:module';

/*
 * `npm run worker`, in plain JavaScript: Node runs it as it is, where an entry in TypeScript would be
 * type-stripped at every start before it could turn the compile cache on. Node's compile cache first
 * (docs/operations.md, "Start"), then tracing (on when the OTEL_* variables name an endpoint:
 * docs/operations.md, "Traces"), then the worker (run.ts), each imported only now: the modules they
 * load are compiled through the cache, and loaded (pg, ioredis) after the instrumentations that patch
 * them.
 */
const cache = enableCompileCache();
// Worker threads (the embedded engine's, the sanitise pool's) are Node instances of their own: they
// use the cache when the environment they start with names it.
if (cache.directory && cache.status !== constants.compileCacheStatus.FAILED) {
  process.env.NODE_COMPILE_CACHE = cache.directory;
}
const { startTracingOrExit } = await import('../../infra/telemetry/tracing.ts');
await startTracingOrExit({ process: 'worker' });
await import('./run.ts');
