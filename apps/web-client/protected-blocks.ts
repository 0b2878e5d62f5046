import { Node } from '@tiptap/core';
import type { Node as PmNode } from '@tiptap/pm/model';
import { Plugin, PluginKey } from '@tiptap/pm/state';

/*
 * Protected blocks in the rich editor: every element carrying `data-service-protected` (inserted
 * backlink anchors and internal links) in the body as loaded is one atom, and only those: markup is
 * read as a block only when it is one of the blocks the editor loaded (`loaded`), so pasted, dropped
 * or inserted HTML never makes one (pasted HTML loses its markers before that: paste.ts). A block can
 * be selected, dragged and dropped elsewhere, never edited; a change that would remove one
 * (Backspace, Delete, cut, typing over a selection) is refused by a transaction filter, while a move
 * (removed and inserted in the same transaction) passes. The element is kept as the exact markup it
 * was loaded with, so what is saved is what the server checks against: same tag, attributes, href and
 * text.
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

/** True when `after` holds every protected block `before` holds (as often): nothing was removed. */
export function keepsEvery(before: Map<string, number>, after: Map<string, number>): boolean {
  for (const [key, count] of before) if ((after.get(key) ?? 0) < count) return false;
  return true;
}

const guardKey = new PluginKey('protected-blocks-guard');

/** Whether the document range from..to holds a protected block. */
function holdsProtected(doc: PmNode, from: number, to: number): boolean {
  let found = false;
  const start = Math.max(0, Math.min(from, to));
  const end = Math.min(doc.content.size, Math.max(from, to));
  if (start >= end) return false;
  doc.nodesBetween(start, end, (node) => {
    if (node.type.name === 'protectedBlock') found = true;
    return !found;
  });
  return found;
}

/** The markup of every protected block in a body as the editor parses it (`elementFromString`). */
export function protectedMarkup(body: HTMLElement): Set<string> {
  return new Set([...body.querySelectorAll(PROTECTED_SELECTOR)].map((element) => element.outerHTML));
}

type ProtectedBlockOptions = {
  /** The blocks of the body as loaded (`protectedMarkup`): the only markup read as a block. */
  loaded: ReadonlySet<string>;
};

export const ProtectedBlock = Node.create<ProtectedBlockOptions>({
  name: 'protectedBlock',
  group: 'inline',
  inline: true,
  atom: true,
  selectable: true,
  draggable: true,

  addOptions() {
    return { loaded: new Set<string>() };
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

  renderHTML({ node }) {
    const template = document.createElement('template');
    template.innerHTML = String(node.attrs.html);
    const element = template.content.firstElementChild;
    return element ?? ['span', {}];
  },

  addProseMirrorPlugins() {
    return [
      new Plugin({
        key: guardKey,
        props: {
          // Keys, cuts and typing that would take a block are stopped before they change anything;
          // the transaction filter below is the rule for every other way (paste, drop, commands).
          handleKeyDown(view, event) {
            if (event.key !== 'Backspace' && event.key !== 'Delete') return false;
            const { from, to, empty } = view.state.selection;
            if (!empty) return holdsProtected(view.state.doc, from, to);
            return event.key === 'Backspace'
              ? holdsProtected(view.state.doc, from - 1, from)
              : holdsProtected(view.state.doc, from, from + 1);
          },
          handleTextInput(view, from, to) {
            return holdsProtected(view.state.doc, from, to);
          },
          handleDOMEvents: {
            // A click selects a block (to move it); it never follows the link out of the editor.
            click(_view, event) {
              if ((event.target as Element | null)?.closest?.(PROTECTED_SELECTOR)) event.preventDefault();
              return false;
            },
            cut(view, event) {
              const { from, to } = view.state.selection;
              if (!holdsProtected(view.state.doc, from, to)) return false;
              event.preventDefault();
              return true;
            },
          },
        },
        filterTransaction(transaction, state) {
          if (!transaction.docChanged) return true;
          return keepsEvery(protectedIds(state.doc), protectedIds(transaction.doc));
        },
      }),
    ];
  },
});
