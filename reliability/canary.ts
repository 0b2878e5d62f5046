import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { MAX_JSON_DEPTH } from '../apps/server/http/json-body.ts';
import { BODY_MAX_BYTES } from '../domain/article/events.ts';
import { browserless, freePort } from '../tests/oauth/helpers.ts';
import { createTestDatabase } from '../tests/support/db.ts';
import { startServer } from '../tests/support/server.ts';
import { sleep, until } from './crash-support.ts';
import { migrateAndSeed } from './outage-load.ts';
import { type Check, check, type Scenario } from './scenario.ts';

/*
 * The canary rule (docs/reliability.md): while the most hostile inputs every face accepts are sent
 * at once (word diffs of two ~2 MiB revisions opened several times over, `a&a&...` form bodies to the
 * editor's POST signed in and not, 2 MiB article bodies through the API, JSON nested as deep as the
 * API and MCP accept and deeper, as many query parameters as a request line holds), a canary
 * `GET /healthz` every 50 ms never waits more than 200 ms, and the server's event-loop delay p99
 * over the load stays under 50 ms (measured inside the server by reliability/soak-probe.ts). The load
 * is a bounded number of requests, each with a deadline; loopback only.
 */

const PROBE = fileURLToPath(new URL('./soak-probe.ts', import.meta.url));
/** How often the canary asks, and the longest it may wait for an answer. */
export const CANARY_EVERY_MS = 50;
export const CANARY_MAX_WAIT_MS = 200;
/** The server's event-loop delay p99 over the load may not reach this. */
export const EVENT_LOOP_P99_MAX_MS = 50;
/** How long the canary asks alone before the load, for the figures (the machine at rest). */
const QUIET_MS = 3_000;
/**
 * The share of a core a busy thread must get at rest. On a machine whose cores other processes keep
 * busy, every task of the server's thread takes longer than its work (two busy processes on 2 cores:
 * about two thirds of a core, each 20 ms task 30 ms long), so the timings measure the machine, not
 * the service.
 */
const CORE_SHARE_MIN = 0.8;

/** The share of a core this thread gets while it computes for `ms` (its CPU time over the wall time). */
function coreShare(ms = 300): number {
  const wall = performance.now();
  const cpu = process.threadCpuUsage();
  let x = 0;
  while (performance.now() - wall < ms) x += Math.sqrt(x + 1);
  const used = process.threadCpuUsage(cpu);
  return x < 0 ? 0 : (used.user + used.system) / 1000 / (performance.now() - wall);
}

/**
 * The most of a core other processes may use, on average, while the load runs: beyond it the load's
 * timings measure them, not the service (another test suite started meanwhile, say).
 */
const OTHERS_MAX_CORES = 0.3;

/** CPU seconds spent so far: by the whole machine (busy time, /proc/stat) and by one process (/proc/<pid>/stat). */
function cpuSeconds(pid?: number): number | null {
  try {
    if (pid === undefined) {
      const fields = readFileSync('/proc/stat', 'utf8')
        .split('\n')[0]
        ?.trim()
        .split(/\s+/)
        .slice(1)
        .map(Number);
      if (!fields || fields.length < 5) return null;
      // user nice system idle iowait irq softirq steal ...: all but idle and iowait are busy.
      const busy = fields.reduce((a, b) => a + b, 0) - (fields[3] ?? 0) - (fields[4] ?? 0);
      return busy / 100;
    }
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are the 14th and 15th fields: the 12th and 13th after the command's name.
    return (Number(after[11]) + Number(after[12])) / 100;
  } catch {
    return null;
  }
}

/** Every hostile request's own deadline: an answer later than this counts as none. */
const REQUEST_DEADLINE_MS = 60_000;

type Sent = { what: string; status: number; ms: number; fallback?: boolean };

/**
 * The canary, in a thread of its own so that the load's work in this process never delays it: a
 * GET every `everyMs` (not waiting for the one before), each wait measured, until told to stop. It
 * asks once before it reports ready, unmeasured: a thread's first `fetch` loads and compiles the HTTP
 * client (tens of milliseconds at rest, several times that on a core the load shares), a wait of the
 * canary's own, not the server's.
 */
const CANARY_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { url, everyMs } = workerData;
const waits = [];
const pending = new Set();
const ask = () => {
  const started = performance.now();
  const p = fetch(url, { signal: AbortSignal.timeout(5000) })
    .then(async (res) => { await res.arrayBuffer(); return res.status; }, () => 0)
    .then((status) => { waits.push({ status, ms: performance.now() - started }); pending.delete(p); });
  pending.add(p);
};
let timer;
fetch(url).then((res) => res.arrayBuffer(), () => undefined).then(() => {
  timer = setInterval(ask, everyMs);
  parentPort.postMessage('ready');
});
parentPort.on('message', async () => {
  clearInterval(timer);
  await Promise.all([...pending]);
  parentPort.postMessage(waits);
});
`;

type Canary = { stop(): Promise<Array<{ status: number; ms: number }>> };

/** A canary asking `url`, once it has asked once unmeasured (see CANARY_SOURCE). */
function startCanary(url: string): Promise<Canary> {
  const worker = new Worker(CANARY_SOURCE, { eval: true, workerData: { url, everyMs: CANARY_EVERY_MS } });
  return new Promise((ready, failed) => {
    worker.once('error', failed);
    worker.once('message', () =>
      ready({
        stop: () =>
          new Promise((resolve, reject) => {
            worker.once('message', (waits: Array<{ status: number; ms: number }>) => {
              void worker.terminate();
              resolve(waits);
            });
            worker.once('error', reject);
            worker.postMessage('stop');
          }),
      }),
    );
  });
}

/** One hostile request: its status (0: no answer in time) and how long it took; the body is read and dropped. */
async function send(what: string, url: string, init: RequestInit = {}): Promise<Sent> {
  const started = performance.now();
  try {
    const res = await fetch(url, {
      redirect: 'manual',
      ...init,
      signal: AbortSignal.timeout(REQUEST_DEADLINE_MS),
    });
    const ms = (): number => Math.round(performance.now() - started);
    if (!what.endsWith(' page')) {
      await res.arrayBuffer();
      return { what, status: res.status, ms: ms() };
    }
    // A diff page: whether it shows a diff or the note linking to both versions (looked for in the
    // bytes: the load's own work on this machine is kept small).
    const fallback = Buffer.from(await res.arrayBuffer()).includes('class="diff-fallback"');
    return { what, status: res.status, ms: ms(), fallback };
  } catch {
    return { what, status: 0, ms: Math.round(performance.now() - started) };
  }
}

/** Runs `tasks` with at most `width` at once. */
async function inParallel(width: number, tasks: Array<() => Promise<Sent>>): Promise<Sent[]> {
  const out: Sent[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < tasks.length) {
        const task = tasks[next++];
        if (task) out.push(await task());
      }
    }),
  );
  return out;
}

/** Prose of about `bytes` bytes whose words all carry `tag`: two such texts share almost no word. */
function prose(tag: string, bytes: number): string {
  const paragraph = (i: number): string =>
    `<p>${tag}${i} ${Array.from({ length: 12 }, (_, j) => `${tag}${(i * 13 + j) % 997}`).join(' ')}.</p>`;
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const p = paragraph(i);
    parts.push(p);
    size += p.length;
  }
  return parts.join('');
}

/** JSON nested `depth` arrays deep. */
const nested = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;

export const canary: Scenario = {
  name: 'canary',
  title: 'a canary /healthz every 50 ms while every face gets its most hostile inputs',
  timeoutMs: 6 * 60_000,
  async run({ short, log }) {
    const rounds = short ? 2 : 5;
    const test = await createTestDatabase('postgres');
    const folder = mkdtempSync(join(tmpdir(), 'cs-canary-'));
    const probeFile = join(folder, 'probe.jsonl');
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      DATABASE_URL: test.databaseUrl as string,
      DATA_DIR: folder,
      // The API's limits and the account's share of the large requests waiting are raised: the
      // scenario is one account's many large requests at once, not a flood, nor accounts side by side.
      RATE_LIMIT_PER_MINUTE: '1000000',
      EDIT_LIMIT_PER_DAY: '1000000',
      HEAVY_WAITING_PER_ACCOUNT: '64',
      PORT: String(port),
      PUBLIC_URL: base,
    };
    const checks: Check[] = [];
    const figures: Record<string, string | number> = {};
    let server: Awaited<ReturnType<typeof startServer>> | null = null;
    try {
      const seeded = (await migrateAndSeed(env, 1)) as Awaited<ReturnType<typeof migrateAndSeed>> & {
        email: string;
        password: string;
      };
      log('seeded; starting the server with the event-loop probe');
      server = await startServer(
        {
          ...env,
          SOAK_PROBE_FILE: probeFile,
          NODE_OPTIONS: `--import ${PROBE}`,
        },
        60_000,
        2_000,
      );
      const key = { authorization: `Bearer ${seeded.api_key}` };
      const json = { ...key, 'content-type': 'application/json' };
      const siteId = seeded.sites[0]?.id as string;
      const list = (await (
        await fetch(`${base}/api/v1/sites/${siteId}/articles`, { headers: key })
      ).json()) as { data: Array<{ id: string }> };
      // Undated: the seed's one article may be a draft, which a list of a period leaves out.
      const articleId = list.data[0]?.id as string;
      const original = (
        (await (await fetch(`${base}/api/v1/articles/${articleId}`, { headers: key })).json()) as {
          body: string;
        }
      ).body;

      // Two revisions of ~2 MiB that share almost no word: revision 2 (alpha) and 3 (beta).
      const room = BODY_MAX_BYTES - Buffer.byteLength(original) - 1024;
      const bodies = [`${original}${prose('alpha', room)}`, `${original}${prose('beta', room)}`];
      for (const body of bodies) {
        const res = await fetch(`${base}/api/v1/articles/${articleId}`, {
          method: 'PUT',
          headers: json,
          body: JSON.stringify({ body }),
        });
        if (res.status !== 200) throw new Error(`a 2 MiB edit answered ${res.status}: ${await res.text()}`);
      }
      figures.revision_bytes = Buffer.byteLength(bodies[0] as string);
      log(`two revisions of ${figures.revision_bytes} bytes written`);

      // A person signed in on the web pages.
      const web = browserless(base);
      const form = await (await web.request('GET', '/sign-in')).text();
      const csrf = /name="csrf" value="([^"]+)"/.exec(form)?.[1] ?? '';
      const signed = await web.request('POST', '/sign-in', {
        csrf,
        email: seeded.email,
        password: seeded.password,
      });
      if (signed.status !== 303) throw new Error(`signing in answered ${signed.status}`);
      const cookie = [...web.jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const asPerson: RequestInit = { headers: { cookie } };

      // The hostile inputs, each a bounded list of requests.
      const article = `${base}/articles/${articleId}`;
      // Every large body is made once, as bytes: the load's own work on this machine is kept small.
      const ampersands = new Map(
        [1024 * 1024, 8 * 1024 * 1024].map((bytes) => [bytes, Buffer.from('a&'.repeat(bytes / 2))]),
      );
      const formPost = (bytes: number, signedIn: boolean): RequestInit => ({
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...(signedIn ? { cookie } : {}),
        },
        body: ampersands.get(bytes) as Buffer,
      });
      const putBodies = bodies.map((body) => Buffer.from(JSON.stringify({ body })));
      const deepest = Buffer.from(`{"title":${nested(MAX_JSON_DEPTH - 1)}}`);
      const millionDeep = Buffer.from(nested(1_000_000));
      const manyParams = `?${'a&'.repeat(7_000)}a`;
      const diffPages = Array.from({ length: rounds }, () => [
        ...Array.from({ length: 4 }, () => () => send('revision 3 page', `${article}/revisions/3`, asPerson)),
        ...Array.from({ length: 4 }, () => () => send('revision 2 page', `${article}/revisions/2`, asPerson)),
        ...Array.from(
          { length: 2 },
          () => () => send('restore 2 page', `${article}/revisions/2/restore`, asPerson),
        ),
      ]).flat();
      const forms = Array.from({ length: rounds }, () => [
        () => send('form 1 MiB, signed out', `${article}/edit`, formPost(1024 * 1024, false)),
        () => send('form 1 MiB, signed in', `${article}/edit`, formPost(1024 * 1024, true)),
        () => send('form 8 MiB, signed out', `${article}/edit`, formPost(8 * 1024 * 1024, false)),
        () => send('form 8 MiB, signed in', `${article}/edit`, formPost(8 * 1024 * 1024, true)),
      ]).flat();
      const api = Array.from({ length: rounds }, (_, i) => [
        () =>
          send('PUT 2 MiB body', `${base}/api/v1/articles/${articleId}`, {
            method: 'PUT',
            headers: json,
            body: putBodies[i % 2] as Buffer,
          }),
        () =>
          send('PUT deepest JSON', `${base}/api/v1/articles/${articleId}`, {
            method: 'PUT',
            headers: json,
            body: deepest,
          }),
        () =>
          send('PUT JSON 1M deep', `${base}/api/v1/articles/${articleId}`, {
            method: 'PUT',
            headers: json,
            body: millionDeep,
          }),
        () =>
          send('MCP deepest JSON', `${base}/mcp`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
            body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":${nested(MAX_JSON_DEPTH - 3)}}}`,
          }),
        () =>
          send('MCP JSON 1M deep', `${base}/mcp`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
            body: millionDeep,
          }),
        () =>
          send('API many parameters', `${base}/api/v1/sites/${siteId}/articles${manyParams}`, {
            headers: key,
          }),
        () => send('page many parameters', `${base}/sites${manyParams}`, asPerson),
      ]).flat();

      // The probe's window (SIGUSR2) covers first a quiet stretch (the canary alone: what the machine
      // gives the server at rest, a figure) and then the load.
      await until(() => probeLines(probeFile).length > 0, 10_000);
      const quiet = await probeWindow(server, probeFile, async () => {
        const canaryAlone = await startCanary(`${base}/healthz`);
        await sleep(QUIET_MS);
        return canaryAlone.stop();
      });
      const quietMax = Math.round(Math.max(...quiet.result.map((w) => w.ms)));
      const quietP99 = quiet.line?.eld_window_p99_ms ?? -1;
      const share = coreShare();
      figures.quiet_canary_max_wait_ms = quietMax;
      figures.quiet_event_loop_p99_ms = quietP99;
      figures.quiet_core_share = Math.round(share * 100) / 100;
      log(
        `load: ${diffPages.length} diff pages, ${forms.length} form posts, ${api.length} API and MCP requests`,
      );
      const started = performance.now();
      const serverPid = server.child.pid;
      const cpuBefore = { machine: cpuSeconds(), server: cpuSeconds(serverPid), self: process.cpuUsage() };
      const loaded = await probeWindow(server, probeFile, async () => {
        const canaryRun = await startCanary(`${base}/healthz`);
        const sent = (
          await Promise.all([inParallel(10, diffPages), inParallel(2, forms), inParallel(3, api)])
        ).flat();
        return { sent, waits: await canaryRun.stop() };
      });
      const { sent, waits } = loaded.result;
      const window = loaded.line;
      const loadMs = Math.round(performance.now() - started);
      log(`load sent in ${loadMs} ms`);
      // What other processes took of the machine meanwhile: its busy time less this process's and the server's.
      const machineAfter = cpuSeconds();
      const serverAfter = cpuSeconds(serverPid);
      const selfUsed = process.cpuUsage(cpuBefore.self);
      const others =
        cpuBefore.machine === null ||
        machineAfter === null ||
        cpuBefore.server === null ||
        serverAfter === null
          ? 0
          : Math.max(
              0,
              machineAfter -
                cpuBefore.machine -
                (serverAfter - cpuBefore.server) -
                (selfUsed.user + selfUsed.system) / 1e6,
            ) /
            (loadMs / 1000);
      figures.others_cores_during_load = Math.round(others * 100) / 100;

      const slowest = Math.max(...waits.map((w) => w.ms));
      const unanswered = waits.filter((w) => w.status !== 200).length;
      figures.load_ms = loadMs;
      figures.canary_requests = waits.length;
      figures.canary_max_wait_ms = Math.round(slowest);
      figures.canary_p99_wait_ms = Math.round(
        percentile(
          waits.map((w) => w.ms),
          99,
        ),
      );
      figures.event_loop_p99_ms = window?.eld_window_p99_ms ?? -1;
      figures.event_loop_max_ms = window?.eld_window_max_ms ?? -1;
      for (const [what, group] of groupBy(sent)) {
        figures[`${what}: statuses`] = [...new Set(group.map((s) => s.status))].sort().join(' ');
        figures[`${what}: slowest ms`] = Math.max(...group.map((s) => s.ms));
        if (what.endsWith(' page'))
          figures[`${what}: with the note instead of a diff`] = group.filter((s) => s.fallback).length;
      }
      checks.push(
        check(
          'the machine gives the server what the rule needs, at rest and through the load (else the load cannot be judged)',
          quietMax <= CANARY_MAX_WAIT_MS &&
            quietP99 >= 0 &&
            quietP99 < EVENT_LOOP_P99_MAX_MS &&
            share >= CORE_SHARE_MIN &&
            others <= OTHERS_MAX_CORES,
          `the canary alone: slowest ${quietMax} ms, event-loop p99 ${quietP99} ms; a busy thread got ${Math.round(share * 100)}% of a core (at least ${CORE_SHARE_MIN * 100}% needed); other processes used ${figures.others_cores_during_load} of a core through the load (at most ${OTHERS_MAX_CORES})`,
        ),
        check(
          `the canary asked every ${CANARY_EVERY_MS} ms through the load`,
          // A timer of a starved machine fires late: half the asks are enough to say it kept asking.
          waits.length >= Math.floor(loadMs / CANARY_EVERY_MS / 2) && unanswered === 0,
          `${waits.length} asked over ${loadMs} ms, ${unanswered} not answered 200`,
        ),
        check(
          `no canary GET /healthz waited more than ${CANARY_MAX_WAIT_MS} ms`,
          slowest <= CANARY_MAX_WAIT_MS,
          `slowest ${Math.round(slowest)} ms`,
        ),
        check(
          `the server's event-loop delay p99 stayed under ${EVENT_LOOP_P99_MAX_MS} ms`,
          window !== undefined && window.eld_window_p99_ms < EVENT_LOOP_P99_MAX_MS,
          `p99 ${window?.eld_window_p99_ms} ms, max ${window?.eld_window_max_ms} ms over ${window?.eld_window_count} samples`,
        ),
        check(
          'every hostile request was answered',
          sent.every((s) => s.status !== 0),
          sent
            .filter((s) => s.status === 0)
            .map((s) => s.what)
            .join(', ') || 'all answered',
        ),
        check(
          'the diff pages were answered 200 (a diff, or the note linking to both versions)',
          sent.filter((s) => s.what.endsWith(' page')).every((s) => s.status === 200),
          figures['revision 3 page: statuses'] as string,
        ),
        check(
          'the API took every 2 MiB body',
          sent.filter((s) => s.what === 'PUT 2 MiB body').every((s) => s.status === 200),
          figures['PUT 2 MiB body: statuses'] as string,
        ),
      );
      return {
        done: `sent ${sent.length} hostile requests in ${loadMs} ms while a canary asked /healthz every ${CANARY_EVERY_MS} ms`,
        checks,
        figures,
      };
    } finally {
      // A server still busy past its shutdown deadline is killed: the scenario ends by itself.
      if (server) {
        const stopping = server;
        const stopped = await Promise.race([
          stopping.stop().then(() => true),
          sleep(35_000).then(() => false),
        ]);
        if (!stopped) stopping.child.kill('SIGKILL');
      }
      await test.drop();
      rmSync(folder, { recursive: true, force: true });
    }
  },
};

/**
 * Runs `work` inside a window of the probe: SIGUSR2 starts it once the next line shows the probe
 * running, and the line written after `work` is done covers it whole.
 */
async function probeWindow<T>(
  server: { child: { kill(signal: NodeJS.Signals): boolean } },
  file: string,
  work: () => Promise<T>,
): Promise<{ result: T; line: ProbeLine | undefined }> {
  server.child.kill('SIGUSR2');
  const marked = probeLines(file).length;
  await until(() => probeLines(file).length > marked, 5_000);
  const result = await work();
  const done = probeLines(file).length;
  await until(() => probeLines(file).length > done, 5_000);
  return { result, line: probeLines(file).at(-1) };
}

type ProbeLine = { eld_window_p99_ms: number; eld_window_max_ms: number; eld_window_count: number };

function probeLines(file: string): ProbeLine[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((line) => line.endsWith('}'))
    .map((line) => JSON.parse(line) as ProbeLine);
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

function groupBy(sent: Sent[]): Map<string, Sent[]> {
  const groups = new Map<string, Sent[]>();
  for (const s of sent) groups.set(s.what, [...(groups.get(s.what) ?? []), s]);
  return groups;
}
