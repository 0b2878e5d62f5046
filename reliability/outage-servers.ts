import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, chown, mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../tests/support/process.ts';

/*
 * Servers of a scenario's own, for the outage scenarios (postgres-restart, redis-outage): a
 * PostgreSQL cluster in a temporary folder and a redis-server, each on a free loopback port, that the
 * scenario can stop and start again without touching the machine's shared servers.
 *
 * In a test run whose PostgreSQL and Redis are containers (tests/support/services.ts sets
 * CS_TEST_SERVICES=containers), these are containers too, of the same images, published on a fixed
 * loopback port so that a restart keeps the address: the run needs no PostgreSQL or Redis installed.
 */

const inContainers = (): boolean => process.env.CS_TEST_SERVICES === 'containers';

/** A free TCP port on 127.0.0.1 (bound, read and released: free at the time of asking). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The folder of the newest installed PostgreSQL's binaries (initdb, pg_ctl), or PG_BIN when set. */
async function postgresBin(): Promise<string> {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const versions = (await readdir('/usr/lib/postgresql')).map(Number).filter((v) => v > 0);
  const newest = Math.max(...versions);
  if (!Number.isFinite(newest)) throw new Error('no PostgreSQL binaries in /usr/lib/postgresql (set PG_BIN)');
  return `/usr/lib/postgresql/${newest}/bin`;
}

/** PostgreSQL refuses to run as root: as root, its commands run as the `postgres` user. */
function asPostgres(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

/** A PostgreSQL cluster of the scenario's own. */
export type OwnPostgres = {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/<database>`. */
  url(database: string): string;
  /** `pg_ctl stop -m <mode>`: `fast` disconnects every session, `immediate` is a crash (recovery at start). */
  stop(mode: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** Stops it (immediately) and removes its folder. */
  remove(): Promise<void>;
};

/**
 * Initialises a cluster in a temporary folder (trust authentication, loopback only, its socket in the
 * same folder) and starts it on a free port.
 */
export async function startOwnPostgres(): Promise<OwnPostgres> {
  if (inContainers()) return startPostgresContainer();
  const bin = await postgresBin();
  const dir = await mkdtemp(join(tmpdir(), 'cs-rel-pg-'));
  const data = join(dir, 'data');
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  await chmod(dir, 0o700);
  const port = await freePort();
  const pg = async (command: string, args: string[]): Promise<void> => {
    const [cmd, argv] = asPostgres(join(bin, command), args);
    const r = await run(cmd, argv);
    if (r.code !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${r.stderr}${r.stdout}`);
  };
  await pg('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=60`;
  const start = (): Promise<void> =>
    pg('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', '-t', '60', 'start']);
  const stop = (mode: 'fast' | 'immediate'): Promise<void> =>
    pg('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
  await start();
  return {
    port,
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    stop,
    start,
    async remove() {
      await stop('immediate').catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A redis-server of the scenario's own: no persistence, on a free port. */
export type OwnRedis = {
  port: number;
  url: string;
  /** Kills it (SIGKILL: connections reset, like a crash) and waits for its exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port (empty: it keeps nothing). */
  start(): Promise<void>;
  /** Stops it for good. */
  remove(): Promise<void>;
};

/** Starts `redis-server --port P --save "" --appendonly no` as a child process and waits for it. */
export async function startOwnRedis(): Promise<OwnRedis> {
  if (inContainers()) return startRedisContainer();
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const c = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          '--daemonize',
          'no',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child = c;
      let out = '';
      const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${out}`)), 15_000);
      c.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      c.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}: ${out}`));
      });
    });
  const stop = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  };
  await start();
  return { port, url: `redis://127.0.0.1:${port}`, stop, start, remove: stop };
}

/** A started container of the run (labelled as its services are) with `port` published on loopback. */
async function startContainer(
  image: string,
  port: number,
  setUp: (c: import('testcontainers').GenericContainer) => import('testcontainers').GenericContainer,
) {
  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  const { runLabels } = await import('../tests/support/services.ts');
  const started = await setUp(new GenericContainer(image))
    .withLabels(runLabels(process.pid))
    .withExposedPorts({ container: port, host: await freePort() })
    .withWaitStrategy(Wait.forListeningPorts())
    .withStartupTimeout(120_000)
    .start();
  const engine = (await getContainerRuntimeClient()).container.dockerode.getContainer(started.getId());
  return { engine, hostPort: started.getMappedPort(port) };
}

/** Polls `ready` until it holds (a server that answers), failing after `timeoutMs`. */
async function waitFor(what: string, ready: () => Promise<unknown>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await ready();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what} did not come back: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function startPostgresContainer(): Promise<OwnPostgres> {
  const pg = (await import('pg')).default;
  const { DEFAULT_POSTGRES_IMAGE } = await import('../tests/support/services.ts');
  const { engine, hostPort } = await startContainer(
    process.env.TEST_POSTGRES_IMAGE || DEFAULT_POSTGRES_IMAGE,
    5432,
    (c) =>
      c
        // The public image wants one of the two; the local one trusts without a password.
        .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
        .withCommand(['-c', 'max_connections=60']),
  );
  const url = (database: string): string => `postgres://postgres@127.0.0.1:${hostPort}/${database}`;
  const answers = (): Promise<void> =>
    waitFor('PostgreSQL', async () => {
      const client = new pg.Client({ connectionString: url('postgres') });
      try {
        await client.connect();
        await client.query('select 1');
      } finally {
        await client.end().catch(() => {});
      }
    });
  await answers();
  return {
    port: hostPort,
    url,
    // The images stop on SIGINT (a fast shutdown); SIGQUIT is PostgreSQL's immediate one.
    stop: async (mode) => {
      if (mode === 'fast') await engine.stop({ t: 60 });
      else {
        await engine.kill({ signal: 'SIGQUIT' });
        await engine.wait();
      }
    },
    start: async () => {
      await engine.start();
      await answers();
    },
    remove: () => engine.remove({ force: true, v: true }),
  };
}

async function startRedisContainer(): Promise<OwnRedis> {
  const { Redis } = await import('ioredis');
  const { DEFAULT_REDIS_IMAGE } = await import('../tests/support/services.ts');
  const { engine, hostPort } = await startContainer(
    process.env.TEST_REDIS_IMAGE || DEFAULT_REDIS_IMAGE,
    6379,
    (c) => c.withCommand(['--save', '', '--appendonly', 'no']),
  );
  const url = `redis://127.0.0.1:${hostPort}`;
  let stopped = false;
  return {
    port: hostPort,
    url,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await engine.kill({ signal: 'SIGKILL' });
      await engine.wait();
    },
    start: async () => {
      await engine.start();
      stopped = false;
      await waitFor('Redis', async () => {
        const redis = new Redis(url, {
          lazyConnect: true,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        });
        try {
          await redis.connect();
          await redis.ping();
        } finally {
          redis.disconnect();
        }
      });
    },
    remove: () => engine.remove({ force: true, v: true }),
  };
}
