import { serializeOuter } from 'parse5';
import type { NodeFacts } from './facts.ts';
import type { HtmlMemory } from './memory.ts';
import { type ChildNode, type DocumentFragment, isElement, isText, parseBody } from './tree.ts';

/*
 * Sanitised bodies remembered with their trees (in an HtmlMemory: memory.ts), so that an edit of one
 * of them is parsed only where it differs (`sanitizeHtml`'s edit path, in sanitize.ts).
 *
 * An edit made from a body read from the API changes it in one place: the new body is the old one's
 * first top-level nodes as they were, a changed middle, and its last top-level nodes as they were.
 * HTML is parsed as a stream, so the old body's first nodes are the new body's first nodes as long as
 * the parser stands at each boundary as it does at the start: nothing open, no formatting element to
 * reconstruct, reading text. A sanitised body's top-level boundaries after an element are such places
 * (every element is closed by its own end tag, in order: that is how it serialises and parses back).
 * The end of the changed middle is checked rather than assumed: it is parsed followed by a sentinel
 * element, which comes out as the last top-level node, holding its own text and nothing else, only if
 * the parser stood at the start state after the middle (an open element would hold it, an open table
 * would move it before itself, a formatting element would be reconstructed around its text, an open
 * tag, comment or raw-text element would swallow it). The old body's last nodes then parse as they
 * did. An edit whose middle is not already clean (nothing to remove, serialised as written) takes the
 * full path.
 */

/** A sanitised body's top-level nodes, where in its text each ends, and the facts of each. */
export type Layout = {
  readonly nodes: readonly ChildNode[];
  readonly ends: readonly number[];
  readonly facts: readonly NodeFacts[];
};

/** Serialises top-level nodes as `serialize` does a fragment of them, with where each one ends. */
export function serializeWithEnds(nodes: readonly ChildNode[]): { html: string; ends: number[] } {
  let html = '';
  const ends: number[] = [];
  for (const node of nodes) {
    html += serializeOuter(node);
    ends.push(html.length);
  }
  return { html, ends };
}

/** A new body as a remembered one's first nodes, a changed middle, and its last nodes. */
type Edit = {
  before: Layout;
  /** The first `head` top-level nodes of `before` are kept, and those from `tail` on. */
  head: number;
  tail: number;
  /** Where the middle starts in the new body, and the middle itself. */
  at: number;
  middle: string;
  /** How much longer the new body is than the old one. */
  shift: number;
};

/** At most this many remembered bodies, the newest, are looked at. */
const CANDIDATES = 64;
/** Compared in full only with remembered bodies that start or end as `html` does (this many units). */
const PROBE = 64;
/** A remembered body that differs from `html` in at most 1/GOOD_ENOUGH of it is taken without looking further. */
const GOOD_ENOUGH = 8;
/** Strings are compared a chunk at a time (a native comparison), then unit by unit in the chunk that differs. */
const CHUNK = 256;

/** The length of the longest common prefix of `a` and `b`, at most `limit`. */
function commonPrefix(a: string, b: string, limit: number): number {
  let at = 0;
  while (at + CHUNK <= limit && a.slice(at, at + CHUNK) === b.slice(at, at + CHUNK)) at += CHUNK;
  while (at < limit && a.charCodeAt(at) === b.charCodeAt(at)) at++;
  return at;
}

/** The length of the longest common suffix of `a` and `b`, at most `limit`. */
function commonSuffix(a: string, b: string, limit: number): number {
  let n = 0;
  while (
    n + CHUNK <= limit &&
    a.slice(a.length - n - CHUNK, a.length - n) === b.slice(b.length - n - CHUNK, b.length - n)
  ) {
    n += CHUNK;
  }
  while (n < limit && a.charCodeAt(a.length - 1 - n) === b.charCodeAt(b.length - 1 - n)) n++;
  return n;
}

/** The remembered body `html` is most likely an edit of, and where they differ; undefined if none. */
export function findEdit(html: string, memory: HtmlMemory): Edit | undefined {
  let best: { body: string; layout: Layout; prefix: number; suffix: number } | undefined;
  let candidates = 0;
  // Newest first; a body that differs in a small part is taken at once (any such one does).
  for (const [body, layout] of memory.layouts()) {
    if (++candidates > CANDIDATES) break;
    const probe = Math.min(PROBE, body.length, html.length);
    if (!html.startsWith(body.slice(0, probe)) && !html.endsWith(body.slice(body.length - probe))) continue;
    const shortest = Math.min(body.length, html.length);
    const prefix = commonPrefix(html, body, shortest);
    const suffix = commonSuffix(html, body, shortest - prefix);
    if (best === undefined || prefix + suffix > best.prefix + best.suffix)
      best = { body, layout, prefix, suffix };
    if ((shortest - prefix - suffix) * GOOD_ENOUGH <= shortest) break;
  }
  if (best === undefined) return undefined;
  const { body, layout, prefix, suffix } = best;
  const { nodes, ends } = layout;
  const startOf = (index: number): number => (index === 0 ? 0 : (ends[index - 1] as number));
  // The kept head ends after an element, within the common prefix (a text node there could merge
  // with text at the start of the middle).
  let head = 0;
  for (let index = nodes.length; index > 0; index--) {
    if (startOf(index) <= prefix && isElement(nodes[index - 1] as ChildNode)) {
      head = index;
      break;
    }
  }
  // The kept tail starts with an element, within the common suffix.
  let tail = nodes.length;
  for (let index = head; index < nodes.length; index++) {
    if (startOf(index) >= body.length - suffix && isElement(nodes[index] as ChildNode)) {
      tail = index;
      break;
    }
  }
  const at = startOf(head);
  const shift = html.length - body.length;
  const middle = html.slice(at, startOf(tail) + shift);
  return { before: layout, head, tail, at, middle, shift };
}

/** Follows the middle of an edit; see above. A custom element: no parser rule names it. */
const SENTINEL_TAG = 'cs-edit-end';
const SENTINEL = `<${SENTINEL_TAG}>.</${SENTINEL_TAG}>`;

/**
 * The middle of an edit parsed as it is within the new body, or undefined when the parser would not
 * stand at the start state after it (then the whole body must be parsed).
 */
export function parseMiddle(middle: string): DocumentFragment | undefined {
  const fragment = parseBody(middle + SENTINEL);
  const last = fragment.childNodes.pop();
  if (last === undefined || !isElement(last) || last.tagName !== SENTINEL_TAG || last.attrs.length > 0)
    return undefined;
  const [text, ...rest] = last.childNodes;
  if (text === undefined || rest.length > 0 || !isText(text) || text.value !== '.') return undefined;
  return fragment;
}

/** The layout of the new body of an edit whose middle parsed (and serialised back) as `middle`. */
export function layoutAfter(edit: Edit, middle: Layout): Layout {
  const { before, head, tail, at, shift } = edit;
  return {
    nodes: [...before.nodes.slice(0, head), ...middle.nodes, ...before.nodes.slice(tail)],
    ends: [
      ...before.ends.slice(0, head),
      ...middle.ends.map((end) => end + at),
      ...before.ends.slice(tail).map((end) => end + shift),
    ],
    facts: [...before.facts.slice(0, head), ...middle.facts, ...before.facts.slice(tail)],
  };
}
