import { expect, it } from 'vitest';
import { slowNeighbours } from '../../reliability/slow-neighbours.ts';

/*
 * Scenario 5 in CI size: a hanging webhook endpoint, another account whose 10 endpoints all hang, a
 * trickling image host, slow readers and 500 idle connections next to a normal client; every check of
 * the scenario must hold.
 */
it('keeps serving a normal client while its neighbours hang, trickle, read slowly and sit idle', async () => {
  const lines: string[] = [];
  const result = await slowNeighbours.run({ short: true, log: (line) => lines.push(line) });
  const failed = result.checks.filter((c) => !c.ok);
  expect(failed, `${lines.join('\n')}\n${JSON.stringify(result.figures, null, 2)}`).toEqual([]);
  expect(result.checks.length).toBeGreaterThan(8);
}, 120_000);
