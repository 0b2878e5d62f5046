// @ts-check
import { useCompileCache } from '../../infra/compile-cache.js';

// `npm run cli`, in plain JavaScript: Node runs it as it is, where an entry in TypeScript would be
// type-stripped at every command before it could turn the compile cache on. Node's compile cache
// first (docs/operations.md, "Start"), then tracing (when the OTEL_* variables name an endpoint), then
// the CLI, imported only now so that the modules it loads are loaded after the instrumentations that
// patch them. A command is one trace.
useCompileCache();
const { startTracingOrExit, stopTracing } = await import('../../infra/telemetry/tracing.ts');
const tracing = await startTracingOrExit({ process: 'cli' });
const { runCli } = await import('./cli.ts');
const args = process.argv.slice(2);

try {
  if (tracing.on) {
    const { inSpan } = await import('../../infra/telemetry/spans.ts');
    process.exitCode = await inSpan(`cli ${/^[a-z-]+$/.test(args[0] ?? '') ? args[0] : 'usage'}`, {}, () =>
      runCli(args),
    );
  } else {
    process.exitCode = await runCli(args);
  }
} catch (error) {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
} finally {
  await stopTracing();
}
