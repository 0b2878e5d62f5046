import { startTracingOrExit } from '../../infra/telemetry/tracing.ts';

/*
 * `npm run worker`: tracing first (on when the OTEL_* variables name an endpoint: docs/operations.md,
 * "Traces"), then the worker (run.ts), imported only now so that the modules it loads (pg, ioredis)
 * are loaded after the instrumentations that patch them.
 */
await startTracingOrExit({ process: 'worker' });
await import('./run.ts');
