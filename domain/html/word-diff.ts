import { diffLines, diffWords } from 'diff';
import { countWords, textContent, textContentWith } from './text.ts';
import { type Element, nodeText, PROTECTED_ATTRIBUTE } from './tree.ts';

/*
 * Word diffs of an article's text (the revision, restore, compare, staff and stale-editor pages, the
 * API's and MCP's comparison of two revisions): jsdiff's `diffWords` on the visible text of two bodies
 * (never their HTML), in which a protected link is one unit (its text is added, removed or kept whole),
 * long unchanged stretches shortened to a few words of context (or kept whole: ALL_WORDS). The work
 * is bounded by size, not by a clock: texts of more than DIFF_WORDS_MAX words, or a word diff of more
 * than DIFF_EDITS_MAX edits, are compared by line instead; a line diff of more than DIFF_EDITS_MAX edits, or a diff that would show more than
 * DIFF_SHOWN_MAX characters, is none (the pages then link to both versions whole). Run on the
 * worker pool (infra/sanitize-pool.ts), never in the server's thread for a large body.
 */

export type DiffPart =
  | { kind: 'same' | 'added' | 'removed'; text: string }
  /** Unchanged words left out between two changes (or before the first, after the last). */
  | { kind: 'gap'; words: number };

export type TextDiff = {
  parts: DiffPart[];
  /** Words added and removed. */
  added: number;
  removed: number;
  /** True when the texts were too long or too far apart to compare word by word: compared by line. */
  byLine: boolean;
};

/** Words of unchanged text kept on each side of a change. */
export const CONTEXT_WORDS = 12;
/** As the context: every unchanged word kept, so that the diff gives both texts back whole. */
export const ALL_WORDS = Number.POSITIVE_INFINITY;
/** At most this many words in the two texts together are compared word by word (about 1.2 MiB of prose). */
export const DIFF_WORDS_MAX = 200_000;
/** The largest edit distance (in words, or in lines) a comparison looks for before giving up. */
export const DIFF_EDITS_MAX = 2_000;
/** At most this many characters of text are shown in a diff (its changes and their context). */
export const DIFF_SHOWN_MAX = 256 * 1024;

export type DiffBudget = { wordsMax: number; editsMax: number; shownMax: number };
const BUDGET: DiffBudget = { wordsMax: DIFF_WORDS_MAX, editsMax: DIFF_EDITS_MAX, shownMax: DIFF_SHOWN_MAX };

/**
 * The word diff of two plain texts: by line when they are too long or too different for words, null
 * when even the line diff is over the budget or would show too much.
 */
export function diffText(
  before: string,
  after: string,
  context: number = CONTEXT_WORDS,
  budget: DiffBudget = BUDGET,
): TextDiff | null {
  return diffMarked(before, after, context, budget, (text) => text);
}

/**
 * The word diff of two article bodies (stored HTML), on their visible text, each protected link one
 * unit: a change never splits its text. `context` words of unchanged text are kept around each change
 * (ALL_WORDS: all of them).
 */
export function diffBodies(
  before: string,
  after: string,
  budget: DiffBudget = BUDGET,
  context: number = CONTEXT_WORDS,
): TextDiff | null {
  // Each protected link's text stands in the texts as one code point of a private use area, which
  // jsdiff takes as one token; the same text is the same code point on both sides.
  const marks = new Map<string, string>();
  let marked = 0;
  const unit = (element: Element): string | null => {
    if (!element.attrs.some((a) => a.name === PROTECTED_ATTRIBUTE)) return null;
    const text = nodeText(element).replace(/\s+/g, ' ');
    if (text.trim() === '') return null;
    let mark = marks.get(text);
    if (mark === undefined) {
      if (marks.size > MARK_LAST - MARK_FIRST) return null;
      mark = String.fromCodePoint(MARK_FIRST + marks.size);
      marks.set(text, mark);
    }
    marked++;
    return mark;
  };
  const a = textContentWith(before, unit);
  const b = textContentWith(after, unit);
  // A text holding such code points of its own (never seen, but possible) is compared as it is.
  if (marked === 0 || (a + b).match(MARKS)?.length !== marked) {
    return diffText(textContent(before), textContent(after), context, budget);
  }
  const texts = new Map([...marks].map(([text, mark]) => [mark, text]));
  return diffMarked(a, b, context, budget, (text) => text.replace(MARKS, (m) => texts.get(m) ?? m));
}

/** The code points that stand for protected links while two bodies' texts are compared. */
const MARK_FIRST = 0x100000;
const MARK_LAST = 0x10fffd;
const MARKS = /[\u{100000}-\u{10FFFD}]/gu;

/** `diffText` of texts in which marks stand for units: `expand` gives a text with them replaced. */
function diffMarked(
  before: string,
  after: string,
  context: number,
  budget: DiffBudget,
  expand: (text: string) => string,
): TextDiff | null {
  const words = countWords(expand(before)) + countWords(expand(after));
  let byLine = false;
  let changes =
    words <= budget.wordsMax ? diffWords(before, after, { maxEditLength: budget.editsMax }) : undefined;
  if (!changes) {
    byLine = true;
    changes = diffLines(before, after, { maxEditLength: budget.editsMax });
  }
  if (!changes) return null;
  let added = 0;
  let removed = 0;
  const parts: DiffPart[] = [];
  for (const c of changes) {
    const kind = c.added ? 'added' : c.removed ? 'removed' : 'same';
    if (kind === 'added') added += countWords(expand(c.value));
    if (kind === 'removed') removed += countWords(expand(c.value));
    parts.push({ kind, text: c.value });
  }
  // Shortened before the units are expanded: the context around a change never cuts a link in two.
  const shown = shorten(parts, context).map((p) => (p.kind === 'gap' ? p : { ...p, text: expand(p.text) }));
  const size = shown.reduce((n, p) => n + (p.kind === 'gap' ? 0 : p.text.length), 0);
  return size <= budget.shownMax ? { parts: shown, added, removed, byLine } : null;
}

/** One stretch of a diff as the API and MCP give it: kept (`equal`), added (`insert`) or removed (`delete`). */
export type TextChange = { op: 'equal' | 'insert' | 'delete'; text: string };

const OPS = { same: 'equal', added: 'insert', removed: 'delete' } as const;

/**
 * A word diff as the list of its changes in order: its unchanged, added and removed stretches as
 * `equal`, `insert` and `delete`. Of a whole diff (context ALL_WORDS) the list gives both texts back,
 * but for the spaces between words (jsdiff moves a space to one side of a change): the `equal` and
 * `delete` texts in order are the text before, the `equal` and `insert` texts the text after. A
 * shortened diff's gaps (unchanged words left out) have no text and are not in the list.
 */
export function diffChanges(diff: TextDiff): TextChange[] {
  const changes: TextChange[] = [];
  for (const part of diff.parts) {
    if (part.kind !== 'gap') changes.push({ op: OPS[part.kind], text: part.text });
  }
  return changes;
}

/**
 * Unchanged stretches longer than two contexts keep `context` words after the change before them and
 * before the change after them; the words between become a gap. A diff with no change is kept whole.
 */
export function shorten(parts: readonly DiffPart[], context: number): DiffPart[] {
  if (!parts.some((p) => p.kind === 'added' || p.kind === 'removed')) return [...parts];
  const out: DiffPart[] = [];
  parts.forEach((part, i) => {
    if (part.kind !== 'same') {
      out.push(part);
      return;
    }
    // Tokens alternate word, space, word...: splitting on whitespace with a capture keeps the spaces.
    const tokens = part.text.split(/(\s+)/);
    const words = tokens.filter((t) => t !== '' && !/^\s+$/.test(t)).length;
    const keepHead = i > 0 ? context : 0;
    const keepTail = i < parts.length - 1 ? context : 0;
    if (words <= keepHead + keepTail + 3) {
      out.push(part);
      return;
    }
    const head = takeWords(tokens, keepHead);
    const tail = takeWords([...tokens].reverse(), keepTail).reverse();
    if (keepHead > 0) out.push({ kind: 'same', text: head.join('') });
    out.push({ kind: 'gap', words: words - keepHead - keepTail });
    if (keepTail > 0) out.push({ kind: 'same', text: tail.join('') });
  });
  return out;
}

/** The first tokens up to the end of the `count`th word (whitespace before the first word kept). */
function takeWords(tokens: readonly string[], count: number): string[] {
  const taken: string[] = [];
  let words = 0;
  for (const token of tokens) {
    if (words === count) break;
    if (token !== '' && !/^\s+$/.test(token)) words++;
    taken.push(token);
  }
  return taken;
}
