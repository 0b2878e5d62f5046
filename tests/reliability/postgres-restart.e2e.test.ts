import { expect, it } from 'vitest';
import { postgresRestart } from '../../reliability/postgres-restart.ts';

/*
 * Scenario 3 in CI size: PostgreSQL (a cluster of the test's own) stopped under load with
 * `pg_ctl -m fast` and `-m immediate` and started again; every check of the scenario must hold.
 */
it('survives PostgreSQL restarts under load: 503s with Retry-After, recovery without a service restart', async () => {
  const lines: string[] = [];
  const result = await postgresRestart.run({ short: true, log: (line) => lines.push(line) });
  const failed = result.checks.filter((c) => !c.ok);
  expect(failed, lines.join('\n')).toEqual([]);
  expect(result.checks.length).toBeGreaterThan(5);
}, 120_000);
