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
 */

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
};

/** Starts `redis-server --port P --save "" --appendonly no` as a child process and waits for it. */
export async function startOwnRedis(): Promise<OwnRedis> {
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
  return { port, url: `redis://127.0.0.1:${port}`, stop, start };
}
