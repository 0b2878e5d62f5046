import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { resolve } from 'node:path';
import autocannon, { type Options as LoadOptions } from 'autocannon';
import { sql } from 'kysely';
import { inSpan, inSpanSync } from '../infra/telemetry/spans.ts';
import { withoutPassword } from '../infra/url-password.ts';
import { decodeTraceRequest } from '../tests/support/otlp.ts';
import { type ServerProcess, startServer } from '../tests/support/server.ts';
import { type DatasetSpec, prepareDataset } from './dataset.ts';
import { busyElsewhere } from './load.ts';
import { machineOf, median, saveResults } from './report.ts';

/*
 * `npm run bench:tracing`, a part of `npm run bench`: what tracing costs, off and on.
 *
 * The real server (`node apps/server/main.js`: PostgreSQL, in-process limits, projectors and jobs in
 * the server process, logging at info), started alternately with tracing off (no OTEL_* variable)
 * and on (OTEL_EXPORTER_OTLP_ENDPOINT naming a receiver in this process that accepts and discards;
 * the SDK's default batching, every trace sampled), each start measured on the same workloads:
 *
 * - get article: GET /api/v1/articles/{id}, the 20 KB article with 10 protected blocks;
 * - list articles: GET /api/v1/sites/{site}/articles?per_page=100;
 * - edits: PUT title-only edits over ten articles, as fast as the server answers.
 *
 * Rounds alternate the order (off then on, on then off, ...), so that drift in the machine's load
 * touches both alike. Per run: requests a second, p50 and p99, and the server process's CPU time per
 * request (/proc/<pid>/stat: every thread of the server). On, also the spans exported per request
 * (the receiver keeps the bodies of a run and decodes them after it). And the off path of a product
 * span alone (infra/telemetry/spans.ts), in nanoseconds a call.
 *
 * With TRACING_BENCH_BEFORE naming a checkout of the service from before tracing was added (say
 * `git worktree add /tmp/cs-before <commit>`, its node_modules a link to this one's), its server is a
 * third mode, `before`, in the same rotation: tracing off against no tracing code at all.
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/cs_bench_tracing, a small
 * benchmark dataset of its own, made on the first run), TRACING_BENCH_SECONDS (5 measured seconds a
 * run, after 1 s of warm-up), TRACING_BENCH_ROUNDS (3), TRACING_BENCH_CONNECTIONS (10). About three
 * minutes with the defaults.
 */

const SECONDS = Number(process.env.TRACING_BENCH_SECONDS || 5);
const ROUNDS = Number(process.env.TRACING_BENCH_ROUNDS || 3);
const CONNECTIONS = Number(process.env.TRACING_BENCH_CONNECTIONS || 10);
const WARMUP = 1;
const SPEC: DatasetSpec = {
  format: 1,
  articles: 2_000,
  bigBacklinks: 2_000,
  smallBacklinks: 1_000,
  longBodyBytes: 20 * 1024,
  protectedBlocks: 10,
};

type Mode = 'before' | 'off' | 'on';
const BEFORE = process.env.TRACING_BENCH_BEFORE ? resolve(process.env.TRACING_BENCH_BEFORE) : undefined;
const MODES: Mode[] = BEFORE ? ['before', 'off', 'on'] : ['off', 'on'];
type Workload = 'get article' | 'list articles' | 'edits';
const WORKLOADS: Workload[] = ['get article', 'list articles', 'edits'];

type Run = {
  mode: Mode;
  round: number;
  workload: Workload;
  requests: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  /** CPU time of the server process (all its threads) per request, microseconds. */
  server_cpu_us_per_request: number;
  errors: number;
  non2xx: number;
  /** Tracing on: spans the receiver got per request of the run, and bytes per request. */
  spans_per_request: number | null;
  otlp_bytes_per_request: number | null;
};

const started = Date.now();
const log = (line: string): void => {
  process.stderr.write(
    `[bench tracing ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}\n`,
  );
};
const round = (x: number, digits = 0): number => Math.round(x * 10 ** digits) / 10 ** digits;

const databaseUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/cs_bench_tracing';
log(`database ${withoutPassword(databaseUrl)}`);
const { runtime, dataset } = await prepareDataset(databaseUrl, SPEC, log);
const key = (
  await runtime.commands.createApiKey(dataset.accountId, { name: 'Tracing benchmark', scope: 'write' })
).key;
// Ten articles edited in turn (edits of one article queue one after the other in the server).
const editIds: string[] = [];
for (let i = 0; i < 10; i++) {
  const { articleId } = await runtime.commands.createArticle(
    dataset.accountId,
    {
      siteId: dataset.smallBacklinkSiteId,
      title: `Tracing benchmark ${i}`,
      body: '<p>Edited by the tracing benchmark.</p>',
      url: `https://bench.example/tracing-${Date.now()}-${i}`,
      status: 'draft',
      publishedAt: null,
      targetKeyword: null,
      featuredImage: null,
    },
    { origin: 'rewrite', actor: { type: 'system', id: 'bench', name: 'Benchmark' } },
  );
  editIds.push(articleId);
}
const postgresVersion =
  (await sql<{ v: string }>`select version() as v`.execute(runtime.db)).rows[0]?.v ?? '';
await runtime.close();

// The receiver: answers every export at once; while `keep` is on, keeps the bodies to count spans later.
let keep = false;
let kept: Buffer[] = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    if (keep) kept.push(Buffer.concat(chunks));
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

const TICK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();
/** CPU seconds the process has used (user + system, every thread). */
function cpuOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICK;
}

const env = {
  DATABASE_URL: databaseUrl,
  RATE_LIMIT_PER_MINUTE: '1000000000',
  EDIT_LIMIT_PER_DAY: '1000000000',
  LOG_LEVEL: 'info',
};

async function measureRun(server: ServerProcess, mode: Mode, workload: Workload, r: number): Promise<Run> {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  let n = 0;
  const options: LoadOptions =
    workload === 'edits'
      ? {
          url: server.url,
          headers,
          connections: CONNECTIONS,
          requests: [
            {
              method: 'PUT',
              setupRequest: (request) => {
                n++;
                return {
                  ...request,
                  path: `/api/v1/articles/${editIds[n % editIds.length]}`,
                  body: JSON.stringify({ title: `Tracing benchmark ${mode} ${r} ${n}` }),
                };
              },
            },
          ],
        }
      : {
          url:
            workload === 'get article'
              ? `${server.url}/api/v1/articles/${encodeURIComponent(dataset.longArticleId)}`
              : `${server.url}/api/v1/sites/${encodeURIComponent(dataset.articleSiteId)}/articles?per_page=100`,
          headers,
          connections: CONNECTIONS,
        };
  await autocannon({ ...options, duration: WARMUP });
  // Spans of the warm-up still queued in the server go out within its batch delay (5 s) or as a batch
  // fills (512): counted from here, a run's spans are those of its requests within a batch.
  kept = [];
  keep = mode === 'on';
  const pid = server.child.pid as number;
  const cpuBefore = cpuOf(pid);
  const result = await autocannon({ ...options, duration: SECONDS });
  const cpu = cpuOf(pid) - cpuBefore;
  keep = false;
  const total = result.requests.total;
  let spans: number | null = null;
  let bytes: number | null = null;
  if (mode === 'on') {
    spans = 0;
    bytes = 0;
    for (const body of kept) {
      spans += decodeTraceRequest(body).length;
      bytes += body.length;
    }
    kept = [];
  }
  return {
    mode,
    round: r,
    workload,
    requests: total,
    rps: round(result.requests.average),
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
    server_cpu_us_per_request: total === 0 ? 0 : round((cpu / total) * 1e6),
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    spans_per_request: spans === null ? null : round(spans / Math.max(1, total), 1),
    otlp_bytes_per_request: bytes === null ? null : round(bytes / Math.max(1, total)),
  };
}

const busyAtStart = await busyElsewhere(2_000);
const loadAtStart = round(os.loadavg()[0] ?? 0, 2);
log(`the rest of the machine: ${busyAtStart} cores busy (load average ${loadAtStart})`);
const runs: Run[] = [];
for (let r = 1; r <= ROUNDS; r++) {
  // Each round starts at another mode, and every other round runs them backwards.
  const turned = [...MODES.slice((r - 1) % MODES.length), ...MODES.slice(0, (r - 1) % MODES.length)];
  const order: Mode[] = r % 2 === 1 ? turned : turned.reverse();
  for (const mode of order) {
    const server = await startServer(
      mode === 'on' ? { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl } : env,
      60_000,
      20,
      mode === 'before' ? BEFORE : undefined,
    );
    try {
      for (const workload of WORKLOADS) {
        const run = await measureRun(server, mode, workload, r);
        runs.push(run);
        log(
          `round ${r}/${ROUNDS}, tracing ${mode}, ${workload}: ${run.rps} req/s, p50 ${run.p50_ms} ms, p99 ${run.p99_ms} ms, ` +
            `server CPU ${run.server_cpu_us_per_request} µs/request` +
            (run.spans_per_request === null ? '' : `, ${run.spans_per_request} spans/request`),
        );
      }
    } finally {
      await server.stop();
    }
  }
}

// The off path of a product span: what every span site costs while tracing is off. Each variant is
// timed in turn, five times; the fastest of each counts (the others met a GC or another process).
const CALLS = 1_000_000;
const work = async (): Promise<number> => 1;
let sink = 0;
const timed = async (run: () => Promise<void> | void): Promise<number> => {
  const t = performance.now();
  await run();
  return ((performance.now() - t) * 1e6) / CALLS;
};
const best = { bare: Infinity, spanned: Infinity, syncBare: Infinity, syncSpanned: Infinity };
for (let repeat = 0; repeat < 5; repeat++) {
  best.bare = Math.min(
    best.bare,
    await timed(async () => {
      for (let i = 0; i < CALLS; i++) sink += await work();
    }),
  );
  best.spanned = Math.min(
    best.spanned,
    await timed(async () => {
      for (let i = 0; i < CALLS; i++)
        sink += await inSpan('articles.edit', { attributes: () => ({ i }) }, work);
    }),
  );
  best.syncBare = Math.min(
    best.syncBare,
    await timed(() => {
      for (let i = 0; i < CALLS; i++) sink += ((): number => i)();
    }),
  );
  best.syncSpanned = Math.min(
    best.syncSpanned,
    await timed(() => {
      for (let i = 0; i < CALLS; i++) sink += inSpanSync('decide article', {}, () => i);
    }),
  );
}
const offPath = {
  calls: CALLS,
  async_bare_ns: round(best.bare, 1),
  async_in_span_ns: round(best.spanned, 1),
  sync_bare_ns: round(best.syncBare, 1),
  sync_in_span_ns: round(best.syncSpanned, 1),
};
if (sink < 0) log('unreachable: keeps the measured loops from being optimised away');

const summary = WORKLOADS.map((workload) => {
  const of = (mode: Mode) => runs.filter((run) => run.workload === workload && run.mode === mode);
  const stat = (mode: Mode, key: 'rps' | 'p50_ms' | 'p99_ms' | 'server_cpu_us_per_request') =>
    median(of(mode).map((run) => run[key]));
  const off = {
    rps: stat('off', 'rps'),
    p50_ms: stat('off', 'p50_ms'),
    p99_ms: stat('off', 'p99_ms'),
    server_cpu_us_per_request: stat('off', 'server_cpu_us_per_request'),
  };
  const on = {
    rps: stat('on', 'rps'),
    p50_ms: stat('on', 'p50_ms'),
    p99_ms: stat('on', 'p99_ms'),
    server_cpu_us_per_request: stat('on', 'server_cpu_us_per_request'),
  };
  const offRps = of('off').map((run) => run.rps);
  const before = BEFORE
    ? {
        rps: stat('before', 'rps'),
        p50_ms: stat('before', 'p50_ms'),
        p99_ms: stat('before', 'p99_ms'),
        server_cpu_us_per_request: stat('before', 'server_cpu_us_per_request'),
      }
    : null;
  const beforeRps = of('before').map((run) => run.rps);
  return {
    workload,
    before,
    off,
    on,
    off_vs_before: before
      ? {
          rps: round(off.rps / Math.max(1, before.rps), 3),
          server_cpu_per_request: round(
            off.server_cpu_us_per_request / Math.max(1, before.server_cpu_us_per_request),
            3,
          ),
        }
      : null,
    /** How far the before runs spread (max − min over median), when measured. */
    before_spread: before
      ? round((Math.max(...beforeRps) - Math.min(...beforeRps)) / Math.max(1, median(beforeRps)), 3)
      : null,
    on_vs_off: {
      rps: round(on.rps / Math.max(1, off.rps), 3),
      server_cpu_per_request: round(
        on.server_cpu_us_per_request / Math.max(1, off.server_cpu_us_per_request),
        3,
      ),
    },
    /** How far the off runs spread (max − min over median): the noise a difference must exceed. */
    off_spread: round((Math.max(...offRps) - Math.min(...offRps)) / Math.max(1, median(offRps)), 3),
    spans_per_request: median(of('on').map((run) => run.spans_per_request ?? 0)),
    otlp_bytes_per_request: median(of('on').map((run) => run.otlp_bytes_per_request ?? 0)),
  };
});

const clean = runs.every((run) => run.errors === 0 && run.non2xx === 0);
const results = {
  format: 1,
  started_at: new Date(started).toISOString(),
  finished_at: new Date().toISOString(),
  machine: {
    ...machineOf(),
    node: process.versions.node,
    postgres: postgresVersion.split(' on ')[0] ?? '',
    busy_elsewhere_cores_at_start: busyAtStart,
    load_average_at_start: loadAtStart,
  },
  settings: {
    seconds: SECONDS,
    warmup_s: WARMUP,
    rounds: ROUNDS,
    connections: CONNECTIONS,
    dataset: SPEC,
    before: BEFORE ?? null,
    on: 'OTEL_EXPORTER_OTLP_ENDPOINT to a local receiver that accepts and discards; default batching; every trace sampled',
    load_generator: 'autocannon 8 in the bench process (main thread), with the receiver',
  },
  summary,
  off_path: offPath,
  runs,
  clean,
};

const markdown = [
  `# Tracing benchmark (${results.finished_at.slice(0, 16).replace('T', ' ')} UTC)`,
  '',
  `${results.machine.cpus} cores (${results.machine.cpu_model}), ${results.machine.memory_gib} GiB, Node ${results.machine.node}, ${results.machine.postgres}; ` +
    `at the start ${busyAtStart} cores busy with other work (load average ${loadAtStart}). ` +
    `The real server (\`node apps/server/main.js\`) started ${ROUNDS} times with tracing off and ${ROUNDS} times on, alternating; ` +
    `${CONNECTIONS} connections, ${WARMUP} s warm-up + ${SECONDS} s per run; medians. On: every trace sampled, exported over OTLP ` +
    '(http/protobuf) with the default batching to a receiver on loopback that discards.',
  '',
  '| workload | off req/s | on req/s | on ÷ off | off p50 / p99 ms | on p50 / p99 ms | server CPU µs/request off / on | on ÷ off | spans per request (on) | OTLP bytes per request | spread of the off runs |',
  '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ...summary.map(
    (s) =>
      `| ${s.workload} | ${s.off.rps} | ${s.on.rps} | ${s.on_vs_off.rps} | ${s.off.p50_ms} / ${s.off.p99_ms} | ${s.on.p50_ms} / ${s.on.p99_ms} | ` +
      `${s.off.server_cpu_us_per_request} / ${s.on.server_cpu_us_per_request} | ${s.on_vs_off.server_cpu_per_request} | ${s.spans_per_request} | ${s.otlp_bytes_per_request} | ${Math.round(s.off_spread * 100)}% |`,
  ),
  ...(BEFORE
    ? [
        '',
        `Tracing off against the service before tracing (\`${BEFORE}\`, ${ROUNDS} starts in the same rotation):`,
        '',
        '| workload | before req/s | off req/s | off ÷ before | before p50 / p99 ms | server CPU µs/request before / off | off ÷ before | spread of the before runs |',
        '|---|---:|---:|---:|---:|---:|---:|---:|',
        ...summary.map(
          (s) =>
            `| ${s.workload} | ${s.before?.rps} | ${s.off.rps} | ${s.off_vs_before?.rps} | ${s.before?.p50_ms} / ${s.before?.p99_ms} | ` +
            `${s.before?.server_cpu_us_per_request} / ${s.off.server_cpu_us_per_request} | ${s.off_vs_before?.server_cpu_per_request} | ${Math.round((s.before_spread ?? 0) * 100)}% |`,
        ),
      ]
    : []),
  '',
  `Tracing off, a product span (infra/telemetry/spans.ts) is a boolean test: around async work, ${offPath.async_in_span_ns} ns a call ` +
    `against ${offPath.async_bare_ns} ns for the bare call; around sync work, ${offPath.sync_in_span_ns} ns against ${offPath.sync_bare_ns} ns ` +
    `(fastest of 5 × ${CALLS.toLocaleString('en')} calls). An edit passes ` +
    'five such sites (use case, decide, append, inline projections, the traceparent of its event); a read none of its own ' +
    '(the batch that stores the activity records of many calls passes two). ' +
    'Off, nothing of the SDK is loaded (tests/infra/tracing-off.e2e.test.ts).',
  '',
  `All runs clean (2xx only, no errors): ${clean ? 'yes' : 'no'}.`,
  '',
].join('\n');

await saveResults('tracing', results, markdown);
process.stdout.write(markdown);
receiver.close();
if (!clean) {
  log('some requests failed: the figures are not valid');
  process.exitCode = 1;
}
