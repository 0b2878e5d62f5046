import {
  ALLOWED_ELEMENTS,
  attributeProblem,
  DROPPED_ELEMENTS,
  PROTECTED_ATTRIBUTE,
  PROTECTED_ID_ATTRIBUTE,
  requiredRel,
} from '../../domain/html/allowlist.ts';

/*
 * HTML pasted or dropped into the rich editor, cleaned before ProseMirror reads it (its
 * `transformPastedHTML` hook) to what the server's sanitiser keeps, with the same allowlist
 * (domain/html/allowlist.ts): unsafe elements go with their content, unknown ones are unwrapped,
 * attributes outside the allowlist, event handlers and unsafe URLs go, a link's `rel` is made what
 * the server makes it. A protected block's markers go too: only the blocks the body had when the
 * editor loaded are protected, and pasted markup claiming to be one is an ordinary link (the server
 * would refuse it as a forgery). The HTML is parsed in a document of its own, which runs no script
 * and loads no image.
 */

const HTML_NAMESPACE = 'http://www.w3.org/1999/xhtml';
/** ProseMirror's note on its own clipboard HTML (how deep the copied slice was open): kept, it is not content. */
const SLICE_ATTRIBUTE = 'data-pm-slice';

export function cleanPastedHtml(html: string): string {
  const body = new DOMParser().parseFromString(html, 'text/html').body;
  cleanChildren(body);
  return body.innerHTML;
}

function cleanChildren(parent: Element): void {
  for (const node of [...parent.childNodes]) {
    if (node.nodeType === Node.TEXT_NODE) continue;
    if (!(node instanceof Element)) {
      node.remove(); // comments, processing instructions
      continue;
    }
    const tag = node.localName;
    if (node.namespaceURI !== HTML_NAMESPACE || DROPPED_ELEMENTS.has(tag)) {
      node.remove();
      continue;
    }
    cleanChildren(node);
    if (!ALLOWED_ELEMENTS.has(tag)) {
      node.replaceWith(...node.childNodes);
      continue;
    }
    for (const { name, value, namespaceURI } of [...node.attributes]) {
      if (name === SLICE_ATTRIBUTE) continue;
      const marker = name === PROTECTED_ATTRIBUTE || name === PROTECTED_ID_ATTRIBUTE;
      if (marker || attributeProblem(tag, name, value, namespaceURI ?? undefined) !== null) {
        node.removeAttribute(name);
      }
    }
    if (tag === 'a') {
      const rel = requiredRel(node.getAttribute('rel'), node.hasAttribute('target'));
      if (rel !== null) node.setAttribute('rel', rel);
    }
  }
}
