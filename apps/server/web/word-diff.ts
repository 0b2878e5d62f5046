import type { TextDiff } from '../../../domain/html/word-diff.ts';
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
    if (p.kind === 'gap') {
      const s = p.words === 1 ? '' : 's';
      return html`${i > 0 ? ' ' : ''}<span class="diff-gap">[… ${p.words} unchanged word${s} …]</span>${i < last ? ' ' : ''}`;
    }
    return p.text;
  })}</div>`;
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
