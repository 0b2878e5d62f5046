import { describe, expect, it } from 'vitest';
import { htmlText } from '../../apps/server/http/html.ts';
import { sentence, wholeNumber } from '../../apps/server/web/articles.ts';
import { renderBodyDiff, renderDiff } from '../../apps/server/web/word-diff.ts';
import { diffBodies, diffText, shorten } from '../../domain/html/word-diff.ts';

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

describe('the budget of a word diff', () => {
  const words = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');
  const budget = { wordsMax: 1_000, editsMax: 50, shownMax: 2_000 };

  it('compares texts of more words than the budget by line', () => {
    const before = `${words(600, 'w')}\nold line\n${words(10, 'z')}`;
    const after = `${words(600, 'w')}\nnew line\n${words(10, 'z')}`;
    const diff = diffText(before, after, 5, budget);
    expect(diff?.byLine).toBe(true);
    expect(diff?.parts.filter((p) => p.kind === 'removed')).toEqual([
      { kind: 'removed', text: 'old line\n' },
    ]);
  });

  it('compares texts of more word edits than the budget by line', () => {
    const diff = diffText(`${words(100, 'a')}\nsame`, `${words(100, 'b')}\nsame`, 5, budget);
    expect(diff?.byLine).toBe(true);
    expect(diff?.removed).toBe(100);
    expect(diff?.added).toBe(100);
  });

  it('gives none when even the lines are too far apart, or the diff would show too much', () => {
    const lines = (tag: string) => Array.from({ length: 60 }, (_, i) => `${tag}${i}`).join('\n');
    expect(diffText(lines('a'), lines('b'), 5, budget)).toBeNull();
    expect(diffText(words(300, 'a'), words(300, 'b'), 5, { ...budget, editsMax: 10_000 })).toBeNull();
  });

  it('says when a diff is not shown, and links to both versions whole', () => {
    const versions = {
      before: { label: 'revision 1', href: '/articles/a/revisions/1' },
      after: { label: 'revision 2', href: '/articles/a/revisions/2' },
    };
    const tooLarge = htmlText(renderBodyDiff(null, versions));
    expect(tooLarge).toContain('too long or too different');
    expect(tooLarge).toContain('<a href="/articles/a/revisions/1">revision 1</a>');
    expect(tooLarge).toContain('<a href="/articles/a/revisions/2">revision 2</a>');
    expect(htmlText(renderBodyDiff('busy', versions))).toContain('reload this page in a moment');
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
