import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/*
 * Three groups. The unit tests (`npm run test:unit`: pure, no database, server or browser) and the
 * suite run side by side, two files at a time at least (most of a file's time is spent waiting on
 * its servers, databases and browser); then the tests whose rule is a timing (the canary and the
 * slow-neighbours scenario, docs/reliability.md), alone, so that the other files' load is not what
 * they measure. The suite's global setup chooses the run's PostgreSQL and Redis (containers where no
 * server is named, tests/support/services.ts) and makes the migrated database templates once per run.
 *
 * The test files' processes run with V8's baseline WebAssembly compiler only (`--liftoff-only`, as the
 * CLI does, docs/performance.md "Start and CLI"): the embedded engine (PGlite) is compiled by every file
 * that opens it, and a file's short work never repays the optimising compile. JavaScript keeps its tiers.
 *
 * Timeouts are sized for a machine at a quarter of its speed (other work on its cores): a test that
 * waits for something polls for it (tests/support/wait.ts) and ends as soon as it holds.
 */
const UNIT = ['tests/**/*.unit.test.ts'];
const ALONE = ['tests/reliability/canary.e2e.test.ts', 'tests/reliability/slow-neighbours.e2e.test.ts'];

export default defineConfig({
  test: {
    pool: 'forks',
    execArgv: ['--liftoff-only'],
    maxWorkers: Math.max(2, availableParallelism()),
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT } },
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['tests/**/*.test.ts'],
          exclude: [...UNIT, ...ALONE],
          globalSetup: ['tests/support/global-setup.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'alone',
          include: ALONE,
          globalSetup: ['tests/support/services-setup.ts'],
          sequence: { groupOrder: 1 },
          maxWorkers: 1,
        },
      },
    ],
  },
});
