import { expect, it } from 'vitest';
import { crashWrites } from '../../reliability/crash-writes.ts';

/* The crash-writes reliability scenario, its short (CI) size: every check holds. */
it(
  'crash-writes: every check holds',
  async () => {
    const result = await crashWrites.run({ short: true, log: () => {} });
    expect(result.checks.filter((c) => !c.ok)).toEqual([]);
    expect(result.checks.length).toBeGreaterThan(0);
  },
  crashWrites.timeoutMs,
);
