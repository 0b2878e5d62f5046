import type { DefaultTreeAdapterTypes } from 'parse5';
import { defaultTreeAdapter, parseFragment, html as spec } from 'parse5';
import { z } from 'zod';
import { PROTECTED_KINDS } from './allowlist.ts';

/* The parse5 tree of a body, and the few ways the sanitiser, the text and the protected blocks read it. */

export type ChildNode = DefaultTreeAdapterTypes.ChildNode;
export type Element = DefaultTreeAdapterTypes.Element;
export type ParentNode = DefaultTreeAdapterTypes.ParentNode;
export type DocumentFragment = DefaultTreeAdapterTypes.DocumentFragment;
type TextNode = DefaultTreeAdapterTypes.TextNode;

export { PROTECTED_ATTRIBUTE, PROTECTED_ID_ATTRIBUTE } from './allowlist.ts';
/** What a protected block is: an inserted backlink anchor or an internal link. */
export const ProtectedKind = z.enum(PROTECTED_KINDS);
export type ProtectedKind = z.infer<typeof ProtectedKind>;
const KINDS: ReadonlySet<string> = new Set(PROTECTED_KINDS);

export function isProtectedKind(value: string | null | undefined): value is ProtectedKind {
  return typeof value === 'string' && KINDS.has(value);
}

/**
 * Parses a body the way a browser parses it into the page: as a fragment in a `div`'s context
 * (parse5's default context, `template`, would keep table parts a page drops).
 */
export function parseBody(html: string): DocumentFragment {
  const context = defaultTreeAdapter.createElement('div', spec.NS.HTML, []);
  return parseFragment(context, html, {});
}

export function isElement(node: ChildNode): node is Element {
  return 'tagName' in node;
}

export function isText(node: ChildNode): node is TextNode {
  return node.nodeName === '#text';
}

type Visitor = {
  /** Called on every node in document order; return true to visit an element's children. */
  enter: (node: ChildNode) => boolean;
  /** Called on an element after its children, if they were visited. */
  leave?: (element: Element) => void;
};

/** Walks nodes depth-first in document order with an explicit stack (trees may be very deep). */
export function walk(nodes: readonly ChildNode[], visitor: Visitor): void {
  type Frame = { nodes: readonly ChildNode[]; index: number; element: Element | null };
  const stack: Frame[] = [{ nodes, index: 0, element: null }];
  for (let frame = stack.at(-1); frame !== undefined; frame = stack.at(-1)) {
    const node = frame.nodes[frame.index++];
    if (node === undefined) {
      stack.pop();
      if (frame.element !== null) visitor.leave?.(frame.element);
    } else if (visitor.enter(node) && isElement(node)) {
      stack.push({ nodes: node.childNodes, index: 0, element: node });
    }
  }
}

/** The text of a node as the DOM's `textContent` gives it: every descendant text, as it is. */
export function nodeText(node: ChildNode): string {
  let text = '';
  walk([node], {
    enter(child) {
      if (isText(child)) text += child.value;
      return isElement(child);
    },
  });
  return text;
}
