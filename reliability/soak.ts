import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  authorizeWithoutBrowser,
  freePort,
  PUBLIC_CLIENT,
  registerClient,
  tokenRequest,
} from '../tests/oauth/helpers.ts';
import { createTestDatabase } from '../tests/support/db.ts';
import { cli, NODE, run } from '../tests/support/process.ts';
import { startServer } from '../tests/support/server.ts';
import { REDIS_URL, startReceiver } from './crash-support.ts';
import { type Check, check, type Scenario } from './scenario.ts';
import type { FinalReport, IntervalReport, SoakAccount, SoakLoadData } from './soak-load.ts';
import { lineChart } from './svg-chart.ts';

/*
 * Scenario 7: twice the benchmarks' fixed-rate load for 10 minutes against the real server (PostgreSQL,
 * Redis, its job workers): API reads at 2 x 200/s, API edits at 2 x 100/s, MCP tool calls, and a webhook
 * message per edit to an endpoint on loopback. Promised: no 5xx; heap and RSS flat after the warm-up;
 * the event loop's delay bounded; the database connections bounded; every edit's webhook received.
 * The curves go to reliability/results/soak-*.svg, linked from docs/reliability.md.
 */

const RATES = { reads: 400, edits: 200, mcp: 20 };
/** Accounts, each with its own webhook endpoint (an endpoint's messages go out one at a time, in order). */
const ACCOUNTS = 20;
const INTERVAL_MS = 5_000;
/** The server's pool (infra/db/open.ts DEFAULT_POOL_SIZE) and its LISTEN connection. */
const CONNECTION_BOUND = 10 + 1;
const ELD_P99_BOUND_MS = 50;
const ELD_MAX_BOUND_MS = 500;
const RESULTS = fileURLToPath(new URL('./results/', import.meta.url));
const PROBE = fileURLToPath(new URL('./soak-probe.ts', import.meta.url));
const HTML_MEMORY_COST = fileURLToPath(new URL('./html-memory-cost.ts', import.meta.url));

type Seeded = {
  account_id: string;
  email: string;
  password: string;
  api_key: string;
  sites: Array<{ id: string }>;
};
type ProbeLine = {
  t: number;
  rss: number;
  heap_used: number;
  eld_p99_ms: number;
  eld_max_ms: number;
  cpu_ms: number;
};
type Row = {
  minute: number;
  rates: Record<string, number>;
  p99: Record<string, number>;
  non2xx: number;
  rssMiB: number;
  heapMinMiB: number;
  heapMaxMiB: number;
  eldP99: number;
  eldMax: number;
  cores: number;
  connections: number;
  activeConnections: number;
  webhooksPerSecond: number;
  webhookBacklog: number;
};

const MiB = 1024 * 1024;
const percentile = (values: number[], p: number): number => {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};
const round1 = (n: number): number => Math.round(n * 10) / 10;

/** A webhook endpoint that keeps `<article id>:<revision>` of each message and how late it came. */
async function startCounter(): Promise<{
  url: string;
  seen: Set<string>;
  lagsMs: number[];
  close(): Promise<void>;
}> {
  const seen = new Set<string>();
  const lagsMs: number[] = [];
  const receiver = await startReceiver((body) => {
    try {
      const message = JSON.parse(body) as { created_at: string; data: { id: string; revision: number } };
      seen.add(`${message.data.id}:${message.data.revision}`);
      lagsMs.push(Date.now() - Date.parse(message.created_at));
    } catch {} // a body that is not a message is simply not counted: the missing check reports it
  });
  return { url: receiver.url, seen, lagsMs, close: receiver.close };
}

export const soak: Scenario = {
  name: 'soak',
  title: 'twice the benchmarks’ load for 10 minutes: memory, event loop, connections, webhooks',
  timeoutMs: 20 * 60_000,
  async run({ short, log }) {
    const durationMs = short ? 60_000 : 10 * 60_000;
    const warmupMs = short ? 20_000 : 2 * 60_000;
    const test = await createTestDatabase('postgres');
    const prefix = `rel-soak-${randomUUID().slice(0, 8)}`;
    const folder = mkdtempSync(join(tmpdir(), 'cs-soak-'));
    const probeFile = join(folder, 'probe.jsonl');
    const counter = await startCounter();
    const admin = new pg.Client({ connectionString: test.databaseUrl?.replace(/\/[^/]+$/, '/postgres') });
    await admin.connect();
    const databaseName = new URL(test.databaseUrl as string).pathname.slice(1);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      DATABASE_URL: test.databaseUrl as string,
      DATA_DIR: '/nonexistent',
      REDIS_URL,
      RATE_LIMIT_KEY_PREFIX: `${prefix}:rl`,
      JOBS_PREFIX: prefix,
      // The limits are raised, as the benchmarks raise them: the load is one account's many times over.
      RATE_LIMIT_PER_MINUTE: '1000000000',
      EDIT_LIMIT_PER_DAY: '1000000000',
      OUTBOUND_ALLOW_NETWORKS: '127.0.0.1/32',
      PORT: String(port),
      PUBLIC_URL: base,
    };
    const checks: Check[] = [];
    const figures: Record<string, string | number> = {};
    let server: Awaited<ReturnType<typeof startServer>> | null = null;
    try {
      log(`seeding ${ACCOUNTS} accounts (1 site, 20 articles, 200 backlinks each)`);
      const seeded: Seeded[] = [];
      for (let i = 0; i < ACCOUNTS; i += 4) {
        seeded.push(
          ...(await Promise.all(
            [0, 1, 2, 3].map(async () => {
              const r = await cli(
                ['seed-demo', '--json', '--sites', '1', '--articles', '20', '--backlinks', '200'],
                env,
              );
              if (r.code !== 0) throw new Error(r.stderr);
              return JSON.parse(r.stdout) as Seeded;
            }),
          )),
        );
      }
      // The scenario's own connections (its test database handle), left out of the server's count.
      const own = (await connections(admin, databaseName)).total;
      server = await startServer(
        { ...env, SOAK_PROBE_FILE: probeFile, NODE_OPTIONS: `--import ${PROBE}` },
        60_000,
        2_000,
      );
      const accounts: SoakAccount[] = [];
      for (const s of seeded) {
        const auth = { authorization: `Bearer ${s.api_key}`, 'content-type': 'application/json' };
        const siteId = s.sites[0]?.id as string;
        const list = (await (
          await fetch(`${base}/api/v1/sites/${siteId}/articles?from=2000-01-01&to=2100-01-01&per_page=100`, {
            headers: auth,
          })
        ).json()) as { data: Array<{ id: string }> };
        const articles = await Promise.all(
          list.data.map(async ({ id }) => {
            const a = (await (await fetch(`${base}/api/v1/articles/${id}`, { headers: auth })).json()) as {
              body: string;
            };
            return { id, body: a.body };
          }),
        );
        const hook = await fetch(`${base}/api/v1/webhooks`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ url: counter.url, events: ['article.updated'] }),
        });
        if (hook.status !== 201)
          throw new Error(`creating a webhook answered ${hook.status}: ${await hook.text()}`);
        // An assistant connected the way a person connects one: registration, sign-in, Allow, token.
        const redirectUri = 'http://127.0.0.1:9/callback';
        const registered = (await (
          await registerClient(base, {
            ...PUBLIC_CLIENT,
            client_name: 'Soak assistant',
            redirect_uris: [redirectUri],
          })
        ).json()) as { client_id: string };
        const person = { accountId: s.account_id, email: s.email, password: s.password, name: 'Demo' };
        const { back, verifier } = await authorizeWithoutBrowser({
          base,
          person,
          clientId: registered.client_id,
          redirectUri,
        });
        const tokens = await tokenRequest(base, {
          grant_type: 'authorization_code',
          code: back.searchParams.get('code') ?? '',
          redirect_uri: redirectUri,
          client_id: registered.client_id,
          code_verifier: verifier,
          resource: `${base}/mcp`,
        });
        if (tokens.status !== 200) throw new Error(`token request answered ${tokens.status}`);
        accounts.push({ apiKey: s.api_key, mcpToken: tokens.body.access_token ?? '', siteId, articles });
      }
      const connectionsAtRest = await connections(admin, databaseName, own);
      log(
        `load: ${RATES.reads} reads/s, ${RATES.edits} edits/s, ${RATES.mcp} MCP calls/s for ${durationMs / 60_000} min (warm-up ${warmupMs / 1000} s)`,
      );

      const started = Date.now();
      const rows: Row[] = [];
      const totals: Record<string, { count: number; statuses: Record<string, number>; latencies: number[] }> =
        {};
      const failures: string[] = [];
      let skipped = 0;
      let acknowledgedSoFar = 0;
      let receivedBefore = 0;
      let probeOffset = 0;
      const latestProbe = (): ProbeLine[] => {
        const text = readFileSync(probeFile, 'utf8');
        const fresh = text.slice(probeOffset);
        const end = fresh.lastIndexOf('\n') + 1;
        probeOffset += end;
        return fresh
          .slice(0, end)
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as ProbeLine);
      };
      const acknowledged = await new Promise<string[]>((resolve, reject) => {
        const worker = new Worker(new URL('./soak-load.ts', import.meta.url), {
          workerData: {
            url: base,
            accounts,
            rates: RATES,
            ms: durationMs,
            intervalMs: INTERVAL_MS,
            maxInFlight: 2_000,
          } satisfies SoakLoadData,
        });
        worker.on('message', (m: IntervalReport | FinalReport) => {
          if (m.type === 'done') {
            resolve(m.acknowledged);
            return;
          }
          void (async () => {
            skipped += m.skipped;
            failures.push(...m.failures.slice(0, Math.max(0, 20 - failures.length)));
            const rates: Record<string, number> = {};
            const p99: Record<string, number> = {};
            let non2xx = 0;
            for (const [kind, k] of Object.entries(m.kinds)) {
              const t = totals[kind] ?? { count: 0, statuses: {}, latencies: [] };
              totals[kind] = t;
              t.count += k.count;
              for (const [status, n] of Object.entries(k.statuses)) {
                t.statuses[status] = (t.statuses[status] ?? 0) + n;
                if (!['200', 'ok'].includes(status)) non2xx += n;
              }
              t.latencies.push(...k.latencies);
              rates[kind] = round1(k.count / (INTERVAL_MS / 1000));
              p99[kind] = round1(percentile(k.latencies, 99));
            }
            acknowledgedSoFar = m.acknowledged;
            const probe = latestProbe();
            const db = await connections(admin, databaseName, own);
            const received = counter.seen.size;
            rows.push({
              minute: round1((m.t - started) / 60_000),
              rates,
              p99,
              non2xx,
              rssMiB: round1(Math.max(...probe.map((p) => p.rss), 0) / MiB),
              heapMinMiB: round1(Math.min(...probe.map((p) => p.heap_used)) / MiB),
              heapMaxMiB: round1(Math.max(...probe.map((p) => p.heap_used), 0) / MiB),
              eldP99: Math.max(...probe.map((p) => p.eld_p99_ms), 0),
              eldMax: Math.max(...probe.map((p) => p.eld_max_ms), 0),
              cores: round1(probe.reduce((n, p) => n + p.cpu_ms, 0) / INTERVAL_MS),
              connections: db.total,
              activeConnections: db.active,
              webhooksPerSecond: round1((received - receivedBefore) / (INTERVAL_MS / 1000)),
              webhookBacklog: Math.max(0, acknowledgedSoFar - received),
            });
            receivedBefore = received;
            const row = rows.at(-1) as Row;
            log(
              `${row.minute.toFixed(1)} min: ${JSON.stringify(rates)} p99 ${JSON.stringify(p99)} rss ${row.rssMiB} MiB heap ${row.heapMinMiB}-${row.heapMaxMiB} MiB eld p99 ${row.eldP99} ms db ${row.connections} webhooks ${row.webhooksPerSecond}/s backlog ${row.webhookBacklog}`,
            );
          })();
        });
        worker.once('error', reject);
      });
      const loadEnded = Date.now();
      const expected = new Set(acknowledged);
      const allReceived = await waitFor(() => [...expected].every((k) => counter.seen.has(k)), 120_000);
      const drainedMs = Date.now() - loadEnded;
      const missing = [...expected].filter((k) => !counter.seen.has(k)).length;
      const connectionsAfter = await connections(admin, databaseName, own);

      // Steady state: the rows after the warm-up; flatness compares its first two minutes with its last two.
      const steady = rows.filter((r) => r.minute * 60_000 >= warmupMs);
      const windowMin = short ? 0.25 : 2;
      const first = steady.filter((r) => r.minute < warmupMs / 60_000 + windowMin);
      const last = steady.filter((r) => r.minute > durationMs / 60_000 - windowMin);
      const heapFirst = Math.min(...first.map((r) => r.heapMinMiB));
      const heapLast = Math.min(...last.map((r) => r.heapMinMiB));
      const rssFirst = Math.max(...first.map((r) => r.rssMiB));
      const rssLast = Math.max(...last.map((r) => r.rssMiB));
      const statuses = Object.fromEntries(Object.entries(totals).map(([k, t]) => [k, t.statuses]));
      const fiveXx = Object.values(totals).reduce(
        (n, t) =>
          n +
          Object.entries(t.statuses).reduce(
            (m, [s, c]) => m + (/^5\d\d$/.test(s) || s === 'error' ? c : 0),
            0,
          ),
        0,
      );
      const non2xx = rows.reduce((n, r) => n + r.non2xx, 0);
      const eldP99Worst = Math.max(...steady.map((r) => r.eldP99));
      const eldMaxWorst = Math.max(...steady.map((r) => r.eldMax));
      const maxConnections = Math.max(...rows.map((r) => r.connections), connectionsAfter.total);

      for (const [kind, t] of Object.entries(totals)) {
        figures[`${kind}_calls`] = t.count;
        // Hundreds of thousands of latencies: no spread into Math.max (the stack would not hold them).
        const sorted = t.latencies.toSorted((a, b) => a - b);
        figures[`${kind}_p50_ms`] = round1(percentile(sorted, 50));
        figures[`${kind}_p99_ms`] = round1(percentile(sorted, 99));
        figures[`${kind}_max_ms`] = round1(sorted.at(-1) ?? 0);
      }
      figures.statuses = JSON.stringify(statuses);
      figures.skipped_for_in_flight_bound = skipped;
      figures.heap_low_first_mib = heapFirst;
      figures.heap_low_last_mib = heapLast;
      figures.rss_peak_first_mib = rssFirst;
      figures.rss_peak_last_mib = rssLast;
      figures.eld_p99_worst_ms = eldP99Worst;
      figures.eld_max_worst_ms = eldMaxWorst;
      figures.server_cores_mean = round1(
        steady.reduce((n, r) => n + r.cores, 0) / Math.max(1, steady.length),
      );
      figures.db_connections_at_rest = connectionsAtRest.total;
      figures.db_connections_max = maxConnections;
      figures.edits_acknowledged = expected.size;
      figures.webhooks_received = counter.seen.size;
      figures.webhooks_drained_after_load_ms = drainedMs;
      figures.webhook_lag_p99_ms = round1(percentile(counter.lagsMs, 99));
      if (failures.length > 0) figures.first_failures = failures.slice(0, 5).join(' | ');

      checks.push(check('no 5xx and no call without an answer', fiveXx === 0, JSON.stringify(statuses)));
      checks.push(check('every call answered 2xx', non2xx === 0, `${non2xx} others`));
      checks.push(
        check(
          'the load was served at its rates (no request held back by the in-flight bound)',
          skipped === 0,
          `${skipped} skipped`,
        ),
      );
      // The html memory (a bounded LRU of bodies) fills with the edits' new bodies for several
      // minutes, past the warm-up: its heap at full, measured apart, is allowed besides the 10%.
      const cost = await run(NODE, ['--expose-gc', HTML_MEMORY_COST]);
      const htmlMemoryMiB = (JSON.parse(cost.stdout) as { mib: number }).mib;
      figures.html_memory_full_heap_mib = htmlMemoryMiB;
      checks.push(
        check(
          'the heap is flat after the warm-up (its low point grows by at most 10%, plus the html memory filling to its bound)',
          heapLast <= heapFirst * 1.1 + htmlMemoryMiB,
          `${heapFirst} MiB in the first ${windowMin} min, ${heapLast} MiB in the last; the html memory full: ${htmlMemoryMiB} MiB`,
        ),
      );
      checks.push(
        check(
          'RSS is flat after the warm-up (its peak grows by at most 10%)',
          rssLast <= rssFirst * 1.1,
          `${rssFirst} MiB in the first ${windowMin} min, ${rssLast} MiB in the last`,
        ),
      );
      checks.push(
        check(
          `the event loop's delay is bounded (p99 of every second under ${ELD_P99_BOUND_MS} ms, never over ${ELD_MAX_BOUND_MS} ms)`,
          eldP99Worst <= ELD_P99_BOUND_MS && eldMaxWorst <= ELD_MAX_BOUND_MS,
          `worst p99 ${eldP99Worst} ms, worst max ${eldMaxWorst} ms`,
        ),
      );
      checks.push(
        check(
          `database connections bounded (at most ${CONNECTION_BOUND}: the pool and LISTEN)`,
          maxConnections <= CONNECTION_BOUND,
          `${connectionsAtRest.total} at rest, at most ${maxConnections}`,
        ),
      );
      checks.push(
        check(
          'every acknowledged edit’s webhook received',
          allReceived,
          `${expected.size} edits, ${missing} missing, all in ${Math.round(drainedMs / 100) / 10} s after the load`,
        ),
      );

      writeFileSync(
        join(RESULTS, `soak${short ? '-short' : ''}-timeline.json`),
        `${JSON.stringify(rows, null, 2)}\n`,
      );
      writeCharts(rows, short ? 'soak-short' : 'soak');
    } finally {
      await server?.stop();
      await counter.close();
      await admin.end();
      await test.drop();
      rmSync(folder, { recursive: true, force: true });
      const redis = new Redis(REDIS_URL);
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      await redis.quit();
    }
    return {
      done: `a server on PostgreSQL and Redis with its job workers, ${ACCOUNTS} accounts (1 site, 20 articles, 200 backlinks each; limits raised as the benchmarks raise them), a webhook endpoint per account for article.updated on loopback; for ${durationMs / 60_000} min at fixed rates from a worker thread: ${RATES.reads} API reads/s (lists, articles, backlinks, statistics), ${RATES.edits} API edits/s (titles, a body in ten), ${RATES.mcp} MCP tool calls/s (reads, an update in five) through the SDK's client with OAuth tokens; the server sampled every second (memory, event loop delay, CPU) and PostgreSQL every 5 s (connections)`,
      checks,
      figures,
    };
  },
};

async function connections(
  admin: pg.Client,
  database: string,
  own = 0,
): Promise<{ total: number; active: number }> {
  const r = await admin.query<{ total: string; active: string }>(
    "SELECT count(*) AS total, count(*) FILTER (WHERE state = 'active') AS active FROM pg_stat_activity WHERE datname = $1",
    [database],
  );
  return { total: Number(r.rows[0]?.total ?? 0) - own, active: Number(r.rows[0]?.active ?? 0) };
}

async function waitFor(ready: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

function writeCharts(rows: Row[], name: string): void {
  const at = (f: (r: Row) => number): Array<[number, number]> => rows.map((r) => [r.minute, f(r)]);
  const kinds = ['read', 'edit', 'mcp'];
  const charts: Record<string, string> = {
    memory: lineChart({
      title: 'Server memory',
      yLabel: 'MiB',
      xLabel: 'minutes',
      series: [
        { label: 'RSS (peak)', points: at((r) => r.rssMiB) },
        { label: 'heap used (peak)', points: at((r) => r.heapMaxMiB) },
        { label: 'heap used (low)', points: at((r) => r.heapMinMiB) },
      ],
    }),
    'event-loop': lineChart({
      title: 'Event loop delay, per 5 s',
      yLabel: 'ms',
      xLabel: 'minutes',
      series: [
        { label: 'p99 (worst second)', points: at((r) => r.eldP99) },
        { label: 'max', points: at((r) => r.eldMax) },
      ],
      limit: { value: ELD_P99_BOUND_MS, label: `p99 bound ${ELD_P99_BOUND_MS} ms` },
    }),
    latency: lineChart({
      title: 'Latency p99 per 5 s, by kind',
      yLabel: 'ms',
      xLabel: 'minutes',
      series: kinds.map((k) => ({ label: k, points: at((r) => r.p99[k] ?? 0) })),
    }),
    throughput: lineChart({
      title: 'Answered calls and webhooks received, per second',
      yLabel: 'per second',
      xLabel: 'minutes',
      series: [
        ...kinds.map((k) => ({ label: `${k}s`, points: at((r) => r.rates[k] ?? 0) })),
        { label: 'webhooks', points: at((r) => r.webhooksPerSecond) },
      ],
    }),
    connections: lineChart({
      title: 'PostgreSQL connections of the server, and webhooks not yet received',
      yLabel: 'connections / messages',
      xLabel: 'minutes',
      series: [
        { label: 'connections', points: at((r) => r.connections) },
        { label: 'active', points: at((r) => r.activeConnections) },
        { label: 'webhook backlog', points: at((r) => r.webhookBacklog) },
      ],
      limit: { value: CONNECTION_BOUND, label: `bound ${CONNECTION_BOUND}` },
    }),
  };
  for (const [chart, svg] of Object.entries(charts))
    writeFileSync(join(RESULTS, `${name}-${chart}.svg`), svg);
}
