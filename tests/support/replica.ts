import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { appendFile, chmod, chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

/*
 * A PostgreSQL primary and a streaming replica of it, for the read-replica tests
 * (tests/infra/replicas.int.test.ts): both clusters made for the test in a folder of their own
 * (initdb, then pg_basebackup -R -X stream), on free loopback ports, removed by `stop()`.
 *
 * Why not a replica of the run's server (TEST_DATABASE_URL): a replica needs a `host replication`
 * entry in the primary's pg_hba.conf, which the local server of a session machine does not have
 * (Debian's default names `all` databases, which excludes replication) and which the containers of a
 * CI run do not have either; changing a shared server's authentication for a test is not this test's
 * business. A pair of its own needs only PostgreSQL's binaries on the machine that runs the tests (CI
 * installs them: .ci/run starts the local cluster) and a user that may run them: as root, the
 * clusters run as `postgres` (PostgreSQL refuses to run as root) through runuser.
 *
 * `replicaSkipReason()` says why a pair cannot be made here (the tests skip, naming it), or null.
 */

const run = promisify(execFile);

/** The directory of PostgreSQL's server binaries (the newest installed), or undefined. */
function binDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

const isRoot = (): boolean => process.getuid?.() === 0;

/** Why a replicated pair cannot be made on this machine, or null when it can. */
export function replicaSkipReason(): string | null {
  if (process.platform !== 'linux')
    return 'read-replica tests need Linux (PostgreSQL binaries under /usr/lib/postgresql)';
  const bin = binDir();
  if (bin === undefined)
    return 'no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb): install postgresql';
  for (const tool of ['pg_basebackup', 'pg_ctl', 'postgres']) {
    if (!existsSync(join(bin, tool))) return `no ${tool} in ${bin}`;
  }
  if (isRoot() && !existsSync('/usr/sbin/runuser') && !existsSync('/sbin/runuser'))
    return 'running as root without runuser: PostgreSQL refuses to run as root';
  return null;
}

/**
 * Why the read-replica tests are skipped here (said on stderr), or null when they run. Under CI
 * (`CI=true`, or `TEST_CONTAINERS=require`) a pair that cannot be made fails the file instead: the
 * CI machine has PostgreSQL's binaries (.ci/run starts its local cluster).
 */
export function replicaTestsSkipped(file: string): string | null {
  const reason = replicaSkipReason();
  if (reason === null) return null;
  if (process.env.CI === 'true' || process.env.TEST_CONTAINERS === 'require')
    throw new Error(`${file} needs a streaming replica, and none can be made here: ${reason}`);
  process.stderr.write(`${file} skipped: ${reason}\n`);
  return reason;
}

/** A free loopback port (taken and let go: another process may take it first, rarely). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Runs a PostgreSQL binary, as `postgres` when this process is root. */
async function pgTool(bin: string, tool: string, args: readonly string[]): Promise<string> {
  const path = join(bin, tool);
  const [file, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, [...args]];
  try {
    const { stdout } = await run(file, argv, { cwd: '/tmp', timeout: 120_000 });
    return stdout;
  } catch (error) {
    const { stderr, stdout } = error as { stderr?: string; stdout?: string };
    throw new Error(`${tool} ${args.join(' ')} failed: ${stderr || stdout || String(error)}`, {
      cause: error,
    });
  }
}

/** Resolves once the server at `url` answers, within `ms`. */
async function untilAnswers(url: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

export type ReplicatedPair = {
  /** A URL of the primary, to `database` (default `postgres`). */
  primaryUrl(database?: string): string;
  /** A URL of the replica, to `database` (default `postgres`). */
  replicaUrl(database?: string): string;
  /** Starts the replica (again), with these settings (`recovery_min_apply_delay: '2s'`) on top of the pair's. */
  startReplica(settings?: Record<string, string>): Promise<void>;
  /** Stops the replica (fast shutdown); the primary goes on. */
  stopReplica(): Promise<void>;
  /** The pid of the primary's or the replica's postmaster (its backends and WAL processes are its children). */
  postmasterPid(which: 'primary' | 'replica'): Promise<number>;
  /** Resolves once the replica has replayed everything the primary has written so far. */
  caughtUp(ms?: number): Promise<void>;
  /** Stops both and removes their folder. */
  stop(): Promise<void>;
};

/**
 * Makes and starts a primary and a streaming replica of it (hot standby), the replica with `settings`
 * on top (see `startReplica`). Throws when it cannot; check `replicaSkipReason()` first.
 */
export async function startReplicatedPair(settings: Record<string, string> = {}): Promise<ReplicatedPair> {
  const bin = binDir();
  if (bin === undefined) throw new Error(replicaSkipReason() ?? 'no PostgreSQL binaries');
  const root = await mkdtemp(join(tmpdir(), 'cs-replica-'));
  const primaryDir = join(root, 'primary');
  const replicaDir = join(root, 'replica');
  if (isRoot()) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(root, Number(stdout.trim()), Number(gid.trim()));
  }
  await chmod(root, 0o700);
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const urlOf = (port: number, database = 'postgres'): string =>
    `postgres://postgres@127.0.0.1:${port}/${database}`;

  const ctl = async (
    dir: string,
    port: number,
    action: 'start' | 'stop',
    extra: Record<string, string> = {},
  ) => {
    if (action === 'stop') {
      await pgTool(bin, 'pg_ctl', ['-D', dir, '-m', 'fast', '-w', 'stop']);
      return;
    }
    const options = Object.entries({ port: String(port), ...extra })
      .map(([name, value]) => `-c ${name}=${value}`)
      .join(' ');
    await pgTool(bin, 'pg_ctl', [
      '-D',
      dir,
      '-w',
      '-t',
      '60',
      '-l',
      join(dir, 'server.log'),
      '-o',
      options,
      'start',
    ]);
    await untilAnswers(urlOf(port));
  };

  let primaryRunning = false;
  let replicaRunning = false;
  const stop = async (): Promise<void> => {
    if (replicaRunning) await ctl(replicaDir, replicaPort, 'stop').catch(() => {});
    if (primaryRunning) await ctl(primaryDir, primaryPort, 'stop').catch(() => {});
    replicaRunning = false;
    primaryRunning = false;
    await rm(root, { recursive: true, force: true });
  };

  try {
    await pgTool(bin, 'initdb', [
      '-D',
      primaryDir,
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-sync',
    ]);
    // initdb's pg_hba.conf with --auth=trust lets `replication` connections in from 127.0.0.1 too.
    await appendFile(
      join(primaryDir, 'postgresql.conf'),
      [
        "listen_addresses = '127.0.0.1'",
        `unix_socket_directories = '${root}'`,
        'wal_level = replica',
        'max_wal_senders = 5',
        'hot_standby = on',
        // Test clusters: losing them in a crash of the machine costs nothing.
        'fsync = off',
        'full_page_writes = off',
        'max_connections = 100',
        '',
      ].join('\n'),
    );
    await ctl(primaryDir, primaryPort, 'start');
    primaryRunning = true;
    await pgTool(bin, 'pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      replicaDir,
      '-R',
      '-X',
      'stream',
      '--no-sync',
    ]);
  } catch (error) {
    await stop();
    throw error;
  }

  const pair: ReplicatedPair = {
    primaryUrl: (database) => urlOf(primaryPort, database),
    replicaUrl: (database) => urlOf(replicaPort, database),
    async startReplica(more = {}) {
      await ctl(replicaDir, replicaPort, 'start', { hot_standby: 'on', ...settings, ...more });
      replicaRunning = true;
    },
    async stopReplica() {
      if (!replicaRunning) return;
      await ctl(replicaDir, replicaPort, 'stop');
      replicaRunning = false;
    },
    async postmasterPid(which) {
      const text = await readFile(
        join(which === 'primary' ? primaryDir : replicaDir, 'postmaster.pid'),
        'utf8',
      );
      return Number(text.split('\n')[0]);
    },
    async caughtUp(ms = 30_000) {
      const primary = new pg.Client({ connectionString: urlOf(primaryPort) });
      const replica = new pg.Client({ connectionString: urlOf(replicaPort) });
      await primary.connect();
      await replica.connect();
      try {
        const { rows } = await primary.query<{ lsn: string }>(
          'select pg_current_wal_insert_lsn()::text as lsn',
        );
        const target = rows[0]?.lsn;
        const deadline = Date.now() + ms;
        for (;;) {
          const { rows: at } = await replica.query<{ behind: boolean }>(
            'select pg_last_wal_replay_lsn() < $1::pg_lsn as behind',
            [target],
          );
          if (at[0]?.behind === false) return;
          if (Date.now() > deadline)
            throw new Error(`the replica did not replay up to ${target} within ${ms} ms`);
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        await primary.end();
        await replica.end();
      }
    },
    stop,
  };
  try {
    await pair.startReplica();
  } catch (error) {
    await stop();
    throw error;
  }
  return pair;
}
