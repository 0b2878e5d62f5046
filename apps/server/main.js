// @ts-check
import { useCompileCache } from '../../infra/compile-cache.js';

/*
 * `npm start`, in plain JavaScript: Node runs it as it is, where an entry in TypeScript would be
 * type-stripped at every start before it could turn the compile cache on. Node's compile cache first
 * (docs/operations.md, "Start"), then tracing (on when the OTEL_* variables name an endpoint:
 * docs/operations.md, "Traces"), then the server (serve.ts), each imported only now: the modules they
 * load are compiled through the cache, and loaded (pg, ioredis, node:http, fastify) after the
 * instrumentations that patch them.
 */
useCompileCache();
const { startTracingOrExit } = await import('../../infra/telemetry/tracing.ts');
await startTracingOrExit({ process: 'server' });
await import('./serve.ts');
