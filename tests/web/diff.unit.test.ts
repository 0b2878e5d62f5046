import { describe, expect, it } from 'vitest';
import { bodyTextChanges, elide, renderWordChanges, wordChanges } from '../../apps/server/web/diff.ts';
import { htmlText } from '../../apps/server/web/html.ts';

describe('word diffs', () => {
  it('finds added and removed words, whitespace kept', async () => {
    expect(await wordChanges('the old house', 'the new house')).toEqual([
      { kind: 'same', text: 'the ' },
      { kind: 'removed', text: 'old' },
      { kind: 'added', text: 'new' },
      { kind: 'same', text: ' house' },
    ]);
  });

  it('compares the visible text of bodies, not their markup', async () => {
    const changes = await bodyTextChanges(
      '<p>One <b>two</b></p><p>three</p>',
      '<p>One <i>two</i></p><p>four</p>',
    );
    expect(changes?.filter((c) => c.kind !== 'same')).toEqual([
      { kind: 'removed', text: 'three' },
      { kind: 'added', text: 'four' },
    ]);
  });

  it('gives up (null) on texts that take longer than the timeout', async () => {
    const words = (n: number, salt: string) => Array.from({ length: n }, (_, i) => `${salt}${i}`).join(' ');
    expect(await wordChanges(words(40_000, 'a'), words(40_000, 'b'), 1)).toBeNull();
  });

  it('shortens long unchanged runs around the changes, keeping a line break where there was one', () => {
    const text = Array.from({ length: 40 }, (_, i) => `w${i}`).join(' ');
    expect(htmlText(elide(text, 2, 3))).toBe(
      'w0 w1 <span class="elided" title="unchanged text left out">…</span> w37 w38 w39',
    );
    expect(htmlText(elide(text, 0, 1))).toBe(
      '<span class="elided" title="unchanged text left out">…</span> w39',
    );
    expect(htmlText(elide('a\nb c d e f g h i', 1, 1))).toBe(
      'a\n<span class="elided" title="unchanged text left out">…</span> i',
    );
    expect(htmlText(elide('short & sweet', 2, 2))).toBe('short &amp; sweet');
  });

  it('renders insertions and deletions escaped, and says when nothing changed', () => {
    const out = htmlText(
      renderWordChanges([
        { kind: 'same', text: 'a ' },
        { kind: 'removed', text: '<b>' },
        { kind: 'added', text: 'x&y' },
      ]),
    );
    expect(out).toBe('<div class="diff">a <del>&lt;b&gt;</del><ins>x&amp;y</ins></div>');
    expect(htmlText(renderWordChanges([{ kind: 'same', text: 'all the same' }]))).toContain(
      'The text is the same.',
    );
  });
});
