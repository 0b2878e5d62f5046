import { describe, expect, it } from 'vitest';
import { MARK_END, MARK_START, SNIPPET_MAX, snippetOf } from '../../domain/article/search.ts';

/* The snippet of a search hit: ts_headline's marked excerpt of a body as plain text and ranges. */

const marked = (word: string): string => `${MARK_START}${word}${MARK_END}`;

describe('snippetOf', () => {
  it('takes the marks out and keeps where they were, whitespace collapsed', () => {
    const out = snippetOf(`  The   ${marked('boiler')}\n pressure ${marked('drops')} `);
    expect(out).toEqual({
      snippet: 'The boiler pressure drops',
      highlights: [
        [4, 10],
        [20, 25],
      ],
    });
  });

  it('leaves no space a tag made before a point or a comma', () => {
    expect(snippetOf(`our  ${marked('services')} . Most , all`)).toEqual({
      snippet: 'our services. Most, all',
      highlights: [[4, 12]],
    });
  });

  it('decodes character references of the stored HTML, the ranges counted after', () => {
    const out = snippetOf(`Tom &amp; Jerry&nbsp;&lt;3 &#233;t&#xE9; ${marked('caf&#233;')} &bogus;`);
    expect(out.snippet).toBe('Tom & Jerry <3 été café &bogus;');
    const [[start, end] = [0, 0]] = out.highlights;
    expect(out.snippet.slice(start, end)).toBe('café');
  });

  it(`cuts at ${SNIPPET_MAX} characters with an ellipsis, never in a surrogate pair, ranges ending at the cut`, () => {
    const long = `${'a'.repeat(SNIPPET_MAX - 2)}😀 ${marked('tail')}`;
    const out = snippetOf(long);
    expect(out.snippet.length).toBeLessThanOrEqual(SNIPPET_MAX);
    expect(out.snippet.endsWith('…')).toBe(true);
    expect(out.snippet.isWellFormed()).toBe(true);
    expect(out.highlights).toEqual([]);
    const crossing = snippetOf(`${'b'.repeat(SNIPPET_MAX - 5)} ${marked('boilers')}`);
    expect(crossing.snippet.length).toBeLessThanOrEqual(SNIPPET_MAX);
    for (const [, e] of crossing.highlights) expect(e).toBeLessThanOrEqual(crossing.snippet.length - 1);
  });
});
