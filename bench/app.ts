import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import type { Runtime } from '../apps/runtime.ts';
import { buildApp } from '../apps/server/app.ts';
import { createRequestLimiter } from '../apps/server/http/limits.ts';
import type { Config } from '../infra/config.ts';
import { createLogDestination } from '../infra/log-destination.ts';
import { type LoadSettings, type Measurement, measure } from './load.ts';
import { median } from './report.ts';

/**
 * The server as apps/server/serve.ts composes it, its log and its limiter's sent nowhere: the
 * limiter stays on (its quota is the config's), in this process (no Redis). `close` ends both.
 */
export async function quietApp(
  runtime: Runtime,
  config: Config,
): Promise<{ app: FastifyInstance; close: () => Promise<void> }> {
  const limiter = createRequestLimiter({
    perMinute: config.RATE_LIMIT_PER_MINUTE,
    keyPrefix: config.RATE_LIMIT_KEY_PREFIX,
    logger: pino({ level: 'silent' }),
  });
  const app = await buildApp({
    runtime,
    config,
    limit: limiter.hook,
    logger: { level: config.LOG_LEVEL, stream: createLogDestination('/dev/null').stream },
  });
  return {
    app,
    close: async () => {
      await app.close();
      await limiter.close();
    },
  };
}

/** One load a round runs: `rate` fixes requests a second on one connection; `target` marks the run a target is about. */
export type Scenario = {
  name: string;
  rate?: number;
  paths: readonly string[];
  target: boolean;
  runs: Measurement[];
};

/**
 * Runs every scenario once a round, `rounds` times in turn (alternating, so that a busy moment of the
 * machine falls on all of them), then gives each one's medians and whether it met `targetP99Ms`.
 */
export async function runRounds(
  base: string,
  scenarios: Scenario[],
  opts: {
    settings: LoadSettings;
    rounds: number;
    headers: Record<string, string>;
    databaseUrl: string;
    targetP99Ms: number;
    /** Before each run: the activity records of the run before are stored, not left to load this one. */
    beforeRun: () => Promise<void>;
    log: (line: string) => void;
  },
) {
  const { settings, rounds, log } = opts;
  for (let r = 1; r <= rounds; r++) {
    for (const s of scenarios) {
      await opts.beforeRun();
      const m = await measure(
        base,
        { ...settings, ...(s.rate ? { rate: s.rate, connections: 1 } : {}) },
        { headers: opts.headers, databaseUrl: opts.databaseUrl, paths: s.paths },
      );
      if (m.non2xx > 0 || m.errors > 0) throw new Error(`${s.name}: ${m.non2xx} non-2xx, ${m.errors} errors`);
      s.runs.push(m);
      log(
        `${s.name} (round ${r}/${rounds}): ${Math.round(m.rps)} req/s, p50 ${m.p50_ms} ms, p99 ${m.p99_ms} ms`,
      );
    }
  }
  const summary = scenarios.map((s) => {
    const p99 = median(s.runs.map((m) => m.p99_ms));
    return {
      name: s.name,
      rate: s.rate ?? null,
      rps: Math.round(median(s.runs.map((m) => m.rps))),
      p50_ms: median(s.runs.map((m) => m.p50_ms)),
      p99_ms: p99,
      target_met: s.target ? p99 < opts.targetP99Ms : null,
      runs: s.runs,
    };
  });
  for (const s of summary) {
    const verdict =
      s.target_met === null
        ? 'for comparison'
        : `target p99 < ${opts.targetP99Ms} ms: ${s.target_met ? 'met' : 'not met'}`;
    log(`${s.name}: ${s.rps} req/s, p50 ${s.p50_ms} ms, p99 ${s.p99_ms} ms (${verdict})`);
  }
  return summary;
}

/** Writes a benchmark's results as bench/results/<name>-latest.json; returns the file's path. */
export async function writeLatest(name: string, results: Record<string, unknown>): Promise<string> {
  const out = resolve(import.meta.dirname, 'results');
  await mkdir(out, { recursive: true });
  const file = resolve(out, `${name}-latest.json`);
  await writeFile(
    file,
    `${JSON.stringify({ finished_at: new Date().toISOString(), ...results }, null, 2)}\n`,
  );
  return file;
}
