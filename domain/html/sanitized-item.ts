import { z } from 'zod';

/** Why something was taken out of a body. Stable codes: the HTTP API returns them as they are. */
export const SanitizeReason = z.enum([
  /** An unknown element: its tag went, its content stayed. */
  'element_not_allowed',
  /** An element whose content is dangerous or meaningless as text (script, iframe, svg...): gone with its content. */
  'unsafe_element',
  /** An allowed element in a place the HTML parser would restructure (a link in a link, a block in a paragraph, table parts outside a table): its tag went, its content stayed. */
  'invalid_nesting',
  /** Text inside a table but outside any cell, which a browser would move elsewhere. */
  'misplaced_text',
  'attribute_not_allowed',
  'event_handler',
  'unsafe_url',
  /** `data-service-protected` with a value other than `backlink` or `internal`. */
  'invalid_protection_marker',
  /**
   * A link whose `rel` would let the page it opens reach this one: one with a `target` gets `noopener
   * noreferrer`, and the token `opener` goes from any link; `removed` shows the `rel` it had (`rel=""`
   * when it had none).
   */
  'link_opener',
  'comment',
  /** Markup that could not be brought into a stable shape: only its text was kept. */
  'unstable_markup',
  /**
   * The last item of a list cut at `REMOVED_LISTED_MAX` items (domain/html/sanitize.ts): `removed` says
   * how many more things were removed (`"250 more"`), `path` is where the first of them was.
   */
  'more_removed',
]);
export type SanitizeReason = z.infer<typeof SanitizeReason>;

/**
 * One thing the sanitiser removed: where (in the body it was given), what, and why. A path names each
 * element from the body down (`p[2] > a[1]`); one of more than `PATH_STEPS_MAX` steps keeps its first
 * and last ones with `…N…` in place of the N steps between (domain/html/sanitize.ts).
 */
export const SanitizedItem = z.object({ path: z.string(), removed: z.string(), reason: SanitizeReason });
export type SanitizedItem = z.infer<typeof SanitizedItem>;
