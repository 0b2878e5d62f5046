import { describe, expect, it } from 'vitest';
import { sentence, wholeNumber } from '../../apps/server/web/articles.ts';
import { htmlText } from '../../apps/server/web/html.ts';
import { diffBodies, diffText, renderDiff, shorten } from '../../apps/server/web/word-diff.ts';

function must<T>(value: T | null): T {
  if (value === null) throw new Error('expected a diff');
  return value;
}

describe('word diffs of article text', () => {
  it('marks the words added and removed, and counts them', () => {
    const diff = diffText('The old boiler is fine', 'The new boiler is very fine');
    expect(diff).not.toBeNull();
    expect(diff?.added).toBe(2);
    expect(diff?.removed).toBe(1);
    expect(htmlText(renderDiff(must(diff)))).toBe(
      '<div class="diff">The <del>old</del><ins>new</ins> boiler is <ins>very </ins>fine</div>',
    );
  });

  it('compares the visible text of bodies, not their markup, and escapes it', () => {
    const diff = diffBodies(
      '<p>Call <a href="https://a.example/">us</a> today</p><p>&lt;b&gt; stays text</p>',
      '<p>Call <strong>us</strong> tomorrow</p><p>&lt;b&gt; stays text</p>',
    );
    expect(diff?.parts.filter((p) => p.kind !== 'same')).toEqual([
      { kind: 'removed', text: 'today' },
      { kind: 'added', text: 'tomorrow' },
    ]);
    const markup = htmlText(renderDiff(must(diff)));
    expect(markup).toContain('&lt;b&gt; stays text');
    expect(markup).not.toContain('href');
  });

  it('shortens long unchanged stretches to the words around each change', () => {
    const words = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => `w${from + i}`).join(' ');
    const before = `${words(0, 40)} old ${words(40, 80)}`;
    const after = `${words(0, 40)} new ${words(40, 80)}`;
    const diff = diffText(before, after, 5);
    const kinds = diff?.parts.map((p) => p.kind);
    expect(kinds).toEqual(['gap', 'same', 'removed', 'added', 'same', 'gap']);
    expect(diff?.parts[0]).toEqual({ kind: 'gap', words: 35 });
    expect(diff?.parts[1]).toEqual({ kind: 'same', text: 'w35 w36 w37 w38 w39 ' });
    expect(diff?.parts[4]).toEqual({ kind: 'same', text: ' w40 w41 w42 w43 w44' });
    expect(diff?.parts[5]).toEqual({ kind: 'gap', words: 35 });
    expect(htmlText(renderDiff(must(diff)))).toContain('[… 35 unchanged words …]');
  });

  it('keeps short stretches and texts without change whole', () => {
    const same = [{ kind: 'same' as const, text: 'a b c d e f g h i j k l m n o p' }];
    expect(shorten(same, 2)).toEqual(same);
    const parts = [
      { kind: 'removed' as const, text: 'x' },
      { kind: 'same' as const, text: ' a b c d e f ' },
      { kind: 'added' as const, text: 'y' },
    ];
    expect(shorten(parts, 2)).toEqual(parts);
  });
});

describe('page helpers', () => {
  it('reads positive whole numbers only', () => {
    expect(wholeNumber('3', 10)).toBe(3);
    for (const bad of ['0', '-1', '1.5', '03', 'x', '', '11', undefined, ['2']])
      expect(wholeNumber(bad, 10)).toBeNull();
  });

  it('makes a message a sentence', () => {
    expect(sentence('the article is at revision 3, not 2')).toBe('The article is at revision 3, not 2.');
    expect(sentence('Keep them.')).toBe('Keep them.');
  });
});
