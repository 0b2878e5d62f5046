import type { HtmlMemory } from './memory.ts';
import {
  compareProtectedForms,
  formsById,
  type ProtectedCheck,
  type ProtectedForms,
  type ProtectedLink,
  protectedBlockList,
  protectedBlocksOf,
} from './protected.ts';
import { countWords, isBlock, rawText, wordsOf } from './text.ts';
import { type ChildNode, type DocumentFragment, parseBody } from './tree.ts';

/**
 * What the service reads from a stored body: its word count (the list row and the revision) and its
 * protected blocks (the read model's `protected_links`, and the check of the next edit). All of it
 * comes from one parse5 tree, and is remembered in an HtmlMemory when one is given: an edit's body is
 * parsed by the sanitiser, which leaves the facts of its final tree there (from those of its
 * top-level nodes: `nodeFacts`, `combinedFacts`), and then read by the decider's check and two
 * projectors in the same process; the stored body is checked against on the next edit. The facts
 * depend only on the text, so remembering them changes nothing but the time.
 */
export type BodyFacts = {
  readonly words: number;
  readonly protectedLinks: readonly ProtectedLink[];
  readonly protectedForms: ProtectedForms;
};

/** The facts of a body: parsed, unless `memory` has them (then left there). */
export function bodyFacts(html: string, memory?: HtmlMemory): BodyFacts {
  const known = memory?.facts(html);
  if (known) return known;
  const facts = factsOf(parseBody(html));
  memory?.rememberFacts(html, facts);
  return facts;
}

/**
 * The facts of one top-level node, such that those of a body are those of its top-level nodes put
 * together (`combinedFacts`): the sanitiser keeps them with a remembered body's nodes
 * (layout.ts), so an edit works out the facts of its changed nodes only.
 */
export type NodeFacts = {
  /** A block: its words are its own. Otherwise its raw text, which may run into its neighbours' words. */
  readonly block: boolean;
  readonly words: number;
  readonly text: string;
  readonly links: readonly ProtectedLink[];
  readonly forms: readonly (readonly [string, string])[];
};

export function nodeFacts(node: ChildNode): NodeFacts {
  const text = rawText([node]);
  const block = isBlock(node);
  const { links, forms } = protectedBlockList([node]);
  return { block, words: block ? countWords(text) : 0, text: block ? '' : text, links, forms };
}

/**
 * The facts of a body from those of its top-level nodes, in order: a block's raw text starts and
 * ends with a line break, which no word crosses, so words are counted per block and per run of
 * other nodes between blocks; protected blocks do not depend on where they are.
 */
export function combinedFacts(nodes: readonly NodeFacts[]): BodyFacts {
  let words = 0;
  let run = '';
  const protectedLinks: ProtectedLink[] = [];
  for (const node of nodes) {
    if (node.block) {
      words += countWords(run) + node.words;
      run = '';
    } else {
      run += node.text;
    }
    protectedLinks.push(...node.links);
  }
  words += countWords(run);
  return { words, protectedLinks, protectedForms: formsById(nodes.flatMap((node) => node.forms)) };
}

/** The facts of a parsed body, worked out now (nothing remembered). */
export function factsOf(tree: DocumentFragment): BodyFacts {
  const { links, forms } = protectedBlocksOf(tree.childNodes);
  return { words: wordsOf(tree.childNodes), protectedLinks: links, protectedForms: forms };
}

/** The number of words in the visible text of a body. */
export function wordCount(html: string, memory?: HtmlMemory): number {
  return bodyFacts(html, memory).words;
}

/**
 * The protected links of a body, in document order: every element with `data-service-protected`
 * (`backlink` or `internal`); the href is the element's own or, for a wrapper, that of its first
 * `<a href>`; the text is the element's text content.
 */
export function extractProtectedLinks(html: string, memory?: HtmlMemory): ProtectedLink[] {
  return bodyFacts(html, memory).protectedLinks.map((link) => ({ ...link }));
}

/**
 * Checks that an edit keeps the protected blocks of the current body (`compareProtectedForms`).
 * Check the body as it will be stored, i.e. after `sanitizeHtml`.
 */
export function checkProtectedBlocks(
  currentHtml: string,
  nextHtml: string,
  memory?: HtmlMemory,
): ProtectedCheck {
  return compareProtectedForms(
    bodyFacts(currentHtml, memory).protectedForms,
    bodyFacts(nextHtml, memory).protectedForms,
  );
}
