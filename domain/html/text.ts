import { type ChildNode, type Element, isElement, isText, parseBody, walk } from './tree.ts';

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
  return textOf(parseBody(html).childNodes);
}

/**
 * `textContent` with some elements as one piece each: `unit(element)` gives the text that stands for
 * the element and all it holds (the word diff's protected links, one token each), or null to read its
 * content as usual.
 */
export function textContentWith(html: string, unit: (element: Element) => string | null): string {
  return textOf(parseBody(html).childNodes, unit);
}

/** `textContent` of nodes already parsed. */
function textOf(nodes: readonly ChildNode[], unit?: (element: Element) => string | null): string {
  let text = '';
  let preDepth = 0;
  walk(nodes, {
    enter(node) {
      if (isText(node)) {
        text += preDepth > 0 ? node.value.replace(/[^\S\n]+/g, ' ') : node.value.replace(/\s+/g, ' ');
        return false;
      }
      if (!isElement(node) || INVISIBLE.has(node.tagName)) return false;
      const whole = unit?.(node) ?? null;
      if (whole !== null) {
        text += BLOCKS.has(node.tagName) ? `\n${whole}\n` : whole;
        return false;
      }
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

/** The number of words in a text (as `textContent` gives it). */
export function countWords(text: string): number {
  return text.match(WORD)?.length ?? 0;
}

/**
 * `countWords(textOf(nodes))`, without laying the text out: whitespace never joins or splits a
 * word, so the raw text of visible nodes with a line break at each block boundary has the same words.
 */
export function wordsOf(nodes: readonly ChildNode[]): number {
  return countWords(rawText(nodes));
}

/** The raw text of visible nodes, with a line break at each block boundary (a line break ends a word). */
export function rawText(nodes: readonly ChildNode[]): string {
  const parts: string[] = [];
  walk(nodes, {
    enter(node) {
      if (isText(node)) {
        parts.push(node.value);
        return false;
      }
      if (!isElement(node) || INVISIBLE.has(node.tagName)) return false;
      if (BLOCKS.has(node.tagName)) parts.push('\n');
      return true;
    },
    leave(element) {
      if (BLOCKS.has(element.tagName)) parts.push('\n');
    },
  });
  return parts.join('');
}

/** Whether a node's raw text stands between line breaks (a block): no word runs into or out of it. */
export function isBlock(node: ChildNode): boolean {
  return isElement(node) && BLOCKS.has(node.tagName);
}
