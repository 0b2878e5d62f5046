import { defaultTreeAdapter, serialize, html as spec } from 'parse5';
import { ALLOWED_ELEMENTS, attributeProblem, DROPPED_ELEMENTS, requiredRel } from './allowlist.ts';
import { combinedFacts, nodeFacts } from './facts.ts';
import { findEdit, type Layout, layoutAfter, parseMiddle, serializeWithEnds } from './layout.ts';
import type { HtmlMemory } from './memory.ts';
import type { SanitizedItem, SanitizeReason } from './sanitized-item.ts';
import {
  type ChildNode,
  type DocumentFragment,
  type Element,
  isElement,
  isText,
  type ParentNode,
  parseBody,
} from './tree.ts';

export type SanitizeResult = { html: string; removed: SanitizedItem[] };

// Parser rules the output must not trip over when it is parsed again (HTML standard, "in body" and
// table insertion modes), restricted to the allowed elements.
const HEADINGS: ReadonlySet<string> = new Set(['h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
/** Start tags that close an open `p` in button scope. */
const CLOSES_P: ReadonlySet<string> = new Set([
  ...['blockquote', 'div', 'dl', 'figcaption', 'figure', 'ol', 'p', 'section', 'ul'],
  ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'pre', 'table', 'hr', 'li', 'dd', 'dt'],
]);
/** Allowed elements that bound the button scope (a `p` beyond them is not closed). */
const BUTTON_SCOPE_BOUNDARIES: ReadonlySet<string> = new Set(['table', 'td', 'th', 'caption']);
/** Allowed elements that push a marker on the list of active formatting elements. */
const FORMATTING_MARKERS: ReadonlySet<string> = new Set(['td', 'th', 'caption']);
/** Allowed elements of the parser's "special" category, less `div` and `p` (the `li`/`dd` walk passes those). */
const SPECIAL_STOPS: ReadonlySet<string> = new Set([
  ...['blockquote', 'br', 'caption', 'dd', 'dl', 'dt', 'figcaption', 'figure', 'hr', 'img', 'li', 'ol'],
  ...['pre', 'section', 'table', 'tbody', 'td', 'tfoot', 'th', 'thead', 'tr', 'ul'],
  ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
]);
/** The only element children a table container may have. */
const TABLE_CHILDREN: Readonly<Record<string, ReadonlySet<string>>> = {
  table: new Set(['caption', 'thead', 'tbody', 'tfoot']),
  thead: new Set(['tr']),
  tbody: new Set(['tr']),
  tfoot: new Set(['tr']),
  tr: new Set(['td', 'th']),
};
/** The only parents table parts may have (elsewhere the parser ignores their tags). */
const TABLE_PARENTS: Readonly<Record<string, ReadonlySet<string>>> = {
  caption: new Set(['table']),
  thead: new Set(['table']),
  tbody: new Set(['table']),
  tfoot: new Set(['table']),
  tr: new Set(['thead', 'tbody', 'tfoot']),
  td: new Set(['tr']),
  th: new Set(['tr']),
};

const MAX_PASSES = 4;
/** The most characters of a value, comment, element or attribute name shown in a report (longer ones end in `...`). */
const SHOWN_VALUE_LENGTH = 60;

/**
 * The most items a result lists one by one. Beyond, one last item (`more_removed`) says how many more
 * were removed and where the first of them was: the list, and the answer and event that carry it, stay
 * small whatever the body (a body of nested unknown elements would otherwise give one item per element).
 */
export const REMOVED_LISTED_MAX = 100;
/**
 * The most steps a path shows whole. A longer one keeps its first PATH_HEAD_STEPS and its last
 * PATH_TAIL_STEPS, with `…N…` in place of the N steps between: an `a` under a `div` and twelve `q1`s is
 * `div[1] > q1[1] > q1[1] > …7… > q1[1] > q1[1] > q1[1] > a[1]`.
 */
export const PATH_STEPS_MAX = 8;
export const PATH_HEAD_STEPS = 3;
export const PATH_TAIL_STEPS = 4;

/**
 * Sanitises an article body: an allowlist of elements and attributes on the parse5 tree, URLs
 * limited to http, https, mailto, tel and relative ones, comments dropped. The result is a
 * fixpoint: sanitising it again changes nothing, and parsing and serialising it again gives the
 * same bytes (no mutation XSS). With a memory, a result worked out ahead is taken from it, a body
 * sanitised lately (or an edit of one) is parsed only where it changed, and the result's layout and
 * facts are left in it.
 */
export function sanitizeHtml(html: string, memory?: HtmlMemory): SanitizeResult {
  if (memory === undefined) return sanitizeFully(html);
  const known = memory.takeSanitized(html);
  if (known !== undefined) return known;
  // A body sanitised (or produced) lately, or an edit of one: see layout.ts.
  if (memory.layout(html) !== undefined) return { html, removed: [] };
  return sanitizeEdit(html, memory) ?? sanitizeFully(html, memory);
}

/**
 * `sanitizeHtml` of an edit of a remembered body whose changed middle is already clean: only the
 * middle is parsed. Undefined when that does not apply (no such body, or a middle with something to
 * remove or written otherwise than it serialises); the full path then decides.
 */
export function sanitizeEdit(html: string, memory: HtmlMemory): SanitizeResult | undefined {
  const edit = findEdit(html, memory);
  if (edit === undefined) return undefined;
  const middle = parseMiddle(edit.middle);
  if (middle === undefined || cleanTree(middle, removals(0))) return undefined;
  const { html: written, ends } = serializeWithEnds(middle.childNodes);
  if (written !== edit.middle) return undefined;
  remember(memory, html, layoutAfter(edit, layoutOf(middle.childNodes, ends)));
  return { html, removed: [] };
}

/** `sanitizeHtml` from a parse of the whole body (its layout and facts left in `memory`, if given). */
export function sanitizeFully(html: string, memory?: HtmlMemory): SanitizeResult {
  const removed = removals(REMOVED_LISTED_MAX);
  const first = parseBody(html);
  const cleaned = cleanTree(first, removed);
  const written = serializeWithEnds(first.childNodes);
  let out = written.html;
  if (!cleaned && out === html) {
    // Nothing to clean and the input is already written as its tree serialises (a body read from
    // the API and edited keeps that form): parsing `out` again is parsing `html` again, which gives
    // this same tree. The fixpoint holds without a second parse.
    if (memory) remember(memory, out, layoutOf(first.childNodes, written.ends));
    return { html: out, removed: listOf(removed) };
  }
  // The nesting rules in cleanTree already give a parse-stable tree (200k random soups: always);
  // the passes below prove it and, should one ever not be, let the parser restructure and clean
  // again. Items found there are reported with paths in that intermediate tree.
  for (let pass = 1; pass < MAX_PASSES; pass++) {
    // A pass that changes nothing reports nothing: its items can go to the same list.
    const tree = parseBody(out);
    const reparsed = serializeWithEnds(tree.childNodes);
    const changed = cleanTree(tree, removed);
    if (!changed && reparsed.html === out) {
      if (memory) remember(memory, out, layoutOf(tree.childNodes, reparsed.ends));
      return { html: out, removed: listOf(removed) };
    }
    out = changed ? serialize(tree) : reparsed.html;
  }
  // No fixpoint within a few passes (never seen; a safety net): keep the text only, which is one.
  note(removed, null, shorten(out), 'unstable_markup');
  const fragment = defaultTreeAdapter.createDocumentFragment();
  defaultTreeAdapter.insertText(fragment, collectText(parseBody(out)));
  return { html: serialize(fragment), removed: listOf(removed) };
}

/**
 * Where a node stands in the tree it was found in: its name and rank among same-named siblings, and its
 * parent's step. A path is written from these only for the items listed, and at most PATH_STEPS_MAX
 * steps of it: `head` is the ancestor at depth PATH_HEAD_STEPS (null when the step is not deeper), where
 * an elided path's first steps end, so writing a path never walks more than a few steps up.
 */
type Step = { name: string; rank: number; parent: Step | null; depth: number; head: Step | null };

function stepUnder(parent: Step | null, name: string, rank: number): Step {
  if (parent === null) return { name, rank, parent, depth: 1, head: null };
  const head = parent.depth === PATH_HEAD_STEPS ? parent : parent.head;
  return { name, rank, parent, depth: parent.depth + 1, head };
}

/** `p[2] > a[1]`, elided in the middle beyond PATH_STEPS_MAX steps; `body` for the body itself. */
function pathOf(step: Step | null): string {
  if (step === null) return 'body';
  if (step.depth <= PATH_STEPS_MAX || step.head === null) return stepsUp(step, PATH_STEPS_MAX).join(' > ');
  const tail = stepsUp(step, PATH_TAIL_STEPS);
  const head = stepsUp(step.head, PATH_HEAD_STEPS);
  const elided = step.depth - PATH_HEAD_STEPS - PATH_TAIL_STEPS;
  return [...head, `…${elided}…`, ...tail].join(' > ');
}

/** The last `count` steps down to `step`, written, from the top. */
function stepsUp(step: Step, count: number): string[] {
  const written: string[] = [];
  for (let at: Step | null = step; at !== null && written.length < count; at = at.parent) {
    written.push(`${shorten(at.name)}[${at.rank}]`);
  }
  return written.reverse();
}

/**
 * What a sanitise removed, as it goes: the first `max` items in full (each path written as the item is
 * noted), then only how many more there were and where the first of them was.
 */
type Removals = {
  readonly max: number;
  readonly listed: SanitizedItem[];
  count: number;
  firstUnlisted: Step | null;
};

function removals(max: number): Removals {
  return { max, listed: [], count: 0, firstUnlisted: null };
}

function note(to: Removals, step: Step | null, removed: string, reason: SanitizeReason): void {
  if (to.count < to.max) to.listed.push({ path: pathOf(step), removed, reason });
  else if (to.count === to.max) to.firstUnlisted = step;
  to.count++;
}

function listOf(from: Removals): SanitizedItem[] {
  const more = from.count - from.listed.length;
  if (more <= 0) return from.listed;
  return [
    ...from.listed,
    { path: pathOf(from.firstUnlisted), removed: `${more} more`, reason: 'more_removed' },
  ];
}

/**
 * A sanitised body's tree is at hand: what the projections and the next edit's check read from it
 * (words, protected blocks) is taken from it now rather than parsed again, and its top-level nodes
 * are kept for the next edit of it (layout.ts).
 */
function remember(memory: HtmlMemory, html: string, layout: Layout): void {
  memory.rememberFacts(html, combinedFacts(layout.facts));
  memory.rememberLayout(html, layout);
}

/** Top-level nodes as remembered: where each ends in the body's text, and the facts of each. */
function layoutOf(nodes: readonly ChildNode[], ends: readonly number[]): Layout {
  return { nodes, ends, facts: nodes.map(nodeFacts) };
}

/** Where the parser stands at an element of the output: what its start tags would close. */
type Scope = {
  tag: string | null;
  /** An open `a` with no formatting marker (cell, caption) after it. */
  inLink: boolean;
  /** An open `p` in button scope. */
  pInButtonScope: boolean;
  /** The `li` start-tag walk would reach an open `li`. */
  liOpen: boolean;
  /** The `dd`/`dt` start-tag walk would reach an open `dd` or `dt`. */
  dlItemOpen: boolean;
};

const ROOT_SCOPE: Scope = {
  tag: null,
  inLink: false,
  pInButtonScope: false,
  liOpen: false,
  dlItemOpen: false,
};

function scopeOf(tag: string, parent: Scope): Scope {
  const stops = SPECIAL_STOPS.has(tag);
  return {
    tag,
    inLink: tag === 'a' || (!FORMATTING_MARKERS.has(tag) && parent.inLink),
    pInButtonScope: tag === 'p' || (!BUTTON_SCOPE_BOUNDARIES.has(tag) && parent.pInButtonScope),
    liOpen: tag === 'li' || (!stops && parent.liOpen),
    dlItemOpen: tag === 'dd' || tag === 'dt' || (!stops && parent.dlItemOpen),
  };
}

/** Whether an allowed element, placed under `parent`, would be moved or dropped by a new parse. */
function isMisnested(tag: string, parent: Scope): boolean {
  const container = parent.tag === null ? undefined : TABLE_CHILDREN[parent.tag];
  if (container !== undefined) return !container.has(tag);
  const parents = TABLE_PARENTS[tag];
  if (parents !== undefined) return parent.tag === null || !parents.has(parent.tag);
  if (tag === 'a' && parent.inLink) return true;
  if (CLOSES_P.has(tag) && parent.pInButtonScope) return true;
  if (HEADINGS.has(tag) && parent.tag !== null && HEADINGS.has(parent.tag)) return true;
  if (tag === 'li' && parent.liOpen) return true;
  if ((tag === 'dd' || tag === 'dt') && parent.dlItemOpen) return true;
  return false;
}

/**
 * The children of one input node being cleaned. An element that stays gets a frame of its own
 * (`owner`, collecting into a new list); an unwrapped one gets a frame that collects into its
 * parent's list, so the walk needs no recursion however deep the tree is.
 */
type Frame = {
  nodes: readonly ChildNode[];
  index: number;
  out: ChildNode[];
  scope: Scope;
  /** The step of the node whose children these are; null for the body's. */
  step: Step | null;
  seen: Map<string, number>;
  owner: ParentNode | null;
};

/** Cleans a parsed body in place; reports what it removed; says whether it changed anything. */
function cleanTree(root: DocumentFragment, removed: Removals): boolean {
  const before = removed.count;
  let changed = false;
  const stack: Frame[] = [frameFor(root.childNodes, [], ROOT_SCOPE, null, root)];
  for (let frame = stack.at(-1); frame !== undefined; frame = stack.at(-1)) {
    const node = frame.nodes[frame.index++];
    if (node === undefined) {
      stack.pop();
      if (frame.owner !== null) changed = adopt(frame.owner, frame.out) || changed;
      continue;
    }
    const step = childStep(frame, node);
    if (node.nodeName === '#comment') {
      note(removed, step, `<!--${shorten(commentData(node))}-->`, 'comment');
      continue;
    }
    if (isText(node)) {
      if (frame.scope.tag !== null && TABLE_CHILDREN[frame.scope.tag] !== undefined && !isBlank(node.value)) {
        note(removed, step, shorten(node.value), 'misplaced_text');
      } else {
        frame.out.push(node);
      }
      continue;
    }
    if (!isElement(node)) continue; // a doctype: never produced in a fragment
    const tag = node.tagName;
    if (node.namespaceURI !== spec.NS.HTML || DROPPED_ELEMENTS.has(tag)) {
      note(removed, step, `<${shorten(tag)}>`, 'unsafe_element');
      continue;
    }
    if (!ALLOWED_ELEMENTS.has(tag) || isMisnested(tag, frame.scope)) {
      const reason = ALLOWED_ELEMENTS.has(tag) ? 'invalid_nesting' : 'element_not_allowed';
      note(removed, step, `<${shorten(tag)}>`, reason);
      stack.push(frameFor(node.childNodes, frame.out, frame.scope, step, null));
      continue;
    }
    node.attrs = node.attrs.filter((attribute) => {
      const reason = attributeProblem(tag, attribute.name, attribute.value, attribute.namespace);
      if (reason !== null) note(removed, step, showAttribute(attribute), reason);
      return reason === null;
    });
    if (tag === 'a') requireRel(node, step, removed);
    frame.out.push(node);
    stack.push(frameFor(node.childNodes, [], scopeOf(tag, frame.scope), step, node));
  }
  return changed || removed.count > before;
}

function frameFor(
  nodes: readonly ChildNode[],
  out: ChildNode[],
  scope: Scope,
  step: Step | null,
  owner: ParentNode | null,
): Frame {
  return { nodes, index: 0, out, scope, step, seen: new Map(), owner };
}

/** A child's step (`p[2] > a[1]`: each step is the tag and its rank among same-named siblings in the input). */
function childStep(frame: Frame, node: ChildNode): Step {
  const name = isElement(node) ? node.tagName : node.nodeName;
  const rank = (frame.seen.get(name) ?? 0) + 1;
  frame.seen.set(name, rank);
  return stepUnder(frame.step, name, rank);
}

/** Gives a link the `rel` it must have (`requiredRel`), reporting the one it had. */
function requireRel(link: Element, step: Step, removed: Removals): void {
  const index = link.attrs.findIndex((attribute) => attribute.name === 'rel');
  const current = link.attrs[index];
  const rel = requiredRel(
    current?.value ?? null,
    link.attrs.some((attribute) => attribute.name === 'target'),
  );
  if (rel === null) return;
  note(removed, step, showAttribute({ name: 'rel', value: current?.value ?? '' }), 'link_opener');
  if (current === undefined) link.attrs.push({ name: 'rel', value: rel });
  else link.attrs[index] = { ...current, value: rel };
}

/**
 * Gives a kept element (or the root) its cleaned children: adjacent texts merged, empty ones
 * dropped, and the leading newlines of a `pre` removed (the parser eats the first one, so they
 * would not survive a second parse). Says whether that normalisation changed the text.
 */
function adopt(owner: ParentNode, children: ChildNode[]): boolean {
  let changed = false;
  const merged: ChildNode[] = [];
  for (const child of children) {
    const last = merged.at(-1);
    if (isText(child) && last !== undefined && isText(last)) {
      last.value += child.value;
    } else {
      merged.push(child);
    }
  }
  const first = merged[0];
  if ('tagName' in owner && owner.tagName === 'pre' && first !== undefined && isText(first)) {
    const trimmed = first.value.replace(/^\n+/, '');
    changed = trimmed !== first.value;
    first.value = trimmed;
  }
  const kept = merged.filter((child) => !isText(child) || child.value !== '');
  for (const child of kept) child.parentNode = owner;
  owner.childNodes = kept;
  return changed;
}

function collectText(root: DocumentFragment): string {
  let text = '';
  const stack: ChildNode[] = [...root.childNodes].reverse();
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (isText(node)) text += node.value;
    else if (isElement(node)) stack.push(...[...node.childNodes].reverse());
  }
  return text;
}

function commentData(node: ChildNode): string {
  return 'data' in node ? node.data : '';
}

/** HTML's ASCII whitespace: what a table may hold between its rows. */
function isBlank(text: string): boolean {
  return /^[\t\n\f\r ]*$/.test(text);
}

function showAttribute(attribute: { name: string; value: string }): string {
  return `${shorten(attribute.name)}="${shorten(attribute.value)}"`;
}

function shorten(text: string): string {
  return text.length <= SHOWN_VALUE_LENGTH ? text : `${text.slice(0, SHOWN_VALUE_LENGTH - 3)}...`;
}
