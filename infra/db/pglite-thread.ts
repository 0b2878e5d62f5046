import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { readEmbeddedTemplate } from './embedded-template.ts';

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

/** A new folder is loaded from the empty cluster made at install (embedded-template.ts), when there is one. */
async function createOptions(): Promise<{ dataDir: string; loadDataDir?: Blob }> {
  if (location.startsWith('memory://') || existsSync(join(location, 'PG_VERSION')))
    return { dataDir: location };
  const template = await readEmbeddedTemplate();
  return template ? { dataDir: location, loadDataDir: template } : { dataDir: location };
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
} catch (error) {
  post({ type: 'failed', error });
  port.close();
}
