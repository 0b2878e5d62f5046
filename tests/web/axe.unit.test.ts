import { describe, expect, it } from 'vitest';
import { blockingViolations, describeViolation } from '../support/axe.ts';

describe('the accessibility check', () => {
  const violation = (impact: string | null, id = 'color-contrast') => ({
    id,
    impact,
    help: 'Elements must meet minimum color contrast ratio thresholds',
    nodes: [{ target: ['p.muted'] }, { target: ['#x', 'span'] }],
  });

  it('names the impact, rule, help and every element', () => {
    expect(describeViolation(violation('serious'))).toBe(
      'serious color-contrast: Elements must meet minimum color contrast ratio thresholds — p.muted, #x span',
    );
  });

  it('blocks on serious and critical only', () => {
    const found = blockingViolations([
      violation('minor', 'a'),
      violation('moderate', 'b'),
      violation('serious', 'c'),
      violation('critical', 'd'),
      violation(null, 'e'),
    ]);
    expect(found.map((line) => line.split(' ')[1])).toEqual(['c:', 'd:']);
  });
});
