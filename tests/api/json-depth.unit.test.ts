import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonDepth } from '../../apps/server/api/json-body.ts';

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

  it('counts brackets after escaped quotes and escaped backslashes correctly', () => {
    expect(jsonDepth('{"a":"\\"[[[","b":[1]}')).toBe(2);
    expect(jsonDepth('{"a":"\\\\","b":[[1]]}')).toBe(3);
    expect(jsonDepth('"[[[')).toBe(0);
  });
});
