import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonDepth, nestsDeeperThan } from '../../apps/server/http/json-body.ts';

/** The nesting depth of a parsed JSON value. */
function depthOf(value: unknown): number {
  if (Array.isArray(value)) return 1 + Math.max(0, ...value.map(depthOf));
  if (value !== null && typeof value === 'object')
    return 1 + Math.max(0, ...Object.values(value).map(depthOf));
  return 0;
}

/** The definition, read character by character: brackets outside strings, a backslash escapes one character. */
function reference(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') max = Math.max(max, ++depth);
    else if (c === '}' || c === ']') depth--;
  }
  return max;
}

describe('jsonDepth', () => {
  it('is the nesting depth of any JSON value, strings with quotes, backslashes and brackets included', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        expect(jsonDepth(JSON.stringify(value))).toBe(depthOf(value));
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with a character-by-character reading on any text, malformed and unterminated included', () => {
    const soup = fc.string({ unit: fc.constantFrom('{', '}', '[', ']', '"', '\\', 'a', ' ', ',') });
    fc.assert(
      fc.property(soup, (text) => {
        expect(jsonDepth(text)).toBe(reference(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('given a depth to stop above, is the depth up to one more than it, on any text', () => {
    const soup = fc.string({ unit: fc.constantFrom('{', '}', '[', ']', '"', '\\', 'a', ' ', ',') });
    fc.assert(
      fc.property(soup, fc.integer({ min: 0, max: 8 }), (text, stopAbove) => {
        expect(jsonDepth(text, stopAbove)).toBe(Math.min(reference(text), stopAbove + 1));
      }),
      { numRuns: 2000 },
    );
    expect(jsonDepth(`${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`, 256)).toBe(257);
  });

  it('counts brackets after escaped quotes and escaped backslashes correctly', () => {
    expect(jsonDepth('{"a":"\\"[[[","b":[1]}')).toBe(2);
    expect(jsonDepth('{"a":"\\\\","b":[[1]]}')).toBe(3);
    expect(jsonDepth('"[[[')).toBe(0);
  });
});

describe('nestsDeeperThan', () => {
  it('says whether the depth exceeds the limit, on any text and any limit', () => {
    const soup = fc.string({ unit: fc.constantFrom('{', '}', '[', ']', '"', '\\', 'a', ' ', ',') });
    fc.assert(
      fc.property(soup, fc.integer({ min: 0, max: 8 }), (text, limit) => {
        expect(nestsDeeperThan(text, limit)).toBe(reference(text) > limit);
      }),
      { numRuns: 2000 },
    );
  });

  it('does not scan a long text with fewer brackets than the limit, and still finds a deep one', () => {
    const body = JSON.stringify({ body: `<a href="x">${'"quoted" '.repeat(200_000)}</a>` });
    expect(nestsDeeperThan(body, 256)).toBe(false);
    expect(nestsDeeperThan(`${'['.repeat(257)}${']'.repeat(257)}`, 256)).toBe(true);
    expect(nestsDeeperThan(`${'['.repeat(256)}${']'.repeat(256)}`, 256)).toBe(false);
  });
});
