import { parentPort, workerData } from 'node:worker_threads';
import { Agent } from 'undici';

/** The load of `measureEdits` (bench/write.ts): fixed-rate PUTs, latencies of the measured part. */
const { urls, key, body, rate, seconds, warmupSeconds } = workerData as {
  urls: string[];
  key: string;
  body: string;
  rate: number;
  seconds: number;
  warmupSeconds: number;
};
const dispatcher = new Agent({ connections: 64, keepAliveTimeout: 30_000 });
const origins = urls.map((url) => new URL(url).origin);
const paths = urls.map((url) => new URL(url).pathname);
const samples: number[] = [];
/** When each measured edit started, in ms from the start of the measured phase. */
const startedAt: number[] = [];
let measuredFrom = 0;
const statuses: Record<string, number> = {};
let created = 0;
let n = 0;

/**
 * The request bodies, made before the run (JSON of a 21.6 KB body is not made while measuring): the
 * load generator shares the machine's two cores with the server and the database, so it does as
 * little as it can per request (undici's `request`, not `fetch` and its streams).
 */
function bodyOf(i: number): string {
  return JSON.stringify({ title: `Benchmark edit ${i}`, body: body.replace('<p>', `<p>Edit ${i}. `) });
}
const total = Math.round((warmupSeconds + seconds) * rate);
const bodies = Array.from({ length: total }, (_, i) => bodyOf(i));
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

async function put(measured: boolean): Promise<void> {
  const i = n++;
  const payload = bodies[i] ?? bodyOf(i);
  const started = performance.now();
  const res = await dispatcher.request({
    origin: origins[i % origins.length] as string,
    path: paths[i % paths.length] as string,
    method: 'PUT',
    headers,
    body: payload,
  });
  const answer = (await res.body.json()) as { changed?: boolean };
  const took = performance.now() - started;
  if (!measured) return;
  samples.push(took);
  startedAt.push(started - measuredFrom);
  statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
  if (answer.changed) created++;
}

async function phase(durationSeconds: number, measured: boolean): Promise<void> {
  const total = Math.round(durationSeconds * rate);
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    inFlight.push(put(measured));
  }
  await Promise.all(inFlight);
}

await phase(warmupSeconds, false);
measuredFrom = performance.now();
parentPort?.postMessage({ measuring: true });
await phase(seconds, true);
parentPort?.postMessage({
  samples,
  startedAt,
  measuredFrom: new Date(performance.timeOrigin + measuredFrom).toISOString(),
  statuses,
  created,
});
