import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createJsonTexts } from '../../infra/json-texts.ts';

describe('the JSON texts of long strings', () => {
  it('is JSON.stringify, remembered or not', () => {
    const texts = createJsonTexts({ maxUnits: 2_000, minLength: 50 });
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'binary', maxLength: 400 }), { maxLength: 20 }), (strings) => {
        for (const s of [...strings, ...strings]) expect(texts.of(s)).toBe(JSON.stringify(s));
        expect(texts.size).toBeLessThanOrEqual(2_000);
      }),
    );
  });

  it('remembers a long string once, and forgets the least recently used when full', () => {
    const texts = createJsonTexts({ maxUnits: 1_000, minLength: 100 });
    const a = `"${'a'.repeat(198)}"`;
    const b = 'b'.repeat(200);
    const c = 'c'.repeat(200);
    texts.of('short');
    expect(texts.size).toBe(0);
    texts.of(a);
    expect(texts.size).toBe(200 + 204);
    texts.of(a);
    expect(texts.size).toBe(404);
    texts.of(b); // 404 + 402
    texts.of(a); // a is now the most recent
    texts.of(c); // over 1,000: b, the least recent, goes
    expect(texts.size).toBe(404 + 402);
    texts.of(b); // back in: a goes, c stays
    expect(texts.size).toBe(402 + 402);
    expect(texts.of('x'.repeat(2_000))).toBe(JSON.stringify('x'.repeat(2_000))); // larger than it all: not kept
    expect(texts.size).toBe(804);
  });
});
