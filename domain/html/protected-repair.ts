import { defaultTreeAdapter, serialize, html as spec } from 'parse5';
import { protectedBlockList } from './protected.ts';
import { isBlock } from './text.ts';
import {
  type ChildNode,
  type Element,
  isElement,
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
 * - the blocks of `current` still missing are put back at the end, each in a paragraph of its own
 *   (where a person sees them and can move them).
 * The result, sanitised, passes `checkProtectedBlocks(current, …)`.
 */
export function restoreProtectedBlocks(current: string, draft: string): string {
  const originals = outermostBlocks(parseBody(current).childNodes);
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
