import { describe, expect, it } from 'vitest';
import { lineChart } from '../../reliability/svg-chart.ts';

describe('the reliability report’s line charts', () => {
  const svg = lineChart({
    title: 'Server memory <RSS & heap>',
    yLabel: 'MiB',
    xLabel: 'minutes',
    series: [
      {
        label: 'RSS',
        points: [
          [0, 300],
          [5, 320],
          [10, 310],
        ],
      },
      {
        label: 'heap',
        points: [
          [0, 90],
          [5, 140],
          [10, 95],
        ],
      },
    ],
    limit: { value: 400, label: 'bound' },
  });

  it('is a standalone SVG with a title and a description that sums up each series', () => {
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg).toContain('<title id="t">Server memory &lt;RSS &amp; heap&gt;</title>');
    expect(svg).toContain(
      'RSS: from 300 to 310, between 300 and 320; heap: from 90 to 95, between 90 and 140',
    );
    expect(svg.trim().endsWith('</svg>')).toBe(true);
  });

  it('draws one line per series inside the plot, the y axis reaching the limit', () => {
    const paths = [...svg.matchAll(/<path d="([^"]+)"/g)].map((m) => m[1] as string);
    expect(paths).toHaveLength(2);
    for (const d of paths) {
      const numbers = d.replace(/[ML]/g, ' ').trim().split(/\s+/).map(Number);
      for (let i = 0; i < numbers.length; i += 2) {
        expect(numbers[i]).toBeGreaterThanOrEqual(64);
        expect(numbers[i]).toBeLessThanOrEqual(720 - 16);
        expect(numbers[i + 1]).toBeGreaterThanOrEqual(36);
        expect(numbers[i + 1]).toBeLessThanOrEqual(300 - 64);
      }
    }
    // The axis runs to a round value at or above the limit; the limit is drawn and labelled.
    expect(svg).toMatch(/>400<\/text>/);
    expect(svg).toContain('stroke-dasharray="6 4"');
    expect(svg).toContain('>bound</text>');
  });
});
