import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Runtime } from '../../apps/runtime.ts';
import { createRuntime } from '../../apps/runtime.ts';
import { openDatabase } from '../../infra/db/open.ts';
import { createTestDatabase } from './db.ts';

/*
 * PostgreSQL that a test can take away and bring back: a TCP proxy on a loopback port in front of the
 * test's PostgreSQL. `cut()` is the server going away as a restart or a failover makes it: every open
 * connection is dropped and new ones are refused (ECONNREFUSED) until `restore()` listens again on the
 * same port. `stall()` is a server that stops answering (a network black hole): open connections are
 * dropped and new ones are accepted and never answered, until `restore()`. `stallNew()` leaves the open
 * connections working and only new ones unanswered (a name service or a network slow to let new
 * connections through while the server answers). The machine's shared PostgreSQL is never touched.
 */

export type PgProxy = {
  /** The database's URL through the proxy. */
  url: string;
  cut(): Promise<void>;
  stall(): void;
  stallNew(): void;
  /** How many connections were accepted while stalled (and never answered). */
  stalled(): number;
  restore(): Promise<void>;
  close(): Promise<void>;
};

export async function startPgProxy(databaseUrl: string): Promise<PgProxy> {
  const target = new URL(databaseUrl);
  const targetPort = Number(target.port || 5432);
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  let stalled = false;
  let stallingNew = false;
  let stalledCount = 0;
  const server: Server = createServer((client) => {
    track(client);
    if (stalled || stallingNew) {
      stalledCount += 1;
      client.on('error', () => {});
      return;
    }
    const upstream = connect(targetPort, target.hostname);
    track(upstream);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const listen = (port: number): Promise<number> =>
    new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        const address = server.address();
        resolve(typeof address === 'object' && address ? address.port : 0);
      });
    });
  const port = await listen(0);
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  const cut = async (): Promise<void> => {
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };
  return {
    url: url.toString(),
    cut,
    stall() {
      stalled = true;
      for (const socket of sockets) socket.destroy();
    },
    stallNew() {
      stallingNew = true;
    },
    stalled: () => stalledCount,
    async restore() {
      stalled = false;
      stallingNew = false;
      if (!server.listening) await listen(port);
    },
    close: cut,
  };
}

/**
 * A fresh migrated test database (createTestDatabase) with a runtime whose connections all go through a
 * proxy (its pool and its LISTEN connection alike).
 */
export async function createProxiedTestRuntime(
  opts: { now?: () => Date } = {},
): Promise<{ runtime: Runtime; proxy: PgProxy; drop(): Promise<void> }> {
  const test = await createTestDatabase('postgres');
  const proxy = await startPgProxy(test.databaseUrl as string);
  const handle = await openDatabase({ databaseUrl: proxy.url, dataDir: 'memory://' });
  const runtime = createRuntime(handle, opts);
  return {
    runtime,
    proxy,
    async drop() {
      await proxy.restore();
      await runtime.close();
      await proxy.close();
      await test.drop();
    },
  };
}
