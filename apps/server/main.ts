import { loadConfigOrExit } from '../../infra/config.ts';
import { startAsyncProjections } from '../../infra/projection-runner.ts';
import { openRuntime } from '../../infra/runtime.ts';
import { projectors } from '../../projections/index.ts';
import { buildApp } from './app.ts';

const config = loadConfigOrExit();

const runtime = await openRuntime(config, { migrate: true });
const app = await buildApp({ runtime, config });
const workers = config.RUN_WORKERS
  ? startAsyncProjections({ handle: runtime.handle, projectors, logger: app.log })
  : null;

let shuttingDown = false;
async function shutdown(signal: string): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  app.log.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
  const force = setTimeout(() => {
    app.log.error('shutdown took too long; exiting');
    process.exit(1);
  }, config.SHUTDOWN_TIMEOUT_SECONDS * 1000);
  force.unref();
  try {
    await app.close();
    await workers?.stop();
    await runtime.close();
    app.log.info('stopped');
  } catch (error) {
    app.log.error({ err: error }, 'error during shutdown');
    process.exitCode = 1;
  }
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

try {
  await app.listen({ host: config.HOST, port: config.PORT });
  app.log.info(
    { database: runtime.handle.kind, public_url: config.PUBLIC_URL, workers: Boolean(workers) },
    'content service ready',
  );
} catch (error) {
  app.log.error({ err: error }, 'could not start');
  await workers?.stop();
  await runtime.close();
  process.exitCode = 1;
}
