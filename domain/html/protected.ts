import { requiredRel } from './allowlist.ts';
import {
  type ChildNode,
  type Element,
  isElement,
  isProtectedKind,
  isText,
  nodeText,
  PROTECTED_ATTRIBUTE,
  PROTECTED_ID_ATTRIBUTE,
  type ProtectedKind,
  walk,
} from './tree.ts';

/** A link the service placed in a body and that edits must keep as it is. */
export type ProtectedLink = { id: string; kind: ProtectedKind; href: string; text: string };

export type ProtectedChange = { id: string; change: 'removed' | 'rewritten' | 'forged' };

export type ProtectedCheck = { ok: true } | { ok: false; errors: ProtectedChange[]; summary: string };

/** An element carrying `data-service-protected`, with its id (given or derived). */
type Block = { element: Element; id: string };

/** Each protected block's canonical forms, by id (a block may occur more than once). */
export type ProtectedForms = ReadonlyMap<string, readonly string[]>;

/**
 * The protected blocks of a parsed body: its protected links, in document order (every element
 * with `data-service-protected` `backlink` or `internal`; the href is the element's own or, for a
 * wrapper, that of its first `<a href>`; the text is the element's text content), and the forms
 * an edit must keep (`compareProtectedForms`), by id.
 */
export function protectedBlocksOf(nodes: readonly ChildNode[]): {
  links: ProtectedLink[];
  forms: ProtectedForms;
} {
  const { links, forms } = protectedBlockList(nodes);
  return { links, forms: formsById(forms) };
}

/** `protectedBlocksOf` with the forms as a list in document order, `[id, form]`: lists of consecutive nodes concatenate. */
export function protectedBlockList(nodes: readonly ChildNode[]): {
  links: ProtectedLink[];
  forms: [string, string][];
} {
  const blocks = protectedBlocks(nodes);
  const links: ProtectedLink[] = [];
  for (const { element, id } of blocks) {
    const kind = attributeOf(element, PROTECTED_ATTRIBUTE);
    if (!isProtectedKind(kind)) continue;
    links.push({ id, kind, href: hrefOf(element), text: nodeText(element) });
  }
  return { links, forms: blocks.map(({ element, id }) => [id, canonical(element)]) };
}

/** Each protected block's forms by id, from `[id, form]` pairs in document order. */
export function formsById(forms: Iterable<readonly [string, string]>): Map<string, string[]> {
  const byId = new Map<string, string[]>();
  for (const [id, form] of forms) {
    const list = byId.get(id);
    if (list) list.push(form);
    else byId.set(id, [form]);
  }
  return byId;
}

/**
 * Checks that an edit keeps the protected blocks: each one of the current body is in the next
 * body (anywhere) with the same tag, attributes (as a set), href, text and inner markup; the next
 * body claims no protected block the current one does not have. The forms come from parse5 trees
 * of both bodies, so the comparison ignores how the markup is written (quotes, attribute order,
 * entities).
 */
export function compareProtectedForms(current: ProtectedForms, next: ProtectedForms): ProtectedCheck {
  const errors: ProtectedChange[] = [];
  for (const [id, before] of current) {
    const after = next.get(id) ?? [];
    const unmatched = unmatchedCount(before, after);
    const missing = Math.max(0, before.length - after.length);
    if (missing > 0) errors.push({ id, change: 'removed' });
    if (unmatched > missing) errors.push({ id, change: 'rewritten' });
    if (after.length > before.length) errors.push({ id, change: 'forged' });
  }
  for (const id of next.keys()) {
    if (!current.has(id)) errors.push({ id, change: 'forged' });
  }
  if (errors.length === 0) return { ok: true };
  errors.sort((a, b) => compare(a.id, b.id) || compare(a.change, b.change));
  return { ok: false, errors, summary: summarise(errors) };
}

function protectedBlocks(nodes: readonly ChildNode[]): Block[] {
  const blocks: Block[] = [];
  walk(nodes, {
    enter(node) {
      if (!isElement(node)) return false;
      if (node.attrs.some((attribute) => attribute.name === PROTECTED_ATTRIBUTE)) {
        blocks.push({ element: node, id: idOf(node) });
      }
      return true;
    },
  });
  return blocks;
}

/** The block's `data-service-id`, or one derived from its tag, attributes and text. */
function idOf(element: Element): string {
  const id = attributeOf(element, PROTECTED_ID_ATTRIBUTE);
  if (id !== undefined && id !== '') return id;
  return `p_${fnv1a(`${element.tagName}\u0000${sortedAttributes(element)}\u0000${nodeText(element)}`)}`;
}

function hrefOf(element: Element): string {
  const own = attributeOf(element, 'href');
  if (own !== undefined) return own;
  let href = '';
  walk(element.childNodes, {
    enter(node) {
      if (href !== '' || !isElement(node)) return false;
      const candidate = node.tagName === 'a' ? attributeOf(node, 'href') : undefined;
      if (candidate !== undefined && candidate !== '') href = candidate;
      return href === '';
    },
  });
  return href;
}

/** How many of `before` have no identical counterpart in `after` (matched one to one). */
function unmatchedCount(before: readonly string[], after: readonly string[]): number {
  const pool = new Map<string, number>();
  for (const form of after) pool.set(form, (pool.get(form) ?? 0) + 1);
  let unmatched = 0;
  for (const form of before) {
    const left = pool.get(form) ?? 0;
    if (left > 0) pool.set(form, left - 1);
    else unmatched++;
  }
  return unmatched;
}

/**
 * An element as a string that two parses of the same block agree on: tag, attributes sorted by
 * name, text and child elements in order; comments left out.
 */
function canonical(element: Element): string {
  let form = '';
  walk([element], {
    enter(node: ChildNode) {
      if (isText(node)) form += escapeMarkup(node.value);
      if (!isElement(node)) return false;
      form += `<${node.tagName}${sortedAttributes(node)}>`;
      return true;
    },
    leave(node) {
      form += `</${node.tagName}>`;
    },
  });
  return form;
}

/**
 * The attributes of an element, sorted by name, as the sanitiser stores them: a link's `rel` is
 * taken as `requiredRel` makes it, so that a block stored before that rule compares equal to the same
 * block stored after it (an edit that leaves it alone is not a rewrite of it).
 */
function sortedAttributes(element: Element): string {
  const attrs = element.tagName === 'a' ? withRequiredRel(element.attrs) : element.attrs;
  return attrs
    .map((attribute) => ` ${attribute.name}="${escapeMarkup(attribute.value)}"`)
    .sort(compare)
    .join('');
}

function withRequiredRel(attrs: Element['attrs']): readonly { name: string; value: string }[] {
  const current = attrs.find((attribute) => attribute.name === 'rel');
  const rel = requiredRel(
    current?.value ?? null,
    attrs.some((attribute) => attribute.name === 'target'),
  );
  if (rel === null) return attrs;
  return [...attrs.filter((attribute) => attribute.name !== 'rel'), { name: 'rel', value: rel }];
}

function attributeOf(element: Element, name: string): string | undefined {
  return element.attrs.find((attribute) => attribute.name === name)?.value;
}

function escapeMarkup(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** 32-bit FNV-1a over the UTF-8 bytes, as 8 hex digits: a short, stable, pure hash. */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(16).padStart(8, '0');
}

function compare(a: string, b: string): number {
  if (a < b) return -1;
  return a > b ? 1 : 0;
}

function summarise(errors: readonly ProtectedChange[]): string {
  const changes = errors.map(({ id, change }) => `${id} ${change}`).join(', ');
  const noun = errors.length === 1 ? 'change' : 'changes';
  return (
    `Protected blocks must stay as they are (they may be moved): ${errors.length} ${noun}: ${changes}. ` +
    'Keep every element carrying data-service-protected exactly as it is and add none.'
  );
}
