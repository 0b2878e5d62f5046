import { expect, it } from 'vitest';
import { projectorCrash } from '../../reliability/projector-crash.ts';

/* The projector-crash reliability scenario, its short (CI) size: every check holds. */
it(
  'projector-crash: every check holds',
  async () => {
    const result = await projectorCrash.run({ short: true, log: () => {} });
    expect(result.checks.filter((c) => !c.ok)).toEqual([]);
    expect(result.checks.length).toBeGreaterThan(0);
  },
  projectorCrash.timeoutMs,
);
