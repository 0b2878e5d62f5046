import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { hasEmbeddedTemplate } from '../infra/db/embedded-template.ts';
import { cliArgsOf, scriptArgsOf } from '../tests/support/process.ts';
import { busyElsewhere } from './load.ts';
import { machineOf, median, saveResults } from './report.ts';

/*
 * `npm run bench:start`, the last part of `npm run bench`: how long a person waits for the service.
 *
 * - first start: `npm start` without npm (Node's arguments from package.json: `node
 *   apps/server/main.js`) on a new embedded DATA_DIR (PGlite, no DATABASE_URL), with the compile cache
 *   as `npm install` leaves it (its step apps/server/compile-ahead.ts run into an empty cache folder
 *   first, not timed), as after `npm install && npm start`: the demo account is made
 *   (DEMO_ON_FIRST_START's default), the server answers; then stopped (SIGTERM).
 * - restart: the same command on that DATA_DIR again, twice per round (the compile cache that the
 *   first start left).
 * - first start, nothing compiled: a first start again, on a new DATA_DIR with an empty compile cache
 *   (a cache folder cleared since the install, or one that cannot be written).
 * - `cli --help`: `npm run cli -- --help` without npm (Node's arguments from package.json), its CPU time (user + system, every thread: the child's
 *   resource usage as wait4 returns it, through /usr/bin/time), with the compile cache warm.
 *
 * Ready is the first 200 from GET /healthz, polled every 10 ms from the moment the process is spawned
 * on a port chosen beforehand. Children get a clean environment (PATH, HOME, the port and the folder):
 * no DATABASE_URL, no REDIS_URL, no OTEL_*, no NODE_COMPILE_CACHE: the compile cache is where a
 * person's start keeps it, `node-compile-cache` in the temporary folder, which is the bench's own
 * (TMPDIR).
 *
 * With START_BENCH_BEFORE naming another checkout (`git worktree add /tmp/start-before main`, its
 * node_modules a link to this one's, `node apps/web-client/build.ts` run in it), its commands are a
 * second mode, `before`, in the same rotation: every round runs both, in turn first. The before
 * checkout is run as it is: with Node's compile cache (in the bench's folder) only if it turns it on
 * itself, its compile-ahead step only if it has one.
 *
 * Environment: START_BENCH_ROUNDS (5), START_BENCH_HELP_RUNS (5 `--help` runs per mode and round),
 * START_BENCH_BEFORE. About a minute and a half a round per mode on a 2-core machine.
 */

const ROOT = resolve(import.meta.dirname, '..');
const NODE = resolve(ROOT, 'node_modules/.bin/node');
const ROUNDS = Number(process.env.START_BENCH_ROUNDS || 5);
const HELP_RUNS = Number(process.env.START_BENCH_HELP_RUNS || 5);
const RESTARTS = 2;
const READY_TIMEOUT_MS = 120_000;
const BEFORE = process.env.START_BENCH_BEFORE ? resolve(process.env.START_BENCH_BEFORE) : undefined;

type Mode = 'before' | 'after';
const MODES: Mode[] = BEFORE ? ['before', 'after'] : ['after'];
const rootOf = (mode: Mode): string => (mode === 'before' ? (BEFORE as string) : ROOT);

type StartRun = {
  mode: Mode;
  round: number;
  kind: 'first start' | 'restart' | 'first start, nothing compiled';
  ready_s: number;
};
type HelpRun = { mode: Mode; round: number; cpu_s: number; user_s: number; sys_s: number; wall_s: number };

const started = Date.now();
const log = (line: string): void => {
  process.stderr.write(`[bench start ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
};
const round = (x: number, digits = 2): number => Math.round(x * 10 ** digits) / 10 ** digits;

/** A loopback port free right now. */
function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function childEnv(extra: Record<string, string>, cacheDir: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    // Node's default compile cache folder is node-compile-cache in os.tmpdir(), which is TMPDIR.
    TMPDIR: cacheDir,
    ...extra,
  };
}

/** Starts the server of `mode` on `dataDir`; seconds until GET /healthz answers 200; then stops it. */
async function startOnce(mode: Mode, dataDir: string, cacheDir: string): Promise<number> {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(NODE, scriptArgsOf(rootOf(mode), 'start'), {
    cwd: rootOf(mode),
    env: childEnv({ DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1' }, cacheDir),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (d: Buffer): void => {
    output = (output + d.toString()).slice(-20_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  try {
    for (;;) {
      if (gone) throw new Error(`the ${mode} server exited before it answered:\n${output}`);
      if (performance.now() - t0 > READY_TIMEOUT_MS)
        throw new Error(`the ${mode} server did not answer:\n${output}`);
      const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return (performance.now() - t0) / 1000;
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    child.kill('SIGTERM');
    const code = await exited;
    if (code !== 0 && !gone) log(`the ${mode} server exited with ${code}`);
  }
}

/** `npm install`'s compile-ahead step of `mode`'s checkout into `cacheDir`, where the checkout has one. */
function compileAhead(mode: Mode, cacheDir: string): void {
  const script = 'apps/server/compile-ahead.ts';
  if (!existsSync(join(rootOf(mode), script))) return;
  const r = spawnSync(NODE, [script], {
    cwd: rootOf(mode),
    env: childEnv({}, cacheDir),
    encoding: 'utf8',
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  if (r.status !== 0) throw new Error(`${script} of ${mode} exited with ${r.status}: ${r.stderr}`);
}

/** `cli --help` of `mode`: CPU seconds (user, system) and wall seconds of the child, from /usr/bin/time. */
function helpOnce(mode: Mode, cacheDir: string): { user: number; sys: number; wall: number } {
  const args = ['-f', 'TIME %U %S %e', NODE, ...cliArgsOf(rootOf(mode)), '--help'];
  const r = spawnSync('/usr/bin/time', args, {
    cwd: rootOf(mode),
    env: childEnv({}, cacheDir),
    encoding: 'utf8',
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  if (r.status !== 0) throw new Error(`cli --help of ${mode} exited with ${r.status}: ${r.stderr}`);
  return parseTime(r.stderr);
}

function parseTime(stderr: string): { user: number; sys: number; wall: number } {
  const match = /TIME ([\d.]+) ([\d.]+) ([\d.]+)/.exec(stderr);
  if (!match) throw new Error(`no timing from /usr/bin/time: ${stderr}`);
  return { user: Number(match[1]), sys: Number(match[2]), wall: Number(match[3]) };
}

function commitOf(dir: string): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

const work = await mkdtemp(join(os.tmpdir(), 'cs-bench-start-'));
// Each mode's compile cache for the --help runs, warmed once before they are measured.
const helpCache = (mode: Mode): string => join(work, `help-cache-${mode}`);
for (const mode of MODES) {
  await mkdir(helpCache(mode), { recursive: true });
  helpOnce(mode, helpCache(mode));
}
const busyAtStart = await busyElsewhere(2_000);
const loadAtStart = round(os.loadavg()[0] ?? 0, 2);
log(`the rest of the machine: ${busyAtStart} cores busy (load average ${loadAtStart})`);

const starts: StartRun[] = [];
const helps: HelpRun[] = [];
try {
  for (let r = 1; r <= ROUNDS; r++) {
    const order = r % 2 === 1 ? MODES : [...MODES].reverse();
    for (const mode of order) {
      const dataDir = join(work, `data-${mode}-${r}`);
      const cacheDir = join(work, `cache-${mode}-${r}`);
      // The compile cache as `npm install` leaves it (its postinstall compiles the start's modules
      // ahead, when the checkout has that step), not timed: part of the install.
      compileAhead(mode, cacheDir);
      const first = await startOnce(mode, dataDir, cacheDir);
      starts.push({ mode, round: r, kind: 'first start', ready_s: round(first, 3) });
      log(`round ${r}/${ROUNDS}, ${mode}: first start ready in ${first.toFixed(2)} s`);
      for (let i = 0; i < RESTARTS; i++) {
        const again = await startOnce(mode, dataDir, cacheDir);
        starts.push({ mode, round: r, kind: 'restart', ready_s: round(again, 3) });
        log(`round ${r}/${ROUNDS}, ${mode}: restart ready in ${again.toFixed(2)} s`);
      }
      await rm(dataDir, { recursive: true, force: true });
      await rm(cacheDir, { recursive: true, force: true });
      // A first start with an empty compile cache (its folder cleared since the install, or not writable).
      const cold = await startOnce(mode, dataDir, cacheDir);
      starts.push({ mode, round: r, kind: 'first start, nothing compiled', ready_s: round(cold, 3) });
      log(`round ${r}/${ROUNDS}, ${mode}: first start with nothing compiled ready in ${cold.toFixed(2)} s`);
      await rm(dataDir, { recursive: true, force: true });
      await rm(cacheDir, { recursive: true, force: true });
      const cpu: number[] = [];
      for (let i = 0; i < HELP_RUNS; i++) {
        const t = helpOnce(mode, helpCache(mode));
        helps.push({
          mode,
          round: r,
          cpu_s: round(t.user + t.sys),
          user_s: t.user,
          sys_s: t.sys,
          wall_s: t.wall,
        });
        cpu.push(t.user + t.sys);
      }
      log(
        `round ${r}/${ROUNDS}, ${mode}: cli --help ${median(cpu).toFixed(2)} s CPU (median of ${HELP_RUNS})`,
      );
    }
  }
} finally {
  await rm(work, { recursive: true, force: true });
}

const summaryOf = (mode: Mode) => {
  const ready = (kind: StartRun['kind']): number[] =>
    starts.filter((s) => s.mode === mode && s.kind === kind).map((s) => s.ready_s);
  const help = helps.filter((h) => h.mode === mode);
  return {
    mode,
    commit: commitOf(rootOf(mode)),
    first_start_s: {
      median: round(median(ready('first start'))),
      min: Math.min(...ready('first start')),
      max: Math.max(...ready('first start')),
    },
    restart_s: {
      median: round(median(ready('restart'))),
      min: Math.min(...ready('restart')),
      max: Math.max(...ready('restart')),
    },
    first_start_nothing_compiled_s: {
      median: round(median(ready('first start, nothing compiled'))),
      min: Math.min(...ready('first start, nothing compiled')),
      max: Math.max(...ready('first start, nothing compiled')),
    },
    help_cpu_s: {
      median: round(median(help.map((h) => h.cpu_s))),
      min: Math.min(...help.map((h) => h.cpu_s)),
      max: Math.max(...help.map((h) => h.cpu_s)),
    },
    help_wall_s: round(median(help.map((h) => h.wall_s))),
  };
};
const summary = MODES.map(summaryOf);
const results = {
  format: 1,
  started_at: new Date(started).toISOString(),
  finished_at: new Date().toISOString(),
  machine: {
    ...machineOf(),
    node: execFileSync(NODE, ['--version'], { encoding: 'utf8' }).trim(),
    busy_elsewhere_cores_at_start: busyAtStart,
    load_average_at_start: loadAtStart,
    load_average_at_end: round(os.loadavg()[0] ?? 0, 2),
  },
  settings: {
    rounds: ROUNDS,
    restarts_per_round: RESTARTS,
    help_runs_per_round: HELP_RUNS,
    before: BEFORE ?? null,
    /** Whether the embedded database's migrated cluster made at install was there (else: initdb). */
    embedded_template: await hasEmbeddedTemplate(),
  },
  summary,
  starts,
  helps,
};

const row = (s: (typeof summary)[number]): string =>
  `| ${s.mode} (${s.commit}) | ${s.first_start_s.median} (${s.first_start_s.min}–${s.first_start_s.max}) | ` +
  `${s.restart_s.median} (${s.restart_s.min}–${s.restart_s.max}) | ` +
  `${s.first_start_nothing_compiled_s.median} (${s.first_start_nothing_compiled_s.min}–${s.first_start_nothing_compiled_s.max}) | ${s.help_cpu_s.median} (${s.help_cpu_s.min}–${s.help_cpu_s.max}) | ${s.help_wall_s} |`;
const markdown = [
  `# Start benchmark (${results.finished_at.slice(0, 16).replace('T', ' ')} UTC)`,
  '',
  `${results.machine.cpus} cores (${results.machine.cpu_model}), ${results.machine.memory_gib} GiB, Node ${results.machine.node}; ` +
    `at the start ${busyAtStart} cores busy with other work (load average ${loadAtStart}, ${results.machine.load_average_at_end} at the end). ` +
    `${ROUNDS} rounds${BEFORE ? ', the modes alternating which runs first' : ''}; per round and mode one first start on a new embedded DATA_DIR ` +
    `(the compile cache as \`npm install\` leaves it), ${RESTARTS} restarts on it, one more first start with an empty compile cache, ${HELP_RUNS} \`cli --help\`. Ready: the first 200 from GET /healthz. ` +
    'Medians (min–max), seconds.',
  '',
  '| mode | first start | restart | first start, nothing compiled | `cli --help` CPU (user + sys) | `cli --help` wall |',
  '|---|---:|---:|---:|---:|---:|',
  ...summary.map(row),
  '',
].join('\n');

await saveResults('start', results, markdown);
process.stdout.write(markdown);
