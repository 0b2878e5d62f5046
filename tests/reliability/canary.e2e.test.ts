import { expect, it } from 'vitest';
import { CANARY_EVERY_MS, canary } from '../../reliability/canary.ts';

/*
 * The canary rule in CI size (docs/reliability.md): while every face gets its most hostile inputs, a
 * canary GET /healthz every 50 ms never waits more than 200 ms and the server's event-loop delay p99
 * stays under 50 ms. The one test with timing thresholds: the rule is defined by them. On a machine
 * whose other work holds the server's thread off its core beyond the rule with no load at all, or
 * takes more than 0.3 of a core while the load runs (the scenario's first check), the timings
 * cannot be judged: the test still requires every hostile request
 * answered as it should be, and is then reported skipped with the figures, not passed.
 */
const TIMING = [
  'the machine gives the server',
  `the canary asked every ${CANARY_EVERY_MS} ms`,
  'no canary GET /healthz waited',
  "the server's event-loop delay",
];

it('keeps /healthz answered within 200 ms and the event loop under 50 ms p99 while hostile inputs arrive', async (context) => {
  const lines: string[] = [];
  const result = await canary.run({ short: true, log: (line) => lines.push(line) });
  const report = `${lines.join('\n')}\n${JSON.stringify(result.figures, null, 2)}`;
  expect(result.checks.length).toBe(7);
  const [atRest] = result.checks;
  if (atRest && !atRest.ok) {
    const answers = result.checks.filter((c) => !TIMING.some((t) => c.what.startsWith(t)));
    expect(answers).toHaveLength(3);
    expect(
      answers.filter((c) => !c.ok),
      report,
    ).toEqual([]);
    context.skip(`this machine is too busy to judge the timings (${atRest.detail})`);
  }
  expect(
    result.checks.filter((c) => !c.ok),
    report,
  ).toEqual([]);
}, 300_000);
