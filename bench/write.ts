import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { bodyFacts, checkProtectedBlocks } from '../domain/html/facts.ts';
import { sanitizeHtml } from '../domain/html/sanitize.ts';
import { createHtmlMemory } from '../infra/html-memory.ts';
import { type CpuSeconds, cpuSeconds, cpuSince, startWaitTimeline, type WaitSample } from './load.ts';
import { type CpuProfile, startProfile } from './profile.ts';

/*
 * The write benchmarks:
 * - the sanitiser plus the protected-block check alone, on the 20 KB body with 10 protected blocks
 *   (target: 2 ms or less);
 * - PUT of that article at a fixed 100 edits/s, each one a new revision (target: p99 30 ms or less);
 * - saturation: 10 connections PUTting title-only edits as fast as the server answers, over 10
 *   articles and over one (aim: 2,800 edits/s over 10 articles).
 */

export type Timing = { runs: number; mean_ms: number; p50_ms: number; p99_ms: number; max_ms: number };

function summarise(samples: number[]): Timing {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const round = (x: number): number => Math.round(x * 1000) / 1000;
  return {
    runs: sorted.length,
    mean_ms: round(sorted.reduce((s, x) => s + x, 0) / Math.max(1, sorted.length)),
    p50_ms: round(at(0.5)),
    p99_ms: round(at(0.99)),
    max_ms: round(sorted[sorted.length - 1] ?? 0),
  };
}

/**
 * What an edit of the body costs in the domain: sanitise the new body, check it against the stored
 * one. Each run's body is new (no remembered facts of it); the stored one is the same throughout,
 * as for edits of one article.
 *
 * - `edit`: as in the service, where the stored body was sanitised by the process that stored it
 *   and is remembered (infra/html-memory.ts, domain/html/layout.ts): only the changed part of the new
 *   body is parsed.
 * - `full`: a body this process has never seen (nothing remembered, as after a restart): parsed in full.
 */
export function measureSanitiseAndCheck(
  body: string,
  mode: 'edit' | 'full',
  runs = 500,
  warmup = 50,
): Timing {
  const samples: number[] = [];
  const memory = createHtmlMemory();
  if (mode === 'edit') sanitizeHtml(body, memory);
  const stored = bodyFacts(body, memory);
  for (let i = 0; i < warmup + runs; i++) {
    const edited = body.replace('<p>', `<p>Edit ${mode} ${i}. `);
    if (mode === 'full') {
      memory.clear();
      memory.rememberFacts(body, stored);
    }
    const started = performance.now();
    const clean = sanitizeHtml(edited, memory).html;
    const check = checkProtectedBlocks(body, clean, memory);
    const took = performance.now() - started;
    if (!check.ok) throw new Error(`the benchmark edit must keep every protected block: ${check.summary}`);
    if (i >= warmup) samples.push(took);
  }
  return summarise(samples);
}

/** The edits that started in one second of the measured run: where a tail comes from. */
export type Second = {
  second: number;
  runs: number;
  p50_ms: number;
  max_ms: number;
  /** The database's sessions that were not idle, on average over the second's samples, by state and wait (the two largest). */
  db_busy: string;
  /** What the checkpointer did in most of the second's samples. */
  checkpointer: string;
  /** The longest the server's thread made a 10 ms timer wait beyond its time that second (a stall of the thread). */
  thread_late_ms: number | null;
};

type Wal = { records: number; full_page_images: number; bytes: number };

export type WriteLoad = Timing & {
  /** The fixed rate (edits a second) of an open-loop run; null when closed loop. */
  rate: number | null;
  /** The connections of a closed-loop run (each sends its next edit when the last is answered); null at a fixed rate. */
  connections: number | null;
  /** Whether the edits change the title only (otherwise title and body). */
  title_only: boolean;
  seconds: number;
  /** Measured edits answered a second: the edits started in the measured part ÷ the time until the last was answered. */
  edits_per_second: number;
  /**
   * CPU per edit during the measured part: the server's thread, this whole process (server and load
   * generator), the benchmark database's PostgreSQL backends, and the whole machine.
   */
  cpu_ms_per_edit: {
    server_thread: number;
    process: number;
    postgres: number;
    machine: number;
    /** What the hypervisor took from the machine's cores while they had work (`steal`). */
    steal: number;
    /** The machine less this process and the database's backends: other processes, PostgreSQL's own background work (WAL writer, checkpointer), the kernel's. */
    other: number;
  };
  /**
   * WAL PostgreSQL wrote per edit during the measured part (the whole cluster, `pg_stat_wal`):
   * records, full-page images (the first change of a page after a checkpoint) and bytes.
   */
  wal_per_edit: Wal;
  wall_seconds: number;
  /** Share of the measured part the server's event loop was busy (running, or ready to run and waiting for a core). */
  server_thread_busy: number;
  /** When the measured part started (second 1 of per_second). */
  measured_from: string;
  per_second: Second[];
  /** The database's sessions over the whole measured part, on average, by `state / wait event` (idle ones left out). */
  db_sessions: Record<string, number>;
  /** Every measured edit: [ms from the start of the measured part when it started, ms it took]. */
  edits: [number, number][];
  statuses: Record<string, number>;
  revisions_created: number;
};

/**
 * PUTs from a worker thread, so the load does not share the server's event loop: at a fixed rate
 * (open loop: a request starts every 1/rate s whether or not the last one has finished), or on
 * `connections` connections as fast as the server answers (closed loop). Each PUT changes the title
 * (and, unless `titleOnly`, the body), so each is a new revision. With `profile`, the server's thread
 * is profiled during the measured part.
 */
export async function measureEdits(opts: {
  /** Articles edited in turn. */
  urls: string[];
  key: string;
  body: string;
  rate?: number;
  connections?: number;
  titleOnly?: boolean;
  profile?: boolean;
  seconds: number;
  warmupSeconds: number;
  /** The benchmark database's name, to find its backends' CPU time. */
  database: string;
  /** The same database's URL, to sample what its sessions wait for. */
  databaseUrl: string;
}): Promise<WriteLoad & { profile?: CpuProfile }> {
  const timeline = await startWaitTimeline(opts.databaseUrl);
  const lateness = startLateness();
  const walClient = new pg.Client({ connectionString: opts.databaseUrl, application_name: 'bench:sampler' });
  await walClient.connect();
  const readWal = async (): Promise<Wal> => {
    const { rows } = await walClient.query<Record<keyof Wal, string>>(
      'select wal_records as records, wal_fpi as full_page_images, wal_bytes as bytes from pg_stat_wal',
    );
    const row = rows[0];
    return {
      records: Number(row?.records ?? 0),
      full_page_images: Number(row?.full_page_images ?? 0),
      bytes: Number(row?.bytes ?? 0),
    };
  };
  const { profile: _profile, ...load } = opts;
  const worker = new Worker(new URL('./write-worker.ts', import.meta.url), { workerData: load });
  let from:
    | {
        at: number;
        thread: NodeJS.CpuUsage;
        loop: ReturnType<typeof performance.eventLoopUtilization>;
        cpu: CpuSeconds;
        wal: Promise<Wal>;
      }
    | undefined;
  let profiler: ReturnType<typeof startProfile> | undefined;
  const result = await new Promise<{
    samples: number[];
    startedAt: number[];
    measuredFrom: string;
    statuses: Record<string, number>;
    created: number;
  }>((resolve, reject) => {
    worker.on('message', (message: { measuring: true } | Parameters<typeof resolve>[0]) => {
      if ('measuring' in message) {
        from = {
          at: performance.now(),
          thread: process.threadCpuUsage(),
          loop: performance.eventLoopUtilization(),
          cpu: cpuSeconds(opts.database),
          wal: readWal(),
        };
        if (opts.profile) profiler = startProfile();
      } else resolve(message);
    });
    worker.once('error', reject);
  });
  const wall = from ? (performance.now() - from.at) / 1000 : 0;
  const cpu = cpuSeconds(opts.database);
  const thread = process.threadCpuUsage(from?.thread);
  const loop = from ? performance.eventLoopUtilization(from.loop).utilization : 0;
  const profile = profiler ? await (await profiler).stop() : undefined;
  const walAfter = await readWal();
  const walBefore = from ? await from.wal : walAfter;
  await walClient.end();
  await worker.terminate();
  const waits = await timeline.stop();
  const late = lateness.stop();
  const edits = result.samples.length;
  const perEdit = (seconds: number): number => (edits === 0 ? 0 : Math.round((seconds / edits) * 1e5) / 100);
  const used = from ? cpuSince(from.cpu, cpu) : { node: 0, postgres: 0, machine: 0, steal: 0 };
  const measuredFrom = Date.parse(result.measuredFrom);
  const walPerEdit = (key: keyof Wal, digits: number): number =>
    edits === 0 ? 0 : Math.round(((walAfter[key] - walBefore[key]) / edits) * 10 ** digits) / 10 ** digits;
  return {
    cpu_ms_per_edit: {
      server_thread: perEdit((thread.user + thread.system) / 1e6),
      process: perEdit(used.node),
      postgres: perEdit(used.postgres),
      machine: perEdit(used.machine),
      steal: perEdit(used.steal),
      other: perEdit(Math.max(0, used.machine - used.node - used.postgres)),
    },
    wal_per_edit: {
      records: walPerEdit('records', 1),
      full_page_images: walPerEdit('full_page_images', 2),
      bytes: walPerEdit('bytes', 0),
    },
    wall_seconds: Math.round(wall * 100) / 100,
    server_thread_busy: Math.round(loop * 1000) / 1000,
    ...summarise(result.samples),
    rate: opts.connections ? null : (opts.rate ?? 100),
    connections: opts.connections ?? null,
    title_only: opts.titleOnly ?? false,
    seconds: opts.seconds,
    edits_per_second: wall === 0 ? 0 : Math.round(edits / wall),
    measured_from: result.measuredFrom,
    per_second: perSecond(
      result.samples,
      result.startedAt,
      waitsBySecond(waits, measuredFrom),
      latenessBySecond(late, measuredFrom),
    ),
    db_sessions: sessionsDuring(waits, measuredFrom, measuredFrom + wall * 1000),
    edits: result.samples.map((took, i) => [
      Math.round(result.startedAt[i] ?? 0),
      Math.round(took * 10) / 10,
    ]),
    statuses: result.statuses,
    revisions_created: result.created,
    ...(profile ? { profile } : {}),
  };
}

/**
 * The database's sessions that were not idle, on average over the samples taken between `fromMs` and
 * `toMs` (epoch ms), by `state / wait event`, largest first (under 0.05 left out).
 */
export function sessionsDuring(
  samples: readonly WaitSample[],
  fromMs: number,
  toMs: number,
): Record<string, number> {
  const within = samples.filter((sample) => {
    const at = performance.timeOrigin + sample.at;
    return at >= fromMs && at <= toMs;
  });
  const totals = new Map<string, number>();
  for (const sample of within) {
    for (const [what, n] of Object.entries(sample.sessions)) {
      if (what.startsWith('idle / Client:ClientRead') || what === 'idle') continue;
      totals.set(what, (totals.get(what) ?? 0) + n);
    }
  }
  return Object.fromEntries(
    [...totals.entries()]
      .map(([what, n]) => [what, Math.round((n / Math.max(1, within.length)) * 100) / 100] as const)
      .filter(([, n]) => n >= 0.05)
      .sort((a, b) => b[1] - a[1]),
  );
}

/** Latencies grouped by the second their request started in, with what the database did in that second. */
export function perSecond(
  samples: readonly number[],
  startedAt: readonly number[],
  waits: ReadonlyMap<number, Pick<Second, 'db_busy' | 'checkpointer'>> = new Map(),
  late: ReadonlyMap<number, number> = new Map(),
): Second[] {
  const groups = new Map<number, number[]>();
  samples.forEach((took, i) => {
    const second = Math.floor((startedAt[i] ?? 0) / 1000);
    groups.set(second, [...(groups.get(second) ?? []), took]);
  });
  return [...groups.entries()]
    .sort(([a], [b]) => a - b)
    .map(([second, took]) => {
      const t = summarise(took);
      const w = waits.get(second) ?? { db_busy: '', checkpointer: '' };
      return {
        second,
        runs: t.runs,
        p50_ms: t.p50_ms,
        max_ms: t.max_ms,
        ...w,
        thread_late_ms: late.get(second) ?? null,
      };
    });
}

/** How often the lateness sampler's timer is due. */
const TICK_MS = 10;

/**
 * Samples how late a 10 ms timer of this thread (the server's) fires, until `stop`: a late timer is a
 * stretch in which the thread ran something else without a break, or was not given a core.
 */
export function startLateness(): { stop(): { at: number; lateMs: number }[] } {
  const samples: { at: number; lateMs: number }[] = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    samples.push({ at: now, lateMs: Math.max(0, now - last - TICK_MS) });
    last = now;
  }, TICK_MS);
  return {
    stop() {
      clearInterval(timer);
      return samples;
    },
  };
}

/** The longest lateness by second from `measuredFrom` (epoch ms), of the second a late tick ended in. */
export function latenessBySecond(
  samples: readonly { at: number; lateMs: number }[],
  measuredFrom: number,
): Map<number, number> {
  const out = new Map<number, number>();
  for (const { at, lateMs } of samples) {
    const second = Math.floor((performance.timeOrigin + at - measuredFrom) / 1000);
    if (second < 0) continue;
    out.set(second, Math.max(out.get(second) ?? 0, Math.round(lateMs * 10) / 10));
  }
  return out;
}

/** The wait timeline by second from `measuredFrom` (epoch ms): busy sessions (not idle) and the checkpointer. */
export function waitsBySecond(
  samples: readonly WaitSample[],
  measuredFrom: number,
): Map<number, Pick<Second, 'db_busy' | 'checkpointer'>> {
  const bySecond = new Map<number, WaitSample[]>();
  for (const sample of samples) {
    const second = Math.floor((performance.timeOrigin + sample.at - measuredFrom) / 1000);
    if (second < 0) continue;
    bySecond.set(second, [...(bySecond.get(second) ?? []), sample]);
  }
  const out = new Map<number, Pick<Second, 'db_busy' | 'checkpointer'>>();
  for (const [second, list] of bySecond) {
    const busy = new Map<string, number>();
    const checkpointer = new Map<string, number>();
    for (const sample of list) {
      for (const [what, n] of Object.entries(sample.sessions)) {
        if (what.startsWith('idle / Client:ClientRead') || what === 'idle') continue;
        busy.set(what, (busy.get(what) ?? 0) + n);
      }
      checkpointer.set(sample.checkpointer, (checkpointer.get(sample.checkpointer) ?? 0) + 1);
    }
    out.set(second, {
      db_busy: [...busy.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 2)
        .map(([what, n]) => `${what}: ${Math.round((n / list.length) * 100) / 100}`)
        .join('; '),
      checkpointer: [...checkpointer.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? '',
    });
  }
  return out;
}
