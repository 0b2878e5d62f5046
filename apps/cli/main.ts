import { inSpan } from '../../infra/telemetry/spans.ts';
import { startTracingOrExit, stopTracing } from '../../infra/telemetry/tracing.ts';

// Tracing first (when the OTEL_* variables name an endpoint), then the CLI, imported only now so that
// the modules it loads are loaded after the instrumentations that patch them. A command is one trace.
await startTracingOrExit({ process: 'cli' });
const { runCli } = await import('./cli.ts');
const args = process.argv.slice(2);

try {
  process.exitCode = await inSpan(`cli ${/^[a-z-]+$/.test(args[0] ?? '') ? args[0] : 'usage'}`, {}, () =>
    runCli(args),
  );
} catch (error) {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
} finally {
  await stopTracing();
}
