/*
 * What an article body may hold: the elements, attributes and URL schemes the sanitiser keeps, and
 * the rule for a link's `rel`. Plain data and functions with no imports, so that the server's
 * sanitiser (sanitize.ts, on parse5) and the rich editor in the browser (apps/web-client, on the
 * DOM) apply one allowlist.
 */

/** The marker attributes of protected blocks, allowed on any element. */
export const PROTECTED_ATTRIBUTE = 'data-service-protected';
export const PROTECTED_ID_ATTRIBUTE = 'data-service-id';
/** What a protected block is: an inserted backlink anchor or an internal link. */
export const PROTECTED_KINDS = ['backlink', 'internal'] as const;

export const ALLOWED_ELEMENTS: ReadonlySet<string> = new Set([
  ...['p', 'br', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
  ...['strong', 'b', 'em', 'i', 'u', 's', 'sub', 'sup', 'small', 'mark'],
  ...['blockquote', 'q', 'cite', 'code', 'pre', 'ul', 'ol', 'li', 'dl', 'dt', 'dd'],
  ...['a', 'img', 'figure', 'figcaption', 'span', 'div', 'section', 'abbr', 'time'],
  ...['table', 'thead', 'tbody', 'tfoot', 'tr', 'th', 'td', 'caption'],
]);

/** Elements dropped together with everything inside them. Any other unknown element is unwrapped. */
export const DROPPED_ELEMENTS: ReadonlySet<string> = new Set([
  ...['script', 'style', 'template', 'noscript', 'noembed', 'noframes'],
  ...['iframe', 'frame', 'frameset', 'object', 'embed', 'applet', 'param', 'portal', 'fencedframe'],
  ...['svg', 'math', 'link', 'meta', 'base', 'head', 'title', 'source', 'track', 'area'],
  ...['input', 'button', 'select', 'option', 'optgroup', 'datalist', 'textarea', 'keygen', 'output'],
]);

const GLOBAL_ATTRIBUTES: ReadonlySet<string> = new Set([
  'title',
  'lang',
  'dir',
  PROTECTED_ATTRIBUTE,
  PROTECTED_ID_ATTRIBUTE,
]);

const ELEMENT_ATTRIBUTES: Readonly<Record<string, ReadonlySet<string>>> = {
  a: new Set(['href', 'rel', 'target', 'hreflang']),
  img: new Set(['src', 'alt', 'width', 'height', 'loading']),
  td: new Set(['colspan', 'rowspan', 'scope']),
  th: new Set(['colspan', 'rowspan', 'scope']),
  ol: new Set(['start', 'type', 'reversed']),
  time: new Set(['datetime']),
  blockquote: new Set(['cite']),
  q: new Set(['cite']),
  abbr: new Set(['title']),
};

const URL_ATTRIBUTES: ReadonlySet<string> = new Set(['href', 'src', 'cite']);
const ALLOWED_SCHEMES: ReadonlySet<string> = new Set(['http', 'https', 'mailto', 'tel']);

/** Why an attribute cannot stay on an allowed element (a code of SanitizeReason), or null. */
export type AttributeProblem =
  | 'event_handler'
  | 'attribute_not_allowed'
  | 'unsafe_url'
  | 'invalid_protection_marker';

/**
 * Whether an attribute may stay on an allowed element: no event handler, no namespaced attribute,
 * only the allowlisted names, only safe URLs (`isAllowedUrl`), a protection marker of a known kind.
 */
export function attributeProblem(
  tag: string,
  name: string,
  value: string,
  namespace?: string | undefined,
): AttributeProblem | null {
  if (name.startsWith('on')) return 'event_handler';
  if (namespace !== undefined && namespace !== '') return 'attribute_not_allowed';
  if (!GLOBAL_ATTRIBUTES.has(name) && ELEMENT_ATTRIBUTES[tag]?.has(name) !== true) {
    return 'attribute_not_allowed';
  }
  if (URL_ATTRIBUTES.has(name) && !isAllowedUrl(value)) return 'unsafe_url';
  if (name === PROTECTED_ATTRIBUTE && !(PROTECTED_KINDS as readonly string[]).includes(value)) {
    return 'invalid_protection_marker';
  }
  return null;
}

/**
 * Whether a URL attribute value may stay: http, https, mailto, tel or no scheme at all (relative
 * URLs, fragments). Normalised first as a URL parser does: ASCII tab, LF and CR removed anywhere,
 * leading C0 controls and spaces stripped, the scheme compared case-insensitively.
 */
export function isAllowedUrl(value: string): boolean {
  let normalised = value.replace(/[\t\n\r]/g, '');
  let start = 0;
  while (start < normalised.length && normalised.charCodeAt(start) <= 0x20) start++;
  normalised = normalised.slice(start);
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(normalised)?.[1];
  return scheme === undefined || ALLOWED_SCHEMES.has(scheme.toLowerCase());
}

/** The `rel` tokens every link with a `target` carries. */
const NEW_CONTEXT_TOKENS = ['noopener', 'noreferrer'] as const;

/**
 * The `rel` a link must have, or null when the one it has (`rel`, null when absent) is right. A link
 * that opens another browsing context (any `target`) gets `noopener` and `noreferrer`, so the page it
 * opens has no handle on this one (`window.opener`) and does not learn its address; the `opener`
 * token, which asks for that handle, is dropped from any link. Its other tokens stay, in order;
 * tokens compare case-insensitively, as browsers read them. A link given this `rel` needs no other.
 */
export function requiredRel(rel: string | null, hasTarget: boolean): string | null {
  const tokens = (rel ?? '').split(/[\t\n\f\r ]+/).filter((token) => token !== '');
  const kept = tokens.filter((token) => token.toLowerCase() !== 'opener');
  const missing = hasTarget
    ? NEW_CONTEXT_TOKENS.filter((needed) => !kept.some((token) => token.toLowerCase() === needed))
    : [];
  if (kept.length === tokens.length && missing.length === 0) return null;
  return [...kept, ...missing].join(' ');
}
