import { startTracingOrExit } from '../../infra/telemetry/tracing.ts';

/*
 * `npm start`: tracing first (on when the OTEL_* variables name an endpoint: docs/operations.md,
 * "Traces"), then the server (serve.ts), imported only now so that the modules it loads (pg, ioredis,
 * node:http, fastify) are loaded after the instrumentations that patch them.
 */
await startTracingOrExit({ process: 'server' });
await import('./serve.ts');
