import type { BodyFacts } from './facts.ts';
import type { Layout } from './layout.ts';
import type { SanitizeResult } from './sanitize.ts';

/**
 * What the html rules remember between calls, so that a body worked on once is not parsed again:
 *
 * - results of `sanitizeHtml` worked out ahead, elsewhere (a worker thread), by input: each is handed
 *   out once, to the next `sanitizeHtml` of that input;
 * - the facts of sanitised bodies (words, protected blocks), read by the decider's check of the next
 *   edit and by the projectors of this one;
 * - the layouts of sanitised bodies (their top-level nodes), so that an edit of one is parsed only
 *   where it changed (layout.ts).
 *
 * Every function that takes one gives the same answer without it (remembering changes nothing but the
 * time), so tests and replays may leave it out. The domain declares it; infra keeps it
 * (infra/html-memory.ts), sized and shared by whoever fills and reads it.
 */
export type HtmlMemory = {
  /** The result worked out ahead for `input`, if one is waiting; it is forgotten as it is handed out. */
  takeSanitized(input: string): SanitizeResult | undefined;
  facts(html: string): BodyFacts | undefined;
  rememberFacts(html: string, facts: BodyFacts): void;
  /** Remembers a sanitised body (a fixpoint of the sanitiser) with its top-level nodes and their ends. */
  rememberLayout(html: string, layout: Layout): void;
  /** The remembered layout of the sanitised body `html`, if it is one. */
  layout(html: string): Layout | undefined;
  /** The remembered sanitised bodies with their layouts, newest first. */
  layouts(): Iterable<readonly [string, Layout]>;
};
