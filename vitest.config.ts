import { defineConfig } from 'vitest/config';

/*
 * Two groups, one after the other: every test file side by side, then the tests whose rule is a timing
 * (the canary, docs/reliability.md), alone on the machine so that the other files' load is not what
 * they measure.
 */
const ALONE = ['tests/reliability/canary.e2e.test.ts'];

export default defineConfig({
  test: {
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'suite', include: ['tests/**/*.test.ts'], exclude: ALONE } },
      { extends: true, test: { name: 'alone', include: ALONE, sequence: { groupOrder: 1 } } },
    ],
  },
});
