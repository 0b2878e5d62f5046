import { defaultTreeAdapter, serialize, html as spec } from 'parse5';
import { protectedBlockList } from './protected.ts';
import { isBlock } from './text.ts';
import {
  type ChildNode,
  type Element,
  isElement,
  isText,
  nodeText,
  type ParentNode,
  PROTECTED_ATTRIBUTE,
  PROTECTED_ID_ATTRIBUTE,
  parseBody,
  walk,
} from './tree.ts';

/**
 * Puts the protected blocks of `current` back into `draft`, keeping the rest of the draft: the
 * repair a person is offered when an edit is refused because it removed, changed or added protected
 * blocks (`checkProtectedBlocks`). In the draft:
 * - a block the same as one of `current` (the same form, `compareProtectedForms`) stays where it is;
 * - a block with the id of one of `current` that no other block of the draft matches is replaced, in
 *   place, by that block as it was;
 * - any other element claiming to be a block (a copy, a forgery) loses its markers: an ordinary
 *   element, its text and link kept;
 * - a link of `current` still missing goes back where the text around it still is: after the words
 *   that came before it in its paragraph in `current`, or else before the words that followed it, when
 *   those are found once in the draft's text and not inside a link (where the link's own words were
 *   left, the link itself takes their place); otherwise (and a missing block that is not a link within
 *   a line) at the end, in a paragraph of its own, where a person sees it and can move it. A link put
 *   back in the text keeps the spacing it had in `current`: a space (or its paragraph's edge) before
 *   (after) it there means whitespace before (after) it here, added when the draft has none, so that
 *   it never joins the words around it; the draft's own whitespace at that place is kept.
 * The result, sanitised, passes `checkProtectedBlocks(current, …)`.
 */
export function restoreProtectedBlocks(current: string, draft: string): string {
  const currentTree = parseBody(current);
  const originals = outermostBlocks(currentTree.childNodes);
  /** The originals not yet found in the draft. */
  const unused = [...originals];
  const take = (found: (block: OriginalBlock) => boolean): OriginalBlock | undefined => {
    const index = unused.findIndex(found);
    return index < 0 ? undefined : unused.splice(index, 1)[0];
  };
  const tree = parseBody(draft);
  const unmatched: { element: Element; id: string }[] = [];
  walk(tree.childNodes, {
    enter(node) {
      if (!isElement(node)) return false;
      if (!isMarked(node)) return true;
      const { id, form } = formOf(node);
      if (take((block) => block.form === form)) return false;
      unmatched.push({ element: node, id });
      return true;
    },
  });
  for (const { element, id } of unmatched) {
    const original = take((block) => block.id === id);
    if (original) {
      replace(element, cloneElement(original.element));
    } else {
      element.attrs = element.attrs.filter(
        (a) => a.name !== PROTECTED_ATTRIBUTE && a.name !== PROTECTED_ID_ATTRIBUTE,
      );
    }
  }
  for (const { element } of unused) {
    const block = cloneElement(element);
    if (!isBlock(block) && putInPlace(tree, block, anchorsOf(currentTree, element))) continue;
    if (isBlock(block)) {
      append(tree, block);
    } else {
      const paragraph = defaultTreeAdapter.createElement('p', spec.NS.HTML, []);
      append(paragraph, block);
      append(tree, paragraph);
    }
  }
  return serialize(tree);
}

type OriginalBlock = { element: Element; id: string; form: string };

/** How much of the text before (after) a missing block is looked for in the draft, longest first. */
const ANCHOR_LENGTHS = [40, 20, 10];
/** Fewer letters than this (spaces aside) say too little to find a place by. */
const ANCHOR_MIN = 4;

type TextNode = Extract<ChildNode, { nodeName: '#text' }>;
type Placed = { node: TextNode; start: number; inLink: boolean };

/** The text of a tree in document order, and each text node with where its text starts. */
function textsOf(tree: ParentNode): { text: string; nodes: Placed[] } {
  let text = '';
  const nodes: Placed[] = [];
  let links = 0;
  walk(tree.childNodes, {
    enter(node) {
      if (isText(node)) {
        nodes.push({ node, start: text.length, inLink: links > 0 });
        text += node.value;
        return false;
      }
      if (!isElement(node)) return false;
      if (node.tagName === 'a' || isMarked(node)) links += 1;
      return true;
    },
    leave(element) {
      if (element.tagName === 'a' || isMarked(element)) links -= 1;
    },
  });
  return { text, nodes };
}

/** The text before and after `block`, an element of `tree`, within the paragraph (heading, item…) it is in. */
function anchorsOf(tree: ParentNode, block: Element): { before: string; after: string } {
  let text = '';
  let start = -1;
  let end = -1;
  let from = 0;
  let to = -1;
  /** A paragraph's edge: the last one before the block, the first one after it. */
  const edge = (): void => {
    if (start < 0) from = text.length;
    else if (end >= 0 && to < 0) to = text.length;
  };
  walk(tree.childNodes, {
    enter(node) {
      if (node === block) start = text.length;
      else if (isBlock(node)) edge();
      if (isText(node)) text += node.value;
      return isElement(node);
    },
    leave(element) {
      if (element === block) end = text.length;
      else if (isBlock(element)) edge();
    },
  });
  return { before: text.slice(from, start), after: text.slice(end, to < 0 ? text.length : to) };
}

/** Puts `block` into `tree` after `before` or before `after`, where one of them is found once; false if neither. */
function putInPlace(tree: ParentNode, block: Element, anchors: { before: string; after: string }): boolean {
  const { text, nodes } = textsOf(tree);
  const words = nodeText(block);
  // What stood next to the link in `current`, in its paragraph (nothing: the paragraph's edge).
  const was = { before: anchors.before.at(-1), after: anchors.after.at(0) };
  /** Puts the block at `offset` of a placed node's text (as it is now), spaced as it was. */
  const place = (placed: Placed, offset: number, edges: Edges): void =>
    insertSpaced(placed.node, offset, { element: block, words }, was, edges);
  /** The text node, outside any link, where `test(start, end)` holds of its text's place. */
  const node = (test: (start: number, end: number) => boolean): Placed | undefined =>
    nodes.find((placed) => !placed.inLink && test(placed.start, placed.start + placed.node.value.length));
  const at = (anchor: string, side: 'before' | 'after'): boolean => {
    if (anchor.replace(/\s/g, '').length < ANCHOR_MIN) return false;
    const found = text.indexOf(anchor);
    if (found < 0 || text.indexOf(anchor, found + 1) >= 0) return false;
    const position = side === 'before' ? found + anchor.length : found;
    // The link's own words left where it was (the link taken off them): the link takes their place.
    // (The whitespace between them and the anchor may have grown or shrunk.)
    const gap =
      side === 'before'
        ? (/^\s*/.exec(text.slice(position))?.[0].length ?? 0)
        : (/\s*$/.exec(text.slice(0, position))?.[0].length ?? 0);
    const [from, to] =
      side === 'before'
        ? [position + gap, position + gap + words.length]
        : [position - gap - words.length, position - gap];
    // Whole words only: not the first letters of a longer word.
    const whole = (outside: string | undefined, edge: string | undefined): boolean =>
      !(outside && edge && LETTER.test(outside) && LETTER.test(edge));
    const own =
      words.trim() !== '' &&
      text.slice(from, to) === words &&
      whole(text[from - 1], words.at(0)) &&
      whole(text[to], words.at(-1))
        ? node((start, end) => start <= from && to <= end)
        : undefined;
    if (own) {
      const offset = from - own.start;
      const edges = { before: text[own.start - 1], after: text[own.start + own.node.value.length] };
      own.node.value = own.node.value.slice(0, offset) + own.node.value.slice(offset + words.length);
      place(own, offset, edges);
      return true;
    }
    // The node with the anchor's last letter (before), or with its first (after).
    const holder = node((start, end) =>
      side === 'before' ? start < position && position <= end : start <= position && position < end,
    );
    if (!holder) return false;
    place(holder, position - holder.start, {
      before: text[holder.start - 1],
      after: text[holder.start + holder.node.value.length],
    });
    return true;
  };
  return ANCHOR_LENGTHS.some(
    (length) => at(anchors.before.slice(-length), 'before') || at(anchors.after.slice(0, length), 'after'),
  );
}

const SPACE = /\s/;
const LETTER = /[\p{L}\p{M}\p{N}]/u;

/** The characters of the text just outside a text node (another node's), when there are any. */
type Edges = { before?: string | undefined; after?: string | undefined };

/**
 * Whether a link needs whitespace between it and `next`, the draft's character on one side of its
 * place (nothing: the edge of the text): it had whitespace or its paragraph's edge on that side in
 * `current` (`had`), or its letter `edge` would touch a letter there that it did not touch then.
 */
function needsSpace(had: string | undefined, next: string | undefined, edge: string | undefined): boolean {
  if (next === undefined || SPACE.test(next)) return false;
  if (had === undefined || SPACE.test(had)) return true;
  return LETTER.test(next) && edge !== undefined && LETTER.test(edge) && !LETTER.test(had);
}

/**
 * Puts a link (its element and its words) into a text node at `offset`, spaced as it was in
 * `current` (`was`: the characters next to it there): with whitespace on one side only, its place
 * moves to that side of the whitespace the draft has there; a side that needs whitespace and has
 * none gets a space (`needsSpace`).
 */
function insertSpaced(
  node: TextNode,
  offset: number,
  link: { element: Element; words: string },
  was: { before: string | undefined; after: string | undefined },
  edges: Edges,
): void {
  const value = node.value;
  let start = offset;
  while (start > 0 && SPACE.test(value.charAt(start - 1))) start -= 1;
  let end = offset;
  while (end < value.length && SPACE.test(value.charAt(end))) end += 1;
  const apart = (had: string | undefined): boolean => had === undefined || SPACE.test(had);
  const at =
    apart(was.before) && !apart(was.after) ? end : apart(was.after) && !apart(was.before) ? start : offset;
  const before = at > 0 ? value.charAt(at - 1) : edges.before;
  const after = at < value.length ? value.charAt(at) : edges.after;
  const spaceBefore = needsSpace(was.before, before, link.words.at(0)) ? ' ' : '';
  const spaceAfter = needsSpace(was.after, after, link.words.at(-1)) ? ' ' : '';
  node.value = value.slice(0, at) + spaceBefore + spaceAfter + value.slice(at);
  insertInText(node, at + spaceBefore.length, link.element);
}

/** Splits a text node at `offset` and puts `element` between its two halves. */
function insertInText(node: TextNode, offset: number, element: Element): void {
  const parent = node.parentNode;
  if (!parent) return;
  const rest = node.value.slice(offset);
  const next = parent.childNodes[parent.childNodes.indexOf(node) + 1];
  node.value = node.value.slice(0, offset);
  if (next) defaultTreeAdapter.insertBefore(parent, element, next);
  else append(parent, element);
  if (rest === '') return;
  if (next) defaultTreeAdapter.insertTextBefore(parent, rest, next);
  else defaultTreeAdapter.insertText(parent, rest);
}

function isMarked(element: Element): boolean {
  return element.attrs.some((attribute) => attribute.name === PROTECTED_ATTRIBUTE);
}

/** A block's id and form, as the protected-link check reads them. */
function formOf(element: Element): { id: string; form: string } {
  const [first] = protectedBlockList([element]).forms;
  if (!first) throw new Error('a marked element is a protected block');
  return { id: first[0], form: first[1] };
}

/** The blocks not inside another block (a block's inner blocks come back with it). */
function outermostBlocks(nodes: readonly ChildNode[]): OriginalBlock[] {
  const blocks: OriginalBlock[] = [];
  walk(nodes, {
    enter(node) {
      if (!isElement(node)) return false;
      if (!isMarked(node)) return true;
      blocks.push({ element: node, ...formOf(node) });
      return false;
    },
  });
  return blocks;
}

function cloneElement(element: Element): Element {
  const copy = defaultTreeAdapter.createElement(
    element.tagName,
    element.namespaceURI,
    element.attrs.map((a) => ({ ...a })),
  );
  for (const child of element.childNodes) {
    if (isElement(child)) append(copy, cloneElement(child));
    else if (child.nodeName === '#text')
      defaultTreeAdapter.insertText(copy, (child as { value: string }).value);
  }
  return copy;
}

function append(parent: ParentNode, child: Element): void {
  defaultTreeAdapter.appendChild(parent, child);
}

function replace(old: Element, next: Element): void {
  const parent = old.parentNode;
  if (!parent) return;
  defaultTreeAdapter.insertBefore(parent, next, old);
  defaultTreeAdapter.detachNode(old);
}
