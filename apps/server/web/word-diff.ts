import { diffLines, diffWords } from 'diff';
import { countWords, textContent } from '../../../domain/html/text.ts';
import { type Html, html } from './html.ts';

/*
 * Word diffs of an article's text for the revision and restore pages: jsdiff's `diffWords` on the
 * visible text of two bodies (never their HTML), long unchanged stretches shortened to a few words of
 * context, rendered as <ins>/<del> (underlined and struck through, not colour alone).
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
  /** True when the texts were too far apart to compare word by word in time: compared by line. */
  byLine: boolean;
};

/** How long one comparison may take before falling back to lines (then to none). */
const TIMEOUT_MS = 1500;
/** Words of unchanged text kept on each side of a change. */
export const CONTEXT_WORDS = 12;

/** The word diff of two plain texts, or null when even a line diff takes too long. */
export function diffText(before: string, after: string, context: number = CONTEXT_WORDS): TextDiff | null {
  let byLine = false;
  let changes = diffWords(before, after, { timeout: TIMEOUT_MS });
  if (!changes) {
    byLine = true;
    changes = diffLines(before, after, { timeout: TIMEOUT_MS });
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
  return { parts: shorten(parts, context), added, removed, byLine };
}

/** The word diff of two article bodies (stored HTML), on their visible text. */
export function diffBodies(before: string, after: string): TextDiff | null {
  return diffText(textContent(before), textContent(after));
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

/** A diff as markup: <ins> for added text, <del> for removed, a marked gap for words left out. */
export function renderDiff(diff: TextDiff): Html {
  const last = diff.parts.length - 1;
  return html`<div class="diff">${diff.parts.map((p, i) => {
    if (p.kind === 'added') return html`<ins>${p.text}</ins>`;
    if (p.kind === 'removed') return html`<del>${p.text}</del>`;
    if (p.kind === 'gap') {
      const s = p.words === 1 ? '' : 's';
      return html`${i > 0 ? ' ' : ''}<span class="diff-gap">[… ${p.words} unchanged word${s} …]</span>${i < last ? ' ' : ''}`;
    }
    return p.text;
  })}</div>`;
}

/** What the markup means, said in words (the marks are underline and strike-through, not colour alone). */
export const DIFF_LEGEND: Html = html`<p class="diff-legend muted">Added words are <ins>underlined</ins>, removed words <del>struck through</del>.</p>`;
