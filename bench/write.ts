import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { checkProtectedBlocks } from '../domain/html/facts.ts';
import { sanitizeHtml } from '../domain/html/sanitize.ts';

/*
 * The write benchmarks of issue 4:
 * - the sanitiser plus the protected-block check alone, on the 20 KB body with 10 protected blocks
 *   (target: 2 ms or less);
 * - PUT of that article at a fixed 100 edits/s, each one a new revision (target: p99 30 ms or less).
 */

export type Timing = { runs: number; mean_ms: number; p50_ms: number; p99_ms: number; max_ms: number };

function summarise(samples: number[]): Timing {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const round = (x: number): number => Math.round(x * 1000) / 1000;
  return {
    runs: sorted.length,
    mean_ms: round(sorted.reduce((s, x) => s + x, 0) / Math.max(1, sorted.length)),
    p50_ms: round(at(0.5)),
    p99_ms: round(at(0.99)),
    max_ms: round(sorted[sorted.length - 1] ?? 0),
  };
}

/**
 * What an edit of the body costs in the domain: sanitise the new body, check it against the stored
 * one. Each run's body is new (no remembered facts of it); the stored one is the same throughout,
 * as for edits of one article.
 */
export function measureSanitiseAndCheck(body: string, runs = 500, warmup = 50): Timing {
  const samples: number[] = [];
  for (let i = 0; i < warmup + runs; i++) {
    const edited = body.replace('<p>', `<p>Edit ${i}. `);
    const started = performance.now();
    const clean = sanitizeHtml(edited).html;
    const check = checkProtectedBlocks(body, clean);
    const took = performance.now() - started;
    if (!check.ok) throw new Error(`the benchmark edit must keep every protected block: ${check.summary}`);
    if (i >= warmup) samples.push(took);
  }
  return summarise(samples);
}

/** The edits that started in one second of the measured run: where a tail comes from. */
export type Second = { second: number; runs: number; p50_ms: number; max_ms: number };

export type WriteLoad = Timing & {
  rate: number;
  seconds: number;
  per_second: Second[];
  statuses: Record<string, number>;
  revisions_created: number;
};

/**
 * PUTs at a fixed rate (open loop: a request starts every 1/rate s whether or not the last one has
 * finished), from a worker thread so the load does not share the server's event loop. Each PUT
 * changes the title and the body, so each is a new revision.
 */
export async function measureEdits(opts: {
  /** Articles edited in turn. */
  urls: string[];
  key: string;
  body: string;
  rate: number;
  seconds: number;
  warmupSeconds: number;
}): Promise<WriteLoad> {
  const worker = new Worker(new URL('./write-worker.ts', import.meta.url), { workerData: opts });
  const result = await new Promise<{
    samples: number[];
    startedAt: number[];
    statuses: Record<string, number>;
    created: number;
  }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  return {
    ...summarise(result.samples),
    rate: opts.rate,
    seconds: opts.seconds,
    per_second: perSecond(result.samples, result.startedAt),
    statuses: result.statuses,
    revisions_created: result.created,
  };
}

/** Latencies grouped by the second their request started in. */
export function perSecond(samples: readonly number[], startedAt: readonly number[]): Second[] {
  const groups = new Map<number, number[]>();
  samples.forEach((took, i) => {
    const second = Math.floor((startedAt[i] ?? 0) / 1000);
    groups.set(second, [...(groups.get(second) ?? []), took]);
  });
  return [...groups.entries()]
    .sort(([a], [b]) => a - b)
    .map(([second, took]) => {
      const t = summarise(took);
      return { second, runs: t.runs, p50_ms: t.p50_ms, max_ms: t.max_ms };
    });
}
