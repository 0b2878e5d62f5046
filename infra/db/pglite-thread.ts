import { flushCompileCache } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { copyEmbeddedTemplate, embeddedTemplateFolder, holdsCluster } from './embedded-template.ts';

/*
 * The embedded database's engine, in a thread of its own (open.ts starts it): PGlite on the data
 * folder, served on a loopback port by pglite-socket. The process's other work (loading and building
 * the app at a start, then requests) goes on in the main thread while PostgreSQL works in this one.
 *
 * Messages: this thread posts `{ ready, port }` or `{ failed, error }`; on `close` it stops serving,
 * closes PGlite and posts `{ closed }` (with the error of a step that failed), then ends.
 */

export type EngineMessage =
  | { type: 'ready'; port: number }
  | { type: 'failed'; error: unknown }
  | { type: 'closed'; error?: unknown };

const port = parentPort;
if (!port) throw new Error('pglite-thread.ts runs as a worker thread (open.ts)');
const { location } = workerData as { location: string };
const post = (message: EngineMessage): void => port.postMessage(message);

/**
 * PostgreSQL's shared buffers in the embedded engine: 32 MB instead of the cluster's 128 MB. PGlite
 * zeroes its shared memory at every start, about 3.5 ms a megabyte of the engine's thread on a 2-core
 * VM: 128 MB cost 0.45 s of each start, 32 MB 0.12 s. A page not in them is read from the operating
 * system's file cache. (docs/operations.md, "Start".)
 */
const EMBEDDED_SHARED_BUFFERS = '32MB';

/** A new folder is first a copy of the migrated cluster made at install (embedded-template.ts), when there is one. */
async function createOptions(): Promise<{ dataDir: string; startParams: string[] }> {
  const startParams = [...PGlite.defaultStartParams, '-c', `shared_buffers=${EMBEDDED_SHARED_BUFFERS}`];
  if (!location.startsWith('memory://') && !holdsCluster(location)) {
    const template = await embeddedTemplateFolder().catch(() => undefined);
    if (template) copyEmbeddedTemplate(template, location);
  }
  return { dataDir: location, startParams };
}

try {
  const pglite = await PGlite.create(await createOptions());
  // Port 0: the OS picks a free loopback port. maxConnections stays at its default of 1, and open.ts's
  // pool has one connection: pglite-socket 0.2.17's multiplexer (maxConnections > 1) queues wire
  // messages one by one and only keeps a connection's messages together inside an explicit
  // transaction, so two connections' extended-protocol exchanges (Parse/Bind/Execute/Sync on the
  // unnamed statement) could interleave. One connection, shared through the pool, is safe.
  const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port: 0 });
  try {
    await server.start();
  } catch (error) {
    await pglite.close();
    throw error;
  }
  port.once('message', async () => {
    let failure: unknown;
    for (const step of [() => server.stop(), () => pglite.close()]) {
      try {
        await step();
      } catch (error) {
        failure ??= error;
      }
    }
    post(failure === undefined ? { type: 'closed' } : { type: 'closed', error: failure });
    port.close();
  });
  post({ type: 'ready', port: Number(server.getServerConn().split(':').at(-1)) });
  // What this thread compiled, kept in Node's compile cache now (when the process keeps one: main.js
  // names it to its threads): a thread's cache is otherwise written as the thread ends, which a
  // process that stops without waiting for it never lets happen.
  flushCompileCache();
} catch (error) {
  post({ type: 'failed', error });
  port.close();
}
