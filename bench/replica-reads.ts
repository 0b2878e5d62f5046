import { readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import pg from 'pg';
import { seedDemo } from '../apps/cli/seed-demo.ts';
import { openRuntime } from '../apps/runtime.ts';
import { buildApp } from '../apps/server/app.ts';
import { createRequestLimiter } from '../apps/server/http/limits.ts';
import { createReplicaReads, primaryReads, type Reads } from '../infra/db/replicas.ts';
import { memoryPositions } from '../infra/db/write-positions.ts';
import { type ReplicatedPair, replicaSkipReason, startReplicatedPair } from '../tests/support/replica.ts';

/*
 * Reads with and without a streaming replica (docs/performance.md, "Read replicas"): a primary and a
 * replica of it made for the run (tests/support/replica.ts), the demo data of a few accounts, and the
 * server's API (in this process) answering article lists and single articles of one account as fast
 * as it can, first with every read on the primary, then with the reads on the replica. Reported per
 * case: requests a second, and the CPU of each PostgreSQL server (its postmaster and every child:
 * backends, WAL sender and receiver, replay) and of this process, in cores.
 *
 * `node bench/replica-reads.ts [--seconds N] [--connections N]`; writes bench/results/replica-reads-latest.json.
 */

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const SECONDS = option('seconds', 15);
const WARMUP_SECONDS = 3;
const CONNECTIONS = option('connections', 16);
const DATABASE = 'bench';
const quiet = { info: () => {}, warn: () => {}, error: () => {} };

/** CPU seconds so far of each process of a PostgreSQL server: its postmaster and its children (Linux /proc). */
function serverCpu(postmaster: number): Map<string, number> {
  const seconds = new Map<string, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // ppid is the 2nd field after the name; utime and stime the 12th and 13th.
      if (Number(pid) !== postmaster && Number(fields[1]) !== postmaster) continue;
      seconds.set(pid, (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {
      // ended meanwhile
    }
  }
  return seconds;
}

/** CPU seconds between two readings: a process that ended in between is left out, one that started counts from zero. */
function cpuBetween(before: Map<string, number>, after: Map<string, number>): number {
  let sum = 0;
  for (const [pid, seconds] of after) sum += seconds - (before.get(pid) ?? 0);
  return sum;
}

type Case = {
  case: string;
  route: string;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  non2xx: number;
  cores: { primary: number; replica: number; node: number };
  primary_cpu_ms_per_1000_reads: number;
};

async function run(
  pair: ReplicatedPair,
  name: string,
  url: string,
  route: string,
  key: string,
): Promise<Case> {
  const headers = { authorization: `Bearer ${key}` };
  await autocannon({ url, headers, connections: CONNECTIONS, duration: WARMUP_SECONDS, workers: 1 });
  const [primaryPid, replicaPid] = [await pair.postmasterPid('primary'), await pair.postmasterPid('replica')];
  const before = { primary: serverCpu(primaryPid), replica: serverCpu(replicaPid), node: process.cpuUsage() };
  const started = performance.now();
  const result = await autocannon({ url, headers, connections: CONNECTIONS, duration: SECONDS, workers: 1 });
  const wall = (performance.now() - started) / 1000;
  const node = process.cpuUsage(before.node);
  const primary = cpuBetween(before.primary, serverCpu(primaryPid));
  const replica = cpuBetween(before.replica, serverCpu(replicaPid));
  const round = (v: number, d = 2) => Math.round(v * 10 ** d) / 10 ** d;
  return {
    case: name,
    route,
    rps: round(result.requests.average, 1),
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
    non2xx: result.non2xx,
    cores: {
      primary: round(primary / wall),
      replica: round(replica / wall),
      node: round((node.user + node.system) / 1e6 / wall),
    },
    primary_cpu_ms_per_1000_reads: round((primary * 1000 * 1000) / Math.max(1, result.requests.total), 1),
  };
}

async function main(): Promise<void> {
  const skip = replicaSkipReason();
  if (skip) {
    process.stderr.write(`bench/replica-reads.ts cannot run here: ${skip}\n`);
    process.exit(1);
  }
  const pair = await startReplicatedPair();
  const cases: Case[] = [];
  try {
    const admin = new pg.Client({ connectionString: pair.primaryUrl() });
    await admin.connect();
    await admin.query(`create database ${DATABASE}`);
    await admin.end();
    const runtime = await openRuntime(
      { DATABASE_URL: pair.primaryUrl(DATABASE), DATA_DIR: '/tmp/cs-bench-replica' },
      { migrate: true, logger: quiet },
    );
    const demo = await seedDemo(runtime, { sites: 2, articles: 50, backlinks: 50, quiet: true, seed: 7 });
    for (let i = 0; i < 4; i++)
      await seedDemo(runtime, { sites: 2, articles: 50, backlinks: 50, quiet: true });
    const site = demo.sites[0]?.id ?? '';
    const rows = await runtime.db
      .selectFrom('articles')
      .select('id')
      .where('site_id', '=', site)
      .limit(1)
      .execute();
    const article = rows[0]?.id ?? '';
    await pair.caughtUp();
    const replicas = await createReplicaReads({
      primary: runtime.db,
      urls: [pair.replicaUrl(DATABASE)],
      maxLagSeconds: 5,
      positions: memoryPositions(),
      logger: quiet,
    });
    const variants: Array<[string, Reads]> = [
      ['primary only', primaryReads(runtime.db)],
      ['one replica', replicas],
    ];
    const routes: Array<[string, string]> = [
      ['/api/v1/sites/:id/articles?per_page=20', `/api/v1/sites/${site}/articles?per_page=20`],
      ['/api/v1/articles/:id', `/api/v1/articles/${article}`],
    ];
    for (const [name, reads] of variants) {
      const limiter = createRequestLimiter({ perMinute: 10_000_000, logger: quiet });
      const app = await buildApp({
        runtime,
        config: {
          PUBLIC_URL: 'http://bench.example',
          LOG_LEVEL: 'silent',
          MEDIA_DIR: '/tmp/cs-bench-replica/media',
        },
        logger: false,
        reads,
        limit: limiter.hook,
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as { port: number };
      for (const [route, path] of routes) {
        const measured = await run(pair, name, `http://127.0.0.1:${port}${path}`, route, demo.api_key);
        cases.push(measured);
        process.stdout.write(`${JSON.stringify(measured)}\n`);
      }
      await app.close();
      await limiter.close();
    }
    await replicas.close();
    await runtime.close();
  } finally {
    await pair.stop();
  }
  const machine = {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: availableParallelism(),
    memory_gb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    postgres: 'both servers on this machine, fsync off (tests/support/replica.ts)',
  };
  const out = { at: new Date().toISOString(), machine, seconds: SECONDS, connections: CONNECTIONS, cases };
  await writeFile(
    join(import.meta.dirname, 'results', 'replica-reads-latest.json'),
    `${JSON.stringify(out, null, 2)}\n`,
  );
}

await main();
