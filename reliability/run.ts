import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { passed, type ScenarioResult } from './scenario.ts';
import { scenarios } from './scenarios.ts';

/*
 * `npm run reliability [-- --only NAME] [--short]`: runs the scenarios one after the other, each within
 * its time bound, prints each check, and writes reliability/results/<name>.json. Exit code 1 when a
 * check failed or a scenario did not finish in time.
 */
const args = parseArgs({
  options: { only: { type: 'string' }, short: { type: 'boolean', default: false } },
}).values;
const chosen = args.only ? scenarios.filter((s) => s.name === args.only) : scenarios;
if (chosen.length === 0) {
  process.stderr.write(`unknown scenario ${args.only}; known: ${scenarios.map((s) => s.name).join(', ')}\n`);
  process.exit(2);
}
const dir = resolve(import.meta.dirname, 'results');
await mkdir(dir, { recursive: true });
let failures = 0;
for (const scenario of chosen) {
  const log = (line: string): void => {
    process.stderr.write(`[${scenario.name}] ${line}\n`);
  };
  log(scenario.title);
  const started = performance.now();
  let result: ScenarioResult;
  let timer: NodeJS.Timeout | undefined;
  try {
    result = await Promise.race([
      scenario.run({ short: args.short ?? false, log }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`did not finish within ${scenario.timeoutMs / 1000} s`)),
          scenario.timeoutMs,
        );
      }),
    ]);
  } catch (error) {
    result = {
      done: scenario.title,
      checks: [{ what: 'the scenario ran to its end', ok: false, detail: String(error) }],
      figures: {},
    };
  } finally {
    clearTimeout(timer);
  }
  const seconds = Math.round((performance.now() - started) / 100) / 10;
  for (const c of result.checks)
    log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.what}${c.detail ? ` (${c.detail})` : ''}`);
  for (const [k, v] of Object.entries(result.figures)) log(`  ${k}: ${v}`);
  const ok = passed(result);
  if (!ok) failures++;
  log(`${ok ? 'passed' : 'FAILED'} in ${seconds} s`);
  await writeFile(
    // A short run never overwrites a full run's results.
    resolve(dir, `${scenario.name}${args.short ? '-short' : ''}.json`),
    `${JSON.stringify({ name: scenario.name, title: scenario.title, ok, seconds, at: new Date().toISOString(), short: args.short ?? false, ...result }, null, 2)}\n`,
  );
}
process.exit(failures > 0 ? 1 : 0);
