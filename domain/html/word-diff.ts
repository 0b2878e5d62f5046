import { diffLines, diffWords } from 'diff';
import { countWords, textContent } from './text.ts';

/*
 * Word diffs of an article's text (the revision, restore, staff and stale-editor pages, an edit's
 * preview in every face: `diffChanges` gives the API's and the tools' `{op, text}` steps): jsdiff's
 * `diffWords` on the visible text of two bodies (never their HTML), long unchanged stretches shortened
 * to a few words of context. The work is bounded by size, not by a clock: texts of more than
 * DIFF_WORDS_MAX words, or a word diff of more than DIFF_EDITS_MAX edits, are compared by line
 * instead; a line diff of more than DIFF_EDITS_MAX edits, or a diff that would show more than
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
  const words = countWords(before) + countWords(after);
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
    if (kind === 'added') added += countWords(c.value);
    if (kind === 'removed') removed += countWords(c.value);
    parts.push({ kind, text: c.value });
  }
  const shown = shorten(parts, context);
  const size = shown.reduce((n, p) => n + (p.kind === 'gap' ? 0 : p.text.length), 0);
  return size <= budget.shownMax ? { parts: shown, added, removed, byLine } : null;
}

/** The word diff of two article bodies (stored HTML), on their visible text. */
export function diffBodies(before: string, after: string, budget: DiffBudget = BUDGET): TextDiff | null {
  return diffText(textContent(before), textContent(after), CONTEXT_WORDS, budget);
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

/** One step of a word diff as the API and the tools answer it (`{op, text}`, as in many diff formats). */
export type DiffChange = { op: 'equal' | 'insert' | 'delete'; text: string };

/** The text that stands for unchanged words a shortened diff leaves out (a gap): one `equal` step. */
export const DIFF_GAP_TEXT = '…';

/**
 * A word diff as `{op, text}` steps, in order: same text `equal`, added `insert`, removed `delete`;
 * each run of unchanged words the diff left out (a gap) is one `equal` step whose text is
 * DIFF_GAP_TEXT. The one mapping of the wire's diffs (an edit's preview, the comparison of revisions).
 */
export function diffChanges(diff: TextDiff): DiffChange[] {
  return diff.parts.map((part): DiffChange => {
    switch (part.kind) {
      case 'same':
        return { op: 'equal', text: part.text };
      case 'added':
        return { op: 'insert', text: part.text };
      case 'removed':
        return { op: 'delete', text: part.text };
      case 'gap':
        return { op: 'equal', text: DIFF_GAP_TEXT };
      default: {
        const unknown: never = part;
        throw new Error(`unknown diff part ${JSON.stringify(unknown)}`);
      }
    }
  });
}
