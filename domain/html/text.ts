import type { DefaultTreeAdapterTypes } from 'parse5';
import { isElement, isText, parseBody } from './sanitize.ts';

type ChildNode = DefaultTreeAdapterTypes.ChildNode;
type Element = DefaultTreeAdapterTypes.Element;

/** Elements whose content a reader never sees. */
const INVISIBLE: ReadonlySet<string> = new Set([
  ...['script', 'style', 'template', 'noscript', 'noembed', 'noframes', 'iframe', 'object'],
  ...['head', 'title', 'meta', 'link', 'base'],
]);

/** Elements that start a new line of text (and so separate words). */
const BLOCKS: ReadonlySet<string> = new Set([
  ...['p', 'div', 'section', 'article', 'aside', 'header', 'footer', 'nav', 'main', 'address'],
  ...['blockquote', 'pre', 'ul', 'ol', 'li', 'dl', 'dt', 'dd', 'figure', 'figcaption', 'hr', 'br'],
  ...['table', 'thead', 'tbody', 'tfoot', 'tr', 'td', 'th', 'caption'],
  ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'details', 'summary', 'form', 'fieldset', 'legend'],
]);

/**
 * A word: a run of Unicode letters, marks and digits, which an apostrophe or hyphen inside it
 * does not split (`don't`, `e-mail`), nor a point or comma between digits (`3.14`, `1,000`).
 */
const WORD = /[\p{L}\p{M}\p{N}]+(?:(?:['\u2019\u2010-]|(?<=\p{N})[.,](?=\p{N}))[\p{L}\p{M}\p{N}]+)*/gu;

/**
 * The visible text of a body: whitespace collapsed as a browser renders it (kept in `pre`), one
 * line per block, no script or style content.
 */
export function textContent(html: string): string {
  let text = '';
  let preDepth = 0;
  walk(parseBody(html).childNodes, {
    enter(node) {
      if (isText(node)) {
        text += preDepth > 0 ? node.value.replace(/[^\S\n]+/g, ' ') : node.value.replace(/\s+/g, ' ');
        return false;
      }
      if (!isElement(node) || INVISIBLE.has(node.tagName)) return false;
      if (node.tagName === 'pre') preDepth++;
      if (BLOCKS.has(node.tagName)) text += '\n';
      return true;
    },
    leave(element) {
      if (element.tagName === 'pre') preDepth--;
      if (BLOCKS.has(element.tagName)) text += '\n';
    },
  });
  return text
    .split('\n')
    .map((line) => line.replace(/ +/g, ' ').trim())
    .filter((line) => line !== '')
    .join('\n');
}

/** The number of words in the visible text of a body. */
export function wordCount(html: string): number {
  return textContent(html).match(WORD)?.length ?? 0;
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

export type Visitor = {
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
