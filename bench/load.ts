import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import pg from 'pg';

export type LoadSettings = {
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  /** A fixed rate (requests per second over all connections) instead of as fast as the server answers. */
  rate?: number | undefined;
};

/** One measured run against one URL. Latencies in milliseconds. */
export type Measurement = {
  url: string;
  requests: number;
  rps: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  max_ms: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  status_codes: Record<string, number>;
  /** Busy fraction of the server's event loop (the bench process's main thread). */
  server_thread_busy: number;
  /** CPU seconds per second of the server's thread alone (less than busy when it waits for a core). */
  server_thread_cpu: number;
  /** How late the server's event loop ran timers (5 ms resolution): stalls every request in flight waits out. */
  event_loop_delay_ms: { p50: number; p99: number; max: number };
  /**
   * CPU seconds per second of the run: this process (server and load generator threads), the
   * PostgreSQL backends of the benchmark database, and everything else on the machine (other
   * databases' backends and PostgreSQL's own background processes included).
   */
  cpu_cores: { node: number; postgres: number; other: number };
  /** Average number of the database's sessions per `state / wait event` during the run. */
  db_sessions: Record<string, number>;
};

/**
 * autocannon in a worker thread (so the load generator does not share the server's event loop),
 * `warmupSeconds` of warm-up, then `durationSeconds` measured. With `databaseUrl`, the database's
 * sessions are sampled during the measured part.
 */
export async function measure(
  url: string,
  settings: LoadSettings,
  opts: {
    headers?: Record<string, string>;
    databaseUrl?: string;
    /** Paths each connection asks for in turn, again and again, instead of the URL's own. */
    paths?: readonly string[];
  } = {},
): Promise<Measurement> {
  const headers = opts.headers ?? {};
  const requests = opts.paths?.map((path) => ({ method: 'GET' as const, path }));
  if (settings.warmupSeconds > 0) {
    await autocannon({
      url,
      headers,
      connections: settings.connections,
      duration: settings.warmupSeconds,
      workers: 1,
      ...(requests ? { requests } : {}),
      ...(settings.rate ? { overallRate: settings.rate } : {}),
    });
  }
  const database = opts.databaseUrl ? new URL(opts.databaseUrl).pathname.slice(1) : '';
  const sampler = opts.databaseUrl ? await startSessionSampler(opts.databaseUrl) : null;
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  const elu = performance.eventLoopUtilization();
  const cpuBefore = cpuSeconds(database);
  const threadBefore = process.threadCpuUsage();
  const started = performance.now();
  const result = await autocannon({
    url,
    headers,
    connections: settings.connections,
    duration: settings.durationSeconds,
    workers: 1,
    ...(requests ? { requests } : {}),
    ...(settings.rate ? { overallRate: settings.rate } : {}),
  });
  const wall = (performance.now() - started) / 1000;
  const cpuAfter = cpuSeconds(database);
  const thread = process.threadCpuUsage(threadBefore);
  const busy = performance.eventLoopUtilization(elu);
  loopDelay.disable();
  const sessions = (await sampler?.stop()) ?? {};
  const statusCodes: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {}))
    statusCodes[code] = Number(stat.count);
  const used = cpuSince(cpuBefore, cpuAfter);
  const cores = (key: keyof typeof used): number => round(used[key] / wall, 2);
  return {
    url,
    requests: result.requests.total,
    rps: round(result.requests.average, 1),
    p50_ms: result.latency.p50,
    p90_ms: result.latency.p90,
    p99_ms: result.latency.p99,
    max_ms: result.latency.max,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    status_codes: statusCodes,
    server_thread_busy: round(busy.utilization, 3),
    server_thread_cpu: round((thread.user + thread.system) / 1e6 / wall, 3),
    event_loop_delay_ms: {
      p50: round(loopDelay.percentile(50) / 1e6, 1),
      p99: round(loopDelay.percentile(99) / 1e6, 1),
      max: round(loopDelay.max / 1e6, 1),
    },
    cpu_cores: {
      node: cores('node'),
      postgres: cores('postgres'),
      // Clamped to the machine: /proc/stat has been seen to jump once in a while inside a VM.
      other: round(
        Math.min(availableParallelism(), Math.max(0, cores('machine') - cores('node') - cores('postgres'))),
        2,
      ),
    },
    db_sessions: sessions,
  };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export type CpuSeconds = {
  node: number;
  postgres: number;
  machine: number;
  /** CPU seconds the hypervisor gave to others while this machine's cores had work (`steal`). */
  steal: number;
  /** CPU seconds of each of the database's backends, by pid. */
  backends: Map<string, number>;
};

/**
 * CPU seconds spent between two readings. The database's backends are counted pid by pid: a backend
 * that ended in between takes its time away from the sum, so it is left out (its last moments are
 * not counted), and one that started counts from zero.
 */
export function cpuSince(
  before: CpuSeconds,
  after: CpuSeconds,
): { node: number; postgres: number; machine: number; steal: number } {
  let postgres = 0;
  for (const [pid, seconds] of after.backends) postgres += seconds - (before.backends.get(pid) ?? 0);
  return {
    node: after.node - before.node,
    postgres,
    machine: after.machine - before.machine,
    steal: after.steal - before.steal,
  };
}

/**
 * CPU seconds used so far (Linux /proc, 100 ticks a second; zeros elsewhere): by this process (the
 * server and the load generator's thread), by the PostgreSQL backends serving `database` (their
 * process title names it), and by the whole machine.
 */
export function cpuSeconds(database: string): CpuSeconds {
  const usage = process.cpuUsage();
  const node = (usage.user + usage.system) / 1e6;
  let postgres = 0;
  let machine = 0;
  let steal = 0;
  const backends = new Map<string, number>();
  try {
    const total =
      readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
    // user nice system idle iowait irq softirq steal: busy is everything but idle and iowait.
    machine = total.slice(0, 8).reduce((sum, v, i) => (i === 3 || i === 4 ? sum : sum + v), 0) / 100;
    steal = (total[7] ?? 0) / 100;
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      let stat: string;
      let title: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        if (!stat.includes('(postgres')) continue;
        title = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      } catch {
        continue; // ended meanwhile
      }
      if (database === '' || !title.includes(` ${database} `)) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime and stime: fields 14 and 15 of the line, 12th and 13th after the command name.
      const seconds = (Number(fields[11]) + Number(fields[12])) / 100;
      backends.set(pid, seconds);
      postgres += seconds;
    }
  } catch {
    return { node, postgres: 0, machine: 0, steal: 0, backends: new Map() };
  }
  return { node, postgres, machine, steal, backends };
}

/**
 * Samples the benchmark database's sessions every 50 ms on a connection of its own: what the
 * server's connections are doing (running, idle in a transaction, waiting for a lock...), as the
 * average number of sessions per `state / wait event`.
 */
export async function startSessionSampler(
  databaseUrl: string,
): Promise<{ stop(): Promise<Record<string, number>> }> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench:sampler' });
  await client.connect();
  const counts = new Map<string, number>();
  let samples = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await client.query<{ what: string; n: string }>(
        `select state || coalesce(' / ' || wait_event_type || ':' || wait_event, '') as what, count(*) as n
           from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid()
            and application_name not in ('content-service:listen', 'bench:sampler')
          group by 1`,
      );
      samples++;
      for (const row of rows) counts.set(row.what, (counts.get(row.what) ?? 0) + Number(row.n));
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await client.end();
      return Object.fromEntries(
        [...counts.entries()]
          .map(([what, n]) => [what, round(n / Math.max(samples, 1), 2)] as const)
          .filter(([, n]) => n >= 0.05)
          .sort((a, b) => b[1] - a[1]),
      );
    },
  };
}

/** What the database was doing in one sample: sessions per `state / wait event`, and the checkpointer's wait. */
export type WaitSample = { at: number; sessions: Record<string, number>; checkpointer: string };

/**
 * Samples every `everyMs` what the benchmark database's sessions wait for (as startSessionSampler)
 * and what the checkpointer is doing, each sample with its time (`performance.now()`): a burst of
 * slow requests can be laid next to what the database did in that second.
 */
export async function startWaitTimeline(
  databaseUrl: string,
  everyMs = 20,
): Promise<{ stop(): Promise<WaitSample[]> }> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench:sampler' });
  await client.connect();
  const samples: WaitSample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const at = performance.now();
      const { rows } = await client.query<{ what: string; n: string; checkpointer: boolean }>(
        `select coalesce(state, '') || coalesce(' / ' || wait_event_type || ':' || wait_event, '') as what,
                count(*) as n, backend_type = 'checkpointer' as checkpointer
           from pg_stat_activity
          where ((datname = current_database()
                  and application_name not in ('content-service:listen', 'bench:sampler'))
                 or backend_type = 'checkpointer')
            and pid <> pg_backend_pid()
          group by 1, 3`,
      );
      const sessions: Record<string, number> = {};
      let checkpointer = 'idle';
      for (const row of rows) {
        if (row.checkpointer) checkpointer = row.what.replace(/^ \/ /, '') || 'working';
        else sessions[row.what] = Number(row.n);
      }
      samples.push({ at, sessions, checkpointer });
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await client.end();
      return samples;
    },
  };
}

/** Cores the rest of the machine (everything but this process) used over the next `ms`. */
export async function busyElsewhere(ms: number): Promise<number> {
  const before = cpuSeconds('');
  const started = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const after = cpuSeconds('');
  const wall = (performance.now() - started) / 1000;
  return round(Math.max(0, after.machine - before.machine - (after.node - before.node)) / wall, 2);
}
