import { Node } from '@tiptap/core';
import type { Node as PmNode } from '@tiptap/pm/model';
import { Plugin, PluginKey } from '@tiptap/pm/state';

/*
 * Protected blocks in the rich editor: every element carrying `data-service-protected` (inserted
 * backlink anchors and internal links) is one atom. It can be selected, dragged and dropped elsewhere,
 * never edited; a change that would remove one (Backspace, Delete, cut, typing over a selection) is
 * refused by a transaction filter, while a move (removed and inserted in the same transaction) passes.
 * The element is kept as the exact markup it was loaded with, so what is saved is what the server
 * checks against: same tag, attributes, href and text.
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

export const ProtectedBlock = Node.create({
  name: 'protectedBlock',
  group: 'inline',
  inline: true,
  atom: true,
  selectable: true,
  draggable: true,

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
    return [{ tag: PROTECTED_SELECTOR, priority: 1000 }];
  },

  renderHTML({ node }) {
    const template = document.createElement('template');
    template.innerHTML = String(node.attrs.html);
    const element = template.content.firstElementChild;
    return element ?? ['span', {}];
  },

  addNodeView() {
    return ({ node }) => {
      const template = document.createElement('template');
      template.innerHTML = String(node.attrs.html);
      const dom =
        (template.content.firstElementChild as HTMLElement | null) ?? document.createElement('span');
      dom.classList.add('protected-block');
      dom.setAttribute('contenteditable', 'false');
      dom.setAttribute('title', 'Protected link: it can be moved, not edited or removed');
      return { dom };
    };
  },

  addProseMirrorPlugins() {
    return [
      new Plugin({
        key: guardKey,
        filterTransaction(transaction, state) {
          if (!transaction.docChanged) return true;
          return keepsEvery(protectedIds(state.doc), protectedIds(transaction.doc));
        },
      }),
    ];
  },
});
