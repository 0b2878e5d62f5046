import { parentPort, workerData } from 'node:worker_threads';
import { Agent, fetch } from 'undici';

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
const samples: number[] = [];
/** When each measured edit started, in ms from the start of the measured phase. */
const startedAt: number[] = [];
let measuredFrom = 0;
const statuses: Record<string, number> = {};
let created = 0;
let n = 0;

async function put(measured: boolean): Promise<void> {
  const i = n++;
  const started = performance.now();
  const res = await fetch(urls[i % urls.length] as string, {
    method: 'PUT',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ title: `Benchmark edit ${i}`, body: body.replace('<p>', `<p>Edit ${i}. `) }),
    dispatcher,
  });
  const answer = (await res.json()) as { changed?: boolean };
  const took = performance.now() - started;
  if (!measured) return;
  samples.push(took);
  startedAt.push(started - measuredFrom);
  statuses[res.status] = (statuses[res.status] ?? 0) + 1;
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
