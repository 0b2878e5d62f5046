import { expect, it } from 'vitest';
import { redisOutage } from '../../reliability/redis-outage.ts';

/*
 * Scenario 4 in CI size: a Redis of the test's own killed under load and started again empty, an API
 * process and a worker on it; every check of the scenario must hold.
 */
it('rides out Redis going away and coming back empty: no 5xx, limits fail open, jobs and schedules recover', async () => {
  const lines: string[] = [];
  const result = await redisOutage.run({ short: true, log: (line) => lines.push(line) });
  const failed = result.checks.filter((c) => !c.ok);
  expect(failed, lines.join('\n')).toEqual([]);
  expect(result.checks.length).toBeGreaterThan(5);
}, 120_000);
