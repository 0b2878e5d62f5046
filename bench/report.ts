import { mkdir, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { resolve } from 'node:path';
import type { Measurement } from './load.ts';
import type { ProfileSummary } from './profile.ts';

export type ScenarioResult = {
  name: string;
  description: string;
  real_path: string;
  floor_path: string;
  real: Measurement;
  floor: Measurement;
  /** real req/s ÷ floor req/s. */
  ratio: number;
  /** For list and get: ratio at least `min_ratio`. */
  target: { min_ratio: number; met: boolean } | null;
  /** Extra measurements that explain the gap (e.g. the read model's full cost), not targets. */
  reference?: {
    label: string;
    path: string;
    rate: number | null;
    result: Measurement;
    ratio: number | null;
  }[];
  /** Every run; `real` and `floor` above are their medians. */
  rounds: { real: Measurement[]; floor: Measurement[] };
};

export type StatsComparison = {
  period: string;
  p99_small_ms: number;
  p99_big_ms: number;
  /** p99 at 1,000,000 backlinks ÷ p99 at 1,000. */
  ratio: number;
  /** Within ±20%. */
  met: boolean;
  /** The floors' p99 on the same two sites: how much the two differ when only the query runs. */
  floor_p99_small_ms: number;
  floor_p99_big_ms: number;
  /** The same comparison at a fixed request rate below saturation (not the target's method; a diagnosis). */
  fixed_rate: {
    rate: number;
    p99_small_ms: number;
    p99_big_ms: number;
    ratio: number;
    within: boolean;
  } | null;
};

export type BenchResults = {
  format: 1;
  started_at: string;
  finished_at: string;
  machine: {
    cpus: number;
    cpu_model: string;
    memory_gib: number;
    node: string;
    postgres: string;
    os: string;
  };
  settings: {
    connections: number;
    duration_s: number;
    warmup_s: number;
    rounds: number;
    stats_fixed_rate: number;
    load_generator: string;
    rate_limit_per_minute: number;
    log_level: string;
    workers_in_process: boolean;
    database_pool: number;
    /** Cores other processes used just before the measurements started. */
    busy_elsewhere_cores_at_start: number;
  };
  dataset: Record<string, unknown>;
  scenarios: ScenarioResult[];
  stats_p99: StatsComparison[];
  profiles: Record<string, ProfileSummary>;
  /** Every run answered 2xx only, without connection errors. */
  clean: boolean;
  targets_met: boolean;
};

const ms = (v: number): string => (v >= 10 ? v.toFixed(0) : v.toFixed(1));
const rps = (v: number): string => v.toFixed(0);

export function markdown(r: BenchResults): string {
  const lines: string[] = [];
  lines.push(`# Benchmark results (${r.finished_at.slice(0, 16).replace('T', ' ')} UTC)`);
  lines.push('');
  lines.push(
    `${r.machine.cpus} cores (${r.machine.cpu_model}), ${r.machine.memory_gib} GiB, Node ${r.machine.node}, ` +
      `${r.machine.postgres}. ${r.settings.connections} connections, ${r.settings.warmup_s} s warm-up + ` +
      `${r.settings.duration_s} s per run, ${r.settings.rounds} rounds (medians), load generator: ` +
      `${r.settings.load_generator}. Request quota ${r.settings.rate_limit_per_minute}/min (raised by configuration), ` +
      `log level ${r.settings.log_level}.`,
  );
  lines.push('');
  lines.push(
    '| scenario | real req/s | real p50 ms | real p99 ms | floor req/s | floor p50 ms | floor p99 ms | ratio | errors / non-2xx | target | met |',
  );
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|');
  for (const s of r.scenarios) {
    lines.push(
      `| ${s.name} | ${rps(s.real.rps)} | ${ms(s.real.p50_ms)} | ${ms(s.real.p99_ms)} | ${rps(s.floor.rps)} | ` +
        `${ms(s.floor.p50_ms)} | ${ms(s.floor.p99_ms)} | ${s.ratio.toFixed(2)} | ` +
        `${s.real.errors + s.floor.errors} / ${s.real.non2xx + s.floor.non2xx} | ` +
        `${s.target ? `≥ ${s.target.min_ratio} of floor` : 'see p99 below'} | ${s.target ? (s.target.met ? 'yes' : 'no') : ''} |`,
    );
  }
  lines.push('');
  lines.push('Statistics, p99 at 1,000,000 backlinks against 1,000 (target: the same within 20%):');
  lines.push('');
  lines.push(
    '| period | p99 at 1k ms | p99 at 1M ms | ratio | met | floor p99 at 1k / 1M ms | at a fixed rate: p99 at 1k / 1M ms (ratio) |',
  );
  lines.push('|---|---:|---:|---:|---|---:|---:|');
  for (const c of r.stats_p99) {
    const fixed = c.fixed_rate
      ? `${c.fixed_rate.rate}/s: ${ms(c.fixed_rate.p99_small_ms)} / ${ms(c.fixed_rate.p99_big_ms)} (${c.fixed_rate.ratio.toFixed(2)})`
      : '';
    lines.push(
      `| ${c.period} | ${ms(c.p99_small_ms)} | ${ms(c.p99_big_ms)} | ${c.ratio.toFixed(2)} | ${c.met ? 'yes' : 'no'} | ` +
        `${ms(c.floor_p99_small_ms)} / ${ms(c.floor_p99_big_ms)} | ${fixed} |`,
    );
  }
  const references = r.scenarios.flatMap((s) => (s.reference ?? []).map((ref) => ({ s, ref })));
  if (references.length > 0) {
    lines.push('');
    lines.push('Reference runs (not targets):');
    lines.push('');
    lines.push('| scenario | reference | req/s | p50 ms | p99 ms | real ÷ reference |');
    lines.push('|---|---|---:|---:|---:|---:|');
    for (const { s, ref } of references) {
      lines.push(
        `| ${s.name} | ${ref.label} | ${rps(ref.result.rps)} | ${ms(ref.result.p50_ms)} | ${ms(ref.result.p99_ms)} | ` +
          `${ref.ratio === null ? '' : ref.ratio.toFixed(2)} |`,
      );
    }
  }
  lines.push('');
  lines.push(
    'CPU during each run, in cores: this process (server thread + load generator thread) / the benchmark ' +
      "database's PostgreSQL backends / everything else on the machine; CPU time per request of the server's thread " +
      '(its own CPU clock, not counting time it waited for a core) and of the PostgreSQL backends; and the database sessions of the real run ' +
      '(average count per state / wait event):',
  );
  lines.push('');
  lines.push(
    '| scenario | real: server thread busy | real: event-loop delay p99 ms | real: cores | floor: server thread busy | floor: cores | CPU µs per request, server thread: real / floor | PostgreSQL: real / floor | real: sessions |',
  );
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---|');
  // CPU seconds per second divided by requests per second: what one request costs.
  const perRequest = (m: Measurement, coresUsed: number | undefined): string =>
    coresUsed === undefined || m.rps === 0 ? '' : String(Math.round((coresUsed / m.rps) * 1e6));
  const cores = (m: Measurement): string =>
    `${m.cpu_cores.node} / ${m.cpu_cores.postgres} / ${m.cpu_cores.other}`;
  for (const s of r.scenarios) {
    const sessions = Object.entries(s.real.db_sessions)
      .slice(0, 4)
      .map(([what, n]) => `${what}: ${n}`)
      .join('; ');
    lines.push(
      `| ${s.name} | ${pct(s.real.server_thread_busy)} | ${s.real.event_loop_delay_ms.p99} | ${cores(s.real)} | ` +
        `${pct(s.floor.server_thread_busy)} | ` +
        `${cores(s.floor)} | ${perRequest(s.real, s.real.server_thread_cpu)} / ${perRequest(s.floor, s.floor.server_thread_cpu)} | ` +
        `${perRequest(s.real, s.real.cpu_cores.postgres)} / ${perRequest(s.floor, s.floor.cpu_cores.postgres)} | ${sessions} |`,
    );
  }
  for (const [name, p] of Object.entries(r.profiles)) {
    lines.push('');
    lines.push(
      `Profile of ${name.endsWith(' (floor)') ? `the floor, ${name.slice(0, -' (floor)'.length)}` : `the real route, ${name}`} (server thread ${pct(p.busy)} busy; self time as a share of busy time):`,
    );
    lines.push('');
    lines.push('| where | share |');
    lines.push('|---|---:|');
    for (const m of p.by_module.slice(0, 10)) lines.push(`| ${m.where} | ${pct(m.share)} |`);
  }
  lines.push('');
  lines.push(
    `All runs clean (2xx only, no errors): ${r.clean ? 'yes' : 'NO'}. All targets met: ${r.targets_met ? 'yes' : 'no'}.`,
  );
  lines.push('');
  return lines.join('\n');
}

function pct(v: number): string {
  return `${(v * 100).toFixed(0)}%`;
}

/**
 * Writes a benchmark's results in bench/results: `<name>-<finished at>.json` (kept local) and
 * `<name>-latest.json` and `.md` (committed), each written aside and renamed into place, so that an
 * interrupted run never leaves a half-written latest.
 */
export async function saveResults(
  name: string,
  results: { finished_at: string },
  markdownText: string,
): Promise<void> {
  const dir = resolve(import.meta.dirname, 'results');
  await mkdir(dir, { recursive: true });
  const json = `${JSON.stringify(results, null, 2)}\n`;
  await writeFile(resolve(dir, `${name}-${results.finished_at.replace(/[:.]/g, '-')}.json`), json);
  for (const [file, text] of [
    [`${name}-latest.json`, json],
    [`${name}-latest.md`, markdownText],
  ] as const) {
    await writeFile(resolve(dir, `${file}.tmp`), text);
    await rename(resolve(dir, `${file}.tmp`), resolve(dir, file));
  }
}

/** The median of `xs` (the mean of the middle two for an even count); 0 for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length === 0
    ? 0
    : s.length % 2
      ? (s[mid] as number)
      : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** The machine a benchmark ran on: its cores, their model and its memory. */
export function machineOf(): { cpus: number; cpu_model: string; memory_gib: number } {
  return {
    cpus: os.availableParallelism(),
    cpu_model: os.cpus()[0]?.model.trim() ?? 'unknown',
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
  };
}
