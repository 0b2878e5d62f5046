import { parentPort, workerData } from 'node:worker_threads';
import { Agent } from 'undici';

/**
 * The load of `measureEdits` (bench/write.ts), latencies of the measured part. Two shapes:
 * - `rate`: a PUT every 1/rate s (open loop), each a new title and body;
 * - `connections`: that many connections, each sending its next PUT as soon as the last one is
 *   answered (closed loop: as fast as the server takes them), each a new title only.
 */
const { urls, key, body, rate, connections, titleOnly, seconds, warmupSeconds } = workerData as {
  urls: string[];
  key: string;
  body: string;
  rate?: number | undefined;
  connections?: number | undefined;
  titleOnly?: boolean | undefined;
  seconds: number;
  warmupSeconds: number;
};
const dispatcher = new Agent({ connections: connections ?? 64, keepAliveTimeout: 30_000 });
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
 * little as it can per request (undici's `request`, not `fetch` and its streams). A title-only edit's
 * body is a few dozen bytes: made as it is sent.
 */
function bodyOf(i: number): string {
  if (titleOnly) return `{"title":"Saturation edit ${i}"}`;
  return JSON.stringify({ title: `Benchmark edit ${i}`, body: body.replace('<p>', `<p>Edit ${i}. `) });
}
const bodies = rate
  ? Array.from({ length: Math.round((warmupSeconds + seconds) * rate) }, (_, i) => bodyOf(i))
  : [];
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

/** Open loop: a PUT every 1/rate s, whether or not the last one has been answered. */
async function atRate(perSecond: number, durationSeconds: number, measured: boolean): Promise<void> {
  const total = Math.round(durationSeconds * perSecond);
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    inFlight.push(put(measured));
  }
  await Promise.all(inFlight);
}

/** Closed loop: `count` connections, each starting its next PUT when the last is answered, until the time is up. */
async function asFastAsAnswered(count: number, durationSeconds: number, measured: boolean): Promise<void> {
  const end = performance.now() + durationSeconds * 1000;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) await put(measured);
  };
  await Promise.all(Array.from({ length: count }, loop));
}

const phase = (durationSeconds: number, measured: boolean): Promise<void> =>
  connections
    ? asFastAsAnswered(connections, durationSeconds, measured)
    : atRate(rate ?? 100, durationSeconds, measured);

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
