import { describe, expect, it } from 'vitest';
import {
  ALL_WORDS,
  diffBodies,
  diffChanges,
  diffText,
  type TextChange,
} from '../../../domain/html/word-diff.ts';

/*
 * A word diff as the API's and MCP's `[{op, text}]` list (diffChanges), and the protected link as one
 * unit of the word diff of two bodies.
 */

function must<T>(value: T | null): T {
  if (value === null) throw new Error('expected a diff');
  return value;
}

/** The text before (`equal` and `delete`) or after (`equal` and `insert`) a list of changes. */
const side = (changes: TextChange[], op: 'delete' | 'insert'): string =>
  changes
    .filter((c) => c.op === 'equal' || c.op === op)
    .map((c) => c.text)
    .join('');

const link = (text: string, id = 'bl_1'): string =>
  `<a href="https://partner.example/guide" data-service-protected="backlink" data-service-id="${id}">${text}</a>`;

describe('diffChanges', () => {
  it('maps kept, added and removed stretches to equal, insert and delete, in order', () => {
    const changes = diffChanges(must(diffText('The old boiler is fine', 'The new boiler is very fine')));
    expect(changes).toEqual([
      { op: 'equal', text: 'The ' },
      { op: 'delete', text: 'old' },
      { op: 'insert', text: 'new' },
      { op: 'equal', text: ' boiler is ' },
      { op: 'insert', text: 'very ' },
      { op: 'equal', text: 'fine' },
    ]);
  });

  it('gives both texts back from a whole diff, but for the spaces between words', () => {
    const words = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');
    const before = `${words(60, 'a')} old ${words(60, 'b')}`;
    const after = `${words(60, 'a')} new ${words(60, 'b')} more`;
    const changes = diffChanges(must(diffText(before, after, ALL_WORDS)));
    const spaced = (text: string) => text.replace(/\s+/g, ' ').trim();
    expect(spaced(side(changes, 'delete'))).toBe(before);
    expect(spaced(side(changes, 'insert'))).toBe(after);
  });

  it('leaves out the gaps of a shortened diff (they have no text)', () => {
    const words = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');
    const diff = must(diffText(`${words(40, 'a')} old`, `${words(40, 'a')} new`, 3));
    expect(diff.parts[0]).toMatchObject({ kind: 'gap' });
    const changes = diffChanges(diff);
    expect(changes.map((c) => c.op)).toEqual(['equal', 'delete', 'insert']);
    expect(changes[0]?.text).toBe(' a37 a38 a39 '.trimStart());
  });

  it('gives one equal change for the same text twice', () => {
    expect(diffChanges(must(diffText('Same words', 'Same words')))).toEqual([
      { op: 'equal', text: 'Same words' },
    ]);
  });
});

describe('a protected link is one unit of a body diff', () => {
  it('keeps a link whole when words are added around it', () => {
    const diff = must(
      diffBodies(
        `<p>Read the ${link('best boiler guide')} today.</p>`,
        `<p>Read the best ${link('best boiler guide')} now today.</p>`,
        undefined,
        ALL_WORDS,
      ),
    );
    const changes = diffChanges(diff);
    expect(changes).toContainEqual({ op: 'equal', text: 'best boiler guide ' });
    expect(changes.filter((c) => c.op !== 'equal').map((c) => c.text.trim())).toEqual(['best', 'now']);
  });

  it('removes a link whole, never only some of its words', () => {
    const diff = must(
      diffBodies(
        `<p>Read the ${link('best boiler guide')} today.</p>`,
        '<p>Read the best boiler today.</p>',
        undefined,
        ALL_WORDS,
      ),
    );
    const changes = diffChanges(diff);
    expect(changes).toContainEqual({ op: 'delete', text: 'best boiler guide' });
    expect(changes).toContainEqual({ op: 'insert', text: 'best boiler' });
    expect(diff.removed).toBe(3);
    expect(diff.added).toBe(2);
    expect(side(changes, 'delete')).toBe('Read the best boiler guide today.');
    expect(side(changes, 'insert')).toBe('Read the best boiler today.');
  });

  it('compares a text that holds the stand-in code points itself as plain words', () => {
    const odd = String.fromCodePoint(0x100000);
    const diff = must(diffBodies(`<p>a${odd} ${link('x y')}</p>`, `<p>a${odd} b ${link('x y')}</p>`));
    expect(side(diffChanges(diff), 'insert')).toBe(`a${odd} b x y`);
  });
});
