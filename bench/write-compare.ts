import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './report.ts';

/*
 * The write benchmark (write-run.ts) of two checkouts in alternating runs on this machine: `--before
 * DIR` (a `git worktree add` of the code to compare with, its node_modules linked and its web client
 * built) and this checkout, `--rounds N` times each (3), before first. Each run is the whole write
 * benchmark on the same benchmark database (DATABASE_URL, as write-run.ts); its write-latest.json is
 * read back after it. `--before-database URL`: the before side's runs on another database instead (a
 * copy, `createdb -T`, for code that cannot open a database migrated past it). The medians of each side
 * and every run go to bench/results/write-compare-latest.md and its .json beside it.
 */
const args = parseArgs({
  options: {
    before: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    'before-database': { type: 'string' },
  },
}).values;
if (!args.before) {
  process.stderr.write(
    'usage: node bench/write-compare.ts --before DIR [--before-database URL] [--rounds N]\n',
  );
  process.exit(2);
}
const rounds = Number(args.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  process.stderr.write(`--rounds must be a whole number of at least 1, not ${args.rounds}\n`);
  process.exit(2);
}
const ROOT = resolve(import.meta.dirname, '..');
const sides = [
  { name: 'before', dir: resolve(args.before), databaseUrl: args['before-database'] },
  { name: 'after', dir: ROOT, databaseUrl: undefined },
] as const;

type Load = {
  edits_per_second: number;
  p50_ms: number;
  p99_ms: number;
  cpu_ms_per_edit: { server_thread: number; postgres: number; machine: number };
};
type Run = {
  put_at_100_per_second: Load;
  saturation: { over_10_articles: Load; over_1_article: Load };
  load_at_start: { busy_elsewhere_cores: number };
};

function runWrites(dir: string, databaseUrl: string | undefined): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['bench/write-run.ts'], {
      cwd: dir,
      env: databaseUrl === undefined ? process.env : { ...process.env, DATABASE_URL: databaseUrl },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child.on('error', fail);
    child.on('exit', (code) =>
      code === 0 ? done() : fail(new Error(`write-run.ts in ${dir} exited with ${code}`)),
    );
  });
}

const runs: Record<'before' | 'after', Run[]> = { before: [], after: [] };
for (let round = 1; round <= rounds; round++) {
  for (const side of sides) {
    process.stderr.write(`[write compare] round ${round} of ${rounds}: ${side.name} (${side.dir})\n`);
    await runWrites(side.dir, side.databaseUrl);
    const run = JSON.parse(
      await readFile(resolve(side.dir, 'bench/results/write-latest.json'), 'utf8'),
    ) as Run;
    runs[side.name].push(run);
  }
}

const round2 = (n: number): number => Math.round(n * 100) / 100;
const measures = [
  ['saturation over ten articles, edits/s', (r: Run) => r.saturation.over_10_articles.edits_per_second],
  ['saturation over one article, edits/s', (r: Run) => r.saturation.over_1_article.edits_per_second],
  ['PUT at 100/s, p99 ms', (r: Run) => r.put_at_100_per_second.p99_ms],
  ['PUT at 100/s, p50 ms', (r: Run) => r.put_at_100_per_second.p50_ms],
  [
    'over ten articles, server thread ms per edit',
    (r: Run) => r.saturation.over_10_articles.cpu_ms_per_edit.server_thread,
  ],
  [
    'over ten articles, PostgreSQL ms per edit',
    (r: Run) => r.saturation.over_10_articles.cpu_ms_per_edit.postgres,
  ],
  [
    'over ten articles, whole machine ms per edit',
    (r: Run) => r.saturation.over_10_articles.cpu_ms_per_edit.machine,
  ],
  ['the rest of the machine busy before the run, cores', (r: Run) => r.load_at_start.busy_elsewhere_cores],
] as const;
const rows = measures.map(([label, of]) => {
  const before = runs.before.map(of);
  const after = runs.after.map(of);
  return {
    measure: label,
    before: round2(median(before)),
    after: round2(median(after)),
    after_over_before: round2(median(after) / median(before)),
    runs: { before, after },
  };
});
const at = new Date().toISOString();
const results = {
  at,
  machine: { cores: os.cpus().length, model: os.cpus()[0]?.model ?? '' },
  before: sides[0].dir,
  before_database: sides[0].databaseUrl ?? null,
  rounds,
  rows,
};
const table = `# Write benchmark, before and after (${at.slice(0, 16).replace('T', ' ')} UTC)

${results.machine.cores} cores (${results.machine.model}); ${rounds} alternating runs of each, before first; medians.

| measure | before | after | after ÷ before | runs before | runs after |
|---|---:|---:|---:|---|---|
${rows.map((r) => `| ${r.measure} | ${r.before} | ${r.after} | ${r.after_over_before} | ${r.runs.before.join(', ')} | ${r.runs.after.join(', ')} |`).join('\n')}
`;
const dir = resolve(ROOT, 'bench/results');
await writeFile(resolve(dir, 'write-compare-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
await writeFile(resolve(dir, 'write-compare-latest.md'), table);
process.stdout.write(table);
