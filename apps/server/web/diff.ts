import { diffWords } from 'diff';
import { textContent } from '../../../domain/html/text.ts';
import { type Html, html } from './html.ts';

/*
 * Word diffs of article text for the pages (jsdiff's `diffWords`): what a reader would see changed,
 * not the HTML. Long unchanged stretches are shortened to a few words of context on each side.
 */

/** A run of words the same on both sides, only in the later text, or only in the earlier one. */
export type WordChange = { readonly kind: 'same' | 'added' | 'removed'; readonly text: string };

/** How long a diff may take before the page says the texts differ too much to show (milliseconds). */
const DIFF_TIMEOUT_MS = 1500;

/**
 * The word changes from `before` to `after`, or null when computing them takes longer than the
 * timeout (very large, very different texts). Runs in chunks that yield to other requests.
 */
export function wordChanges(
  before: string,
  after: string,
  timeoutMs: number = DIFF_TIMEOUT_MS,
): Promise<WordChange[] | null> {
  return new Promise((resolve) => {
    diffWords(before, after, {
      timeout: timeoutMs,
      callback: (parts) => {
        resolve(
          parts
            ? parts.map((p) => ({ kind: p.added ? 'added' : p.removed ? 'removed' : 'same', text: p.value }))
            : null,
        );
      },
    });
  });
}

/** The word changes between the visible text of two HTML bodies. */
export function bodyTextChanges(beforeHtml: string, afterHtml: string): Promise<WordChange[] | null> {
  return wordChanges(textContent(beforeHtml), textContent(afterHtml));
}

/** Words and the whitespace between them, whitespace kept as its own token. */
const TOKENS = /\s+|\S+/g;

/**
 * An unchanged run shortened to its first `head` and last `tail` words, with a marked ellipsis in
 * between when words were left out.
 */
export function elide(text: string, head: number, tail: number): Html {
  const tokens = text.match(TOKENS) ?? [];
  const words = tokens.filter((t) => !/^\s/.test(t)).length;
  if (words <= head + tail + 3) return html`${text}`;
  let start = 0;
  for (let seen = 0; start < tokens.length && seen < head; start++) {
    if (!/^\s/.test(tokens[start] ?? '')) seen++;
  }
  let end = tokens.length;
  for (let seen = 0; end > 0 && seen < tail; end--) {
    if (!/^\s/.test(tokens[end - 1] ?? '')) seen++;
  }
  const first = tokens.slice(0, start).join('');
  const last = tokens.slice(end).join('');
  // The whitespace either side of the ellipsis: a line break where the text had one.
  const gap = (token: string | undefined, keep: boolean) =>
    !keep || token === undefined || !/^\s/.test(token) ? '' : token.includes('\n') ? '\n' : ' ';
  return html`${first}${gap(tokens[start], head > 0)}<span class="elided" title="unchanged text left out">…</span>${gap(tokens[end - 1], tail > 0)}${last}`;
}

/**
 * The changes as marked-up text: added words in `<ins>`, removed ones in `<del>`, unchanged runs
 * with `context` words either side of a change. Newlines (one per block of the body) are kept.
 */
export function renderWordChanges(changes: readonly WordChange[], context = 12): Html {
  if (!changes.some((c) => c.kind !== 'same')) {
    return html`<p class="muted diff-none">The text is the same.</p>`;
  }
  const parts = changes.map((c, i) => {
    if (c.kind === 'added') return html`<ins>${c.text}</ins>`;
    if (c.kind === 'removed') return html`<del>${c.text}</del>`;
    return elide(c.text, i > 0 ? context : 0, i < changes.length - 1 ? context : 0);
  });
  return html`<div class="diff">${parts}</div>`;
}
