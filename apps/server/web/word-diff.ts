import { countWords } from '../../../domain/html/text.ts';
import {
  CONTEXT_WORDS,
  type DiffPart,
  shorten,
  type TextChange,
  type TextDiff,
} from '../../../domain/html/word-diff.ts';
import type { BodyDiff } from '../../../infra/sanitize-pool.ts';
import { type Html, html } from '../http/html.ts';

/*
 * Word diffs on the revision, restore, staff and stale-editor pages and the editor's Check changes:
 * computed on the worker pool (Runtime.diff: domain/html/word-diff.ts within its budget), rendered
 * here as <ins>/<del> (underlined and struck through, not colour alone). A diff over the budget, or
 * one the busy workers could not take, is a note with links to both versions whole: the person can
 * always read them.
 */

/** A diff as markup: <ins> for added text, <del> for removed, a marked gap for words left out. */
export function renderDiff(diff: TextDiff): Html {
  const last = diff.parts.length - 1;
  return html`<div class="diff">${diff.parts.map((p, i) => {
    if (p.kind === 'added') return html`<ins>${p.text}</ins>`;
    if (p.kind === 'removed') return html`<del>${p.text}</del>`;
    if (p.kind === 'gap') return gapMark(p.words, i, last);
    return p.text;
  })}</div>`;
}

/** Words left out between changes, marked as such, with a space on the sides that have text. */
function gapMark(words: number, i: number, last: number): Html {
  const s = words === 1 ? '' : 's';
  return html`${i > 0 ? ' ' : ''}<span class="diff-gap">[… ${words} unchanged word${s} …]</span>${i < last ? ' ' : ''}`;
}

/**
 * A diff side by side: the text before with its removed words struck through, and the text after
 * with its added words underlined, each under its heading; words left out are marked in both.
 */
export function renderSides(diff: TextDiff, headings: { before: string; after: string }): Html {
  const last = diff.parts.length - 1;
  const side = (shown: 'removed' | 'added') =>
    diff.parts.map((p, i) => {
      if (p.kind === 'gap') return gapMark(p.words, i, last);
      if (p.kind === 'same') return p.text;
      // A change of the other side may carry the line break after it (jsdiff keeps a word's spaces with it).
      if (p.kind !== shown) return p.text.includes('\n') ? '\n' : '';
      return shown === 'added' ? html`<ins>${p.text}</ins>` : html`<del>${p.text}</del>`;
    });
  return html`<div class="diff-sides">
<section aria-labelledby="side-before"><h3 id="side-before" class="change-part">${headings.before}</h3><div class="diff">${side('removed')}</div></section>
<section aria-labelledby="side-after"><h3 id="side-after" class="change-part">${headings.after}</h3><div class="diff">${side('added')}</div></section>
</div>`;
}

const KINDS = { equal: 'same', insert: 'added', delete: 'removed' } as const;

/**
 * A comparison's changes (the whole diff, as the API gives it) as the pages show a diff: long unchanged
 * stretches shortened to CONTEXT_WORDS around each change, the words added and removed counted.
 */
export function shownDiff(changes: readonly TextChange[], byLine: boolean): TextDiff {
  const parts: DiffPart[] = changes.map((c) => ({ kind: KINDS[c.op], text: c.text }));
  const words = (op: TextChange['op']) =>
    changes.filter((c) => c.op === op).reduce((n, c) => n + countWords(c.text), 0);
  return { parts: shorten(parts, CONTEXT_WORDS), added: words('insert'), removed: words('delete'), byLine };
}

/** Where to read each version whole when their diff is not shown. */
export type Versions = { before: { label: string; href: string }; after: { label: string; href: string } };

/** A body diff as markup, or the note that stands for one not shown, linking to both versions. */
export function renderBodyDiff(diff: BodyDiff, versions: Versions): Html {
  if (diff !== null && diff !== 'busy') {
    return html`${diff.byLine ? html`<p class="muted">Compared line by line (too long or too many changes for words).</p>` : ''}${renderDiff(diff)}`;
  }
  const why =
    diff === 'busy'
      ? 'The server is comparing other versions just now; reload this page in a moment to see the changes word by word.'
      : 'These two versions are too long or too different to show their changes here.';
  return html`<p class="diff-fallback">${why} Read each version whole: <a href="${versions.before.href}">${versions.before.label}</a> and <a href="${versions.after.href}">${versions.after.label}</a>.</p>`;
}

/** What the markup means, said in words (the marks are underline and strike-through, not colour alone). */
export const DIFF_LEGEND: Html = html`<p class="diff-legend muted">Added words are <ins>underlined</ins>, removed words <del>struck through</del>.</p>`;
