/*
 * The reliability suite's shape (docs/reliability.md): a scenario does something to the real service
 * (kills it, stops its database, floods it) and checks a promise afterwards. `npm run reliability`
 * runs them all (`--only NAME` one of them); the crash and restart scenarios also run, shorter, in the
 * test suite (tests/reliability/). Loopback only; each scenario bounded in time and cleaning up after
 * itself (its databases, Redis keys, processes, folders).
 */

/** One promise checked: what, whether it held, and what was seen. */
export type Check = { what: string; ok: boolean; detail?: string };

export type ScenarioResult = {
  /** What was done to the service, in a sentence. */
  done: string;
  checks: Check[];
  /** Figures worth a line in the report: counts, latencies, times to recover. */
  figures: Record<string, string | number>;
};

export type ScenarioOptions = {
  /** The CI size: fewer requests, shorter phases. */
  short: boolean;
  log: (line: string) => void;
};

export type Scenario = {
  name: string;
  title: string;
  /** An upper bound on the run; the runner gives up (and fails the scenario) past it. */
  timeoutMs: number;
  run(opts: ScenarioOptions): Promise<ScenarioResult>;
};

/** A check from a condition. */
export function check(what: string, ok: boolean, detail?: string): Check {
  return detail === undefined ? { what, ok } : { what, ok, detail };
}

export function passed(result: ScenarioResult): boolean {
  return result.checks.length > 0 && result.checks.every((c) => c.ok);
}
