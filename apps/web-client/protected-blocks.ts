import { Node } from '@tiptap/core';
import type { Node as PmNode } from '@tiptap/pm/model';
import { type EditorState, Plugin, PluginKey, TextSelection, type Transaction } from '@tiptap/pm/state';

/*
 * Protected blocks in the rich editor: every element carrying `data-service-protected` (inserted
 * backlink anchors and internal links) in the body as loaded is one atom, and only those: markup is
 * read as a block only when it is one of the blocks the editor loaded (`loaded`), so pasted, dropped
 * or inserted HTML never makes one (pasted HTML loses its markers before that: paste.ts), and a copy
 * made inside the editor (a drag with the copy key) becomes an ordinary link at once: only as many
 * blocks of each as the body had stay blocks. A block can be selected, dragged and dropped elsewhere,
 * never edited. Nobody is trapped and nothing is refused silently:
 * - Backspace, Delete, cut or typing over a selection that holds blocks removes everything else in
 *   it and keeps the blocks, a space between them and the words around them where there was one
 *   (`deleteAround`), and says so;
 * - a key, cut or typing that would remove only a block is refused, and says why, naming the link;
 * - any other change that would remove a block (a paste or drop over it, a command) is refused by a
 *   transaction filter, and says so; a move (removed and inserted in the same transaction) passes.
 * What is said goes to `say` (the editor shows it and a live region reads it). The element is kept
 * as the exact markup it was loaded with, so what is saved is what the server checks against: same
 * tag, attributes, href and text.
 */

export const PROTECTED_SELECTOR = '[data-service-protected]';

/** The ids of the protected blocks in a document, each as many times as it occurs. */
export function protectedIds(doc: PmNode): Map<string, number> {
  const ids = new Map<string, number>();
  doc.descendants((node) => {
    if (node.type.name === 'protectedBlock') {
      const key = String(node.attrs.html);
      ids.set(key, (ids.get(key) ?? 0) + 1);
    }
    return true;
  });
  return ids;
}

/**
 * The markup of every protected block in a body as the editor parses it (`elementFromString`), each
 * with how many times it occurs.
 */
export function protectedMarkup(body: HTMLElement): Map<string, number> {
  const counts = new Map<string, number>();
  for (const element of body.querySelectorAll(PROTECTED_SELECTOR)) {
    counts.set(element.outerHTML, (counts.get(element.outerHTML) ?? 0) + 1);
  }
  return counts;
}

/** Asks the guard to make any block beyond the body's own count an ordinary link now (on load). */
export const NORMALIZE = 'protected-blocks-normalize';

type Found = { node: PmNode; pos: number };

/** The protected blocks between two positions of a document, in order. */
export function blocksIn(doc: PmNode, from: number, to: number): Found[] {
  const start = Math.max(0, Math.min(from, to));
  const end = Math.min(doc.content.size, Math.max(from, to));
  const found: Found[] = [];
  if (start >= end) return found;
  doc.nodesBetween(start, end, (node, pos) => {
    if (node.type.name === 'protectedBlock') found.push({ node, pos });
    return true;
  });
  return found;
}

/** A protected block's link as a person reads it: its text and address. */
export function linkOf(node: PmNode): { text: string; href: string } {
  const template = document.createElement('template');
  template.innerHTML = String(node.attrs.html);
  const element = template.content.firstElementChild;
  const href = element?.getAttribute('href') ?? element?.querySelector('a[href]')?.getAttribute('href') ?? '';
  return { text: (element?.textContent ?? '').trim(), href };
}

/** “text” (address), for each block. */
export function named(nodes: readonly PmNode[]): string {
  return nodes
    .map(linkOf)
    .map(({ text, href }) => `“${text}” (${href})`)
    .join(', ');
}

/** Why a change was refused, naming the blocks it would have taken: `lead` says what was refused. */
export function refusal(nodes: readonly PmNode[], lead = 'Not deleted'): string {
  const several = nodes.length > 1;
  return `${lead}: ${named(nodes)} ${several ? 'are protected links' : 'is a protected link'}, placed by the service, and must stay. You may drag ${several ? 'them' : 'it'} elsewhere in the text.`;
}

/**
 * What stands right before (`side` -1) or after (1) a position within its line of text: a word's
 * character or a block (`word`), whitespace, or nothing (the line's edge, a line break).
 */
function besideIn(doc: PmNode, pos: number, side: -1 | 1): 'word' | 'space' | 'edge' {
  const $pos = doc.resolve(pos);
  if (!$pos.parent.inlineContent) return 'edge';
  const node = side < 0 ? $pos.nodeBefore : $pos.nodeAfter;
  if (!node) return 'edge';
  if (node.isText) {
    const text = node.text ?? '';
    return /\s/.test((side < 0 ? text.at(-1) : text.at(0)) ?? '') ? 'space' : 'word';
  }
  return node.type.name === 'protectedBlock' ? 'word' : 'edge';
}

/**
 * A transaction that deletes everything between `from` and `to` but the protected blocks, and the
 * blocks kept; no transaction when there is nothing else to delete. What it keeps never joins words
 * that were apart: a stretch deleted between two words (a block, or text kept around the selection)
 * that held whitespace or a line's end is left as one space, so the blocks kept from several
 * paragraphs stand in a line, a space between each. `typed`: the text that will take the selection's
 * place (typing over it), before the first block.
 */
function deleteAround(
  state: EditorState,
  from: number,
  to: number,
  typed = '',
): { tr: Transaction | null; kept: PmNode[] } {
  const blocks = blocksIn(state.doc, from, to);
  const tr = state.tr;
  const start = Math.min(from, to);
  /** Deletes from `a` to `b` (positions of the document as it was), or leaves a space there. */
  const remove = (a: number, b: number, before: 'word' | 'space' | 'edge'): void => {
    const apart = /\s/.test(state.doc.textBetween(a, b, '\n', '\n'));
    if (apart && before === 'word' && besideIn(state.doc, b, 1) === 'word') tr.insertText(' ', a, b);
    else tr.delete(a, b);
  };
  let end = Math.max(from, to);
  // From the end backwards: each deletion leaves the positions before it as they were.
  for (const block of [...blocks].reverse()) {
    const after = block.pos + block.node.nodeSize;
    if (after < end) remove(after, end, 'word');
    end = block.pos;
  }
  if (start < end) {
    const before = typed === '' ? besideIn(state.doc, start, -1) : /\s$/.test(typed) ? 'space' : 'word';
    remove(start, end, before);
  }
  return { tr: tr.docChanged ? tr : null, kept: blocks.map((b) => b.node) };
}

type ProtectedBlockOptions = {
  /**
   * The blocks of the body as loaded (`protectedMarkup`), and how many of each: the only markup read
   * as a block, and the blocks the guard keeps.
   */
  loaded: ReadonlyMap<string, number>;
  /** Tells the person what happened to what they asked: a refusal and why, or what a deletion kept. */
  say: (message: string) => void;
};

const guardKey = new PluginKey<ReadonlyMap<string, number>>('protected-blocks-guard');

export const ProtectedBlock = Node.create<ProtectedBlockOptions>({
  name: 'protectedBlock',
  group: 'inline',
  inline: true,
  atom: true,
  selectable: true,
  draggable: true,

  addOptions() {
    return { loaded: new Map<string, number>(), say: () => {} };
  },

  addAttributes() {
    return {
      html: {
        default: '',
        parseHTML: (element: HTMLElement) => element.outerHTML,
        rendered: false,
      },
    };
  },

  parseHTML() {
    const { loaded } = this.options;
    // Other markup with the marker is left to the other rules (a link, a paragraph...).
    return [
      {
        tag: PROTECTED_SELECTOR,
        priority: 1000,
        getAttrs: (element: HTMLElement) => (loaded.has(element.outerHTML) ? null : false),
      },
    ];
  },

  // Its text, as the clipboard's plain text and `getText` give it.
  renderText({ node }) {
    return linkOf(node).text;
  },

  renderHTML({ node }) {
    const template = document.createElement('template');
    template.innerHTML = String(node.attrs.html);
    const element = template.content.firstElementChild;
    return element ?? ['span', {}];
  },

  addProseMirrorPlugins() {
    const { say, loaded: source } = this.options;
    /** Deletes a selection around its blocks and says so, or refuses and says why. Always handled. */
    const removeSelection = (
      state: EditorState,
      dispatch: (tr: Transaction) => void,
      from: number,
      to: number,
      insert = '',
    ): true => {
      const { tr, kept } = deleteAround(state, from, to, insert);
      if (!tr) {
        say(refusal(kept));
        return true;
      }
      // The cursor where the selection began (a selection of everything would stay one; before a
      // space left there), then the typing.
      tr.setSelection(TextSelection.near(tr.doc.resolve(tr.mapping.map(Math.min(from, to), -1))));
      if (insert !== '') tr.insertText(insert);
      dispatch(tr.scrollIntoView());
      say(
        `Deleted the selection but its protected ${kept.length === 1 ? 'link' : `links (${kept.length})`}, which must stay: ${named(kept)}.`,
      );
      return true;
    };
    return [
      new Plugin({
        key: guardKey,
        // The blocks of the body as loaded, each as many times as it occurs: what the guard keeps.
        state: { init: () => source, apply: (_tr, loaded) => loaded },
        props: {
          handleKeyDown(view, event) {
            if (event.key !== 'Backspace' && event.key !== 'Delete') return false;
            const { from, to, empty } = view.state.selection;
            if (!empty) {
              if (blocksIn(view.state.doc, from, to).length === 0) return false;
              return removeSelection(view.state, view.dispatch, from, to);
            }
            const next =
              event.key === 'Backspace'
                ? blocksIn(view.state.doc, from - 1, from)
                : blocksIn(view.state.doc, from, from + 1);
            if (next.length === 0) return false;
            say(refusal(next.map((b) => b.node)));
            return true;
          },
          handleTextInput(view, from, to, text) {
            if (blocksIn(view.state.doc, from, to).length === 0) return false;
            return removeSelection(view.state, view.dispatch, from, to, text);
          },
          handleDOMEvents: {
            // A click selects a block (to move it); it never follows the link out of the editor.
            click(_view, event) {
              if ((event.target as Element | null)?.closest?.(PROTECTED_SELECTOR)) event.preventDefault();
              return false;
            },
            cut(view, event) {
              const { from, to } = view.state.selection;
              if (blocksIn(view.state.doc, from, to).length === 0) return false;
              // The selection goes to the clipboard whole (a copy of a block pastes as an ordinary link).
              const { dom, text } = view.serializeForClipboard(view.state.selection.content());
              event.clipboardData?.setData('text/html', dom.innerHTML);
              event.clipboardData?.setData('text/plain', text);
              event.preventDefault();
              return removeSelection(view.state, view.dispatch, from, to);
            },
          },
        },
        filterTransaction(transaction, state) {
          if (!transaction.docChanged) return true;
          const loaded = guardKey.getState(state) ?? new Map<string, number>();
          const before = protectedIds(state.doc);
          const after = protectedIds(transaction.doc);
          const lost: string[] = [];
          for (const [key, count] of before) {
            if ((after.get(key) ?? 0) < Math.min(count, loaded.get(key) ?? 0)) lost.push(key);
          }
          if (lost.length === 0) return true;
          const nodes: PmNode[] = [];
          state.doc.descendants((node) => {
            if (node.type.name === 'protectedBlock' && lost.includes(String(node.attrs.html)))
              nodes.push(node);
            return true;
          });
          say(refusal(nodes, 'Not changed'));
          return false;
        },
        // A block beyond the body's own count (a copy made by dragging with the copy key) is an
        // ordinary link: the copy, not the one that was there.
        appendTransaction(transactions, oldState, newState) {
          if (!transactions.some((t) => t.docChanged || t.getMeta(NORMALIZE))) return null;
          const loaded = guardKey.getState(newState) ?? new Map<string, number>();
          const counts = protectedIds(newState.doc);
          if (![...counts].some(([key, count]) => count > (loaded.get(key) ?? 0))) return null;
          const kept = new Set<number>();
          oldState.doc.descendants((node, pos) => {
            if (node.type.name !== 'protectedBlock') return true;
            let at: number | null = pos;
            for (const t of transactions) {
              if (at === null) break;
              const mapped = t.mapping.mapResult(at, 1);
              at = mapped.deleted ? null : mapped.pos;
            }
            if (at !== null && newState.doc.nodeAt(at)?.attrs.html === node.attrs.html) kept.add(at);
            return true;
          });
          const byKey = new Map<string, Found[]>();
          newState.doc.descendants((node, pos) => {
            if (node.type.name !== 'protectedBlock') return true;
            const key = String(node.attrs.html);
            byKey.set(key, [...(byKey.get(key) ?? []), { node, pos }]);
            return true;
          });
          const copies: Found[] = [];
          for (const [key, found] of byKey) {
            const extra = found.length - (loaded.get(key) ?? 0);
            if (extra <= 0) continue;
            // The new ones first, the later ones first.
            const order = [...found].sort(
              (a, b) => Number(kept.has(a.pos)) - Number(kept.has(b.pos)) || b.pos - a.pos,
            );
            copies.push(...order.slice(0, extra));
          }
          const tr = newState.tr;
          const link = newState.schema.marks.link;
          for (const { node, pos } of copies.sort((a, b) => b.pos - a.pos)) {
            const { text, href } = linkOf(node);
            const marks = link && href ? [...node.marks, link.create({ href })] : node.marks;
            if (text === '') tr.delete(pos, pos + node.nodeSize);
            else tr.replaceWith(pos, pos + node.nodeSize, newState.schema.text(text, marks));
          }
          return tr;
        },
      }),
    ];
  },
});
