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
  reference?: { label: string; path: string; result: Measurement; ratio: number }[];
};

export type StatsComparison = {
  period: string;
  p99_small_ms: number;
  p99_big_ms: number;
  /** p99 at 1,000,000 backlinks ÷ p99 at 1,000. */
  ratio: number;
  /** Within ±20%. */
  met: boolean;
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
    load_generator: string;
    rate_limit_per_minute: number;
    log_level: string;
    workers_in_process: boolean;
    database_pool: number;
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
      `${r.settings.duration_s} s per run, load generator: ${r.settings.load_generator}.`,
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
  lines.push('| period | p99 at 1k ms | p99 at 1M ms | ratio | met |');
  lines.push('|---|---:|---:|---:|---|');
  for (const c of r.stats_p99) {
    lines.push(
      `| ${c.period} | ${ms(c.p99_small_ms)} | ${ms(c.p99_big_ms)} | ${c.ratio.toFixed(2)} | ${c.met ? 'yes' : 'no'} |`,
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
        `| ${s.name} | ${ref.label} | ${rps(ref.result.rps)} | ${ms(ref.result.p50_ms)} | ${ms(ref.result.p99_ms)} | ${ref.ratio.toFixed(2)} |`,
      );
    }
  }
  lines.push('');
  lines.push(
    'CPU during each run, in cores: this process (server thread + load generator thread) / the benchmark ' +
      "database's PostgreSQL backends / everything else on the machine; and the database sessions of the real run " +
      '(average count per state / wait event):',
  );
  lines.push('');
  lines.push(
    '| scenario | real: server thread busy | real: cores | floor: server thread busy | floor: cores | real: sessions |',
  );
  lines.push('|---|---:|---:|---:|---:|---|');
  const cores = (m: Measurement): string =>
    `${m.cpu_cores.node} / ${m.cpu_cores.postgres} / ${m.cpu_cores.other}`;
  for (const s of r.scenarios) {
    const sessions = Object.entries(s.real.db_sessions)
      .slice(0, 4)
      .map(([what, n]) => `${what}: ${n}`)
      .join('; ');
    lines.push(
      `| ${s.name} | ${pct(s.real.server_thread_busy)} | ${cores(s.real)} | ${pct(s.floor.server_thread_busy)} | ` +
        `${cores(s.floor)} | ${sessions} |`,
    );
  }
  for (const [name, p] of Object.entries(r.profiles)) {
    lines.push('');
    lines.push(
      `Profile of the real route, ${name} (server thread ${pct(p.busy)} busy; self time as a share of busy time):`,
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
