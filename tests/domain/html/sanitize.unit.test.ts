import fc from 'fast-check';
import type { DefaultTreeAdapterTypes } from 'parse5';
import { parseFragment, serialize, serializeOuter } from 'parse5';
import { describe, expect, it } from 'vitest';
import { isAllowedUrl } from '../../../domain/html/allowlist.ts';
import { bodyFacts, checkProtectedBlocks, factsOf } from '../../../domain/html/facts.ts';
import { parseMiddle } from '../../../domain/html/layout.ts';
import {
  PATH_STEPS_MAX,
  REMOVED_LISTED_MAX,
  sanitizeEdit,
  sanitizeFully,
  sanitizeHtml,
} from '../../../domain/html/sanitize.ts';
import type { SanitizedItem } from '../../../domain/html/sanitized-item.ts';
import { countWords, textContent } from '../../../domain/html/text.ts';
import { parseBody } from '../../../domain/html/tree.ts';
import { createHtmlMemory } from '../../../infra/html-memory.ts';

type ChildNode = DefaultTreeAdapterTypes.ChildNode;
type Element = DefaultTreeAdapterTypes.Element;

/** What the sanitiser remembers between calls, as a runtime's commands give it. */
const memory = createHtmlMemory();

// The contract, written out again here rather than imported, so the tests check the code against it.
const ALLOWED_ELEMENTS = new Set(
  (
    'p br hr h1 h2 h3 h4 h5 h6 strong b em i u s sub sup small mark blockquote q cite code pre ul ol li dl dt dd ' +
    'a img figure figcaption table thead tbody tfoot tr th td caption span div section abbr time'
  ).split(' '),
);
const ALLOWED_ATTRIBUTES: Record<string, string[]> = {
  '*': ['title', 'lang', 'dir', 'data-service-protected', 'data-service-id'],
  a: ['href', 'rel', 'target', 'hreflang'],
  img: ['src', 'alt', 'width', 'height', 'loading'],
  td: ['colspan', 'rowspan', 'scope'],
  th: ['colspan', 'rowspan', 'scope'],
  ol: ['start', 'type', 'reversed'],
  time: ['datetime'],
  blockquote: ['cite'],
  q: ['cite'],
  abbr: ['title'],
};
const SAFE_PROTOCOLS = new Set(['http:', 'https:', 'mailto:', 'tel:']);

/** What a browser would open: the WHATWG URL parser, independent of the sanitiser's own check. */
function opensSafely(value: string): boolean {
  try {
    return SAFE_PROTOCOLS.has(new URL(value, 'https://site.example/articles/1').protocol);
  } catch {
    return true; // not a URL at all: nothing to open
  }
}

function elementsOf(nodes: readonly ChildNode[]): Element[] {
  const found: Element[] = [];
  const stack = [...nodes];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if ('tagName' in node) {
      found.push(node);
      stack.push(...node.childNodes);
    }
  }
  return found;
}

/** Every reason the output is not acceptable by the contract; empty when it is. */
function violations(html: string): string[] {
  const problems: string[] = [];
  const trees = [parseBody(html).childNodes, parseFragment(html).childNodes];
  for (const element of trees.flatMap(elementsOf)) {
    const tag = element.tagName;
    if (!ALLOWED_ELEMENTS.has(tag) || element.namespaceURI !== 'http://www.w3.org/1999/xhtml') {
      problems.push(`element <${tag}>`);
    }
    for (const { name, value } of element.attrs) {
      if (name.startsWith('on')) problems.push(`event handler ${name} on <${tag}>`);
      if (!ALLOWED_ATTRIBUTES['*']?.includes(name) && !ALLOWED_ATTRIBUTES[tag]?.includes(name)) {
        problems.push(`attribute ${name} on <${tag}>`);
      }
      if (['href', 'src', 'cite'].includes(name) && !opensSafely(value))
        problems.push(`url ${name}="${value}"`);
    }
    if (tag === 'a') problems.push(...openerProblems(element));
  }
  return problems;
}

/**
 * What lets the page a link opens reach the page it is on: a `target` without `noopener` and
 * `noreferrer`, or the token `opener` (rel tokens are separated by ASCII whitespace, any case).
 */
function openerProblems(link: Element): string[] {
  const rel = link.attrs.find((attribute) => attribute.name === 'rel')?.value ?? '';
  const tokens = rel.toLowerCase().split(/[\t\n\f\r ]+/);
  const problems = tokens.includes('opener') ? [`rel="${rel}" asks for the opener`] : [];
  const target = link.attrs.some((attribute) => attribute.name === 'target');
  if (target && !(tokens.includes('noopener') && tokens.includes('noreferrer'))) {
    problems.push(`target without rel="noopener noreferrer" (rel="${rel}")`);
  }
  return problems;
}

// Generators: random soups of allowed and dangerous markup.

const TAGS = [
  ...ALLOWED_ELEMENTS,
  ...['script', 'style', 'iframe', 'object', 'embed', 'template', 'noscript', 'textarea', 'select', 'option'],
  ...['svg', 'math', 'mi', 'mo', 'mtext', 'mglyph', 'malignmark', 'foreignObject', 'desc', 'annotation-xml'],
  ...[
    'xmp',
    'noembed',
    'noframes',
    'title',
    'form',
    'button',
    'input',
    'marquee',
    'applet',
    'font',
    'center',
  ],
  ...['x-widget', 'col', 'colgroup', 'image', 'listing', 'nobr', 'ruby', 'rt', 'frameset', 'base', 'link'],
];
const ATTRIBUTE_NAMES = [
  ...['href', 'src', 'cite', 'onclick', 'OnError', 'onmouseover', 'style', 'class', 'id', 'title', 'lang'],
  ...['rel', 'target', 'alt', 'width', 'colspan', 'start', 'datetime', 'data-service-protected'],
  ...['data-service-id', 'xlink:href', 'formaction', 'srcset', 'action', 'is', 'dir'],
];

/** A scheme, its letters sometimes written as entities or split by (encoded) tabs and newlines. */
const obfuscatedUrl = fc
  .record({
    lead: fc.constantFrom('', ' ', '\u0001', '&#1;', ' \t', '&#x20;', '&#0;', '\u000c'),
    scheme: fc.constantFrom('javascript', 'JaVaScRiPt', 'data', 'vbscript', 'http', 'https', 'mailto', 'ftp'),
    encodings: fc.array(fc.nat(4), { minLength: 10, maxLength: 10 }),
    colon: fc.constantFrom(':', '&colon;', '&#58;', '&#x3A;', '%3a', ' :'),
    rest: fc.constantFrom('alert(1)', '//example.com/', 'text/html;base64,PHNjcmlwdD4=', 'a@b.example'),
  })
  .map(({ lead, scheme, encodings, colon, rest }) => {
    const letters = [...scheme].map((letter, index) => {
      switch (encodings[index % encodings.length]) {
        case 1:
          return `&#${letter.charCodeAt(0)};`;
        case 2:
          return `&#x${letter.charCodeAt(0).toString(16)};`;
        case 3:
          return `${letter}&#x09;`;
        case 4:
          return `${letter}${['&NewLine;', '\n', '&Tab;', '\r'][index % 4]}`;
        default:
          return letter;
      }
    });
    return `${lead}${letters.join('')}${colon}${rest}`;
  });
const relativeUrl = fc.constantFrom(
  '/guide',
  '#top',
  '?q=1',
  'page.html',
  '//cdn.example/x',
  './javascript:x',
  '',
);
const attributeValue = fc.oneof(
  obfuscatedUrl,
  relativeUrl,
  fc.constantFrom('backlink', 'internal', 'evil', 'bl_1', 'alert(1)', '</style><img src=x onerror=alert(1)>'),
  // Values of target and rel.
  fc.constantFrom('_blank', '_self', '', 'opener', 'OPENER nofollow', 'noopener', 'noreferrer', 'nofollow'),
  fc.constantFrom(
    'noopener noreferrer',
    'NoOpener\tNoReferrer opener',
    ' nofollow  noopener ',
    'opener opener',
  ),
);
const attribute = fc
  .record({
    name: fc.constantFrom(...ATTRIBUTE_NAMES),
    value: attributeValue,
    quote: fc.constantFrom('"', "'"),
  })
  .map(
    ({ name, value, quote }) =>
      ` ${name}=${quote}${value.replaceAll(quote, quote === '"' ? '&quot;' : '&#39;')}${quote}`,
  );

const text = fc.oneof(
  fc.constantFrom('hello', 'a b', ' ', '\n', '\n\n', '&amp;', '&lt;script&gt;', "don't", '\u00a0', '&nbsp;'),
  fc.string({
    maxLength: 8,
    unit: fc.constantFrom('a', ' ', '<', '>', '&', '/', '"', "'", '=', '\n', '\0', '!', '-', 'p'),
  }),
);
const comment = fc.constantFrom(
  '<!-- note -->',
  '<!---->',
  '<!-- <script>x</script> -->',
  '<!x>',
  '<?php x ?>',
  '<!--',
);
const mxssShape = fc.constantFrom(
  '<svg><p><style>',
  '<math><mi><table>',
  '</p><p>',
  '<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">',
  '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>',
  '<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>',
  '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
  '<a href=x><table><a href=y>',
  '<p><table><td><p>',
  '<li><x-a><li>',
  '<h1><font><h2>',
  '<pre>\n\n',
  '<table><tr>text<td>',
  '<plaintext>',
  '<select><template><style>',
  '<![CDATA[<img src=x onerror=alert(1)>]]>',
  '<image src=javascript:alert(1)>',
  '</a></b></p></table>',
);

/** A link with some target and rel, as pasted from anywhere (tokens in any case, spacing and order). */
const REL_TOKENS = [
  'opener',
  'OPENER',
  'noopener',
  'NoOpener',
  'noreferrer',
  'NOREFERRER',
  'nofollow',
  'sponsored',
];
const link = fc
  .record({
    target: fc.option(fc.constantFrom('_blank', '_self', '_top', 'name', ''), { nil: null }),
    rel: fc.option(
      fc.array(fc.tuple(fc.constantFrom(...REL_TOKENS), fc.constantFrom(' ', '  ', '\t', '\n')), {
        maxLength: 4,
      }),
      { nil: null },
    ),
    protectedBlock: fc.boolean(),
  })
  .map(({ target, rel, protectedBlock }) => {
    const attributes = [
      'href="https://partner.example/"',
      ...(target === null ? [] : [`target="${target}"`]),
      ...(rel === null ? [] : [`rel="${rel.map(([token, space]) => `${space}${token}`).join('')}"`]),
      ...(protectedBlock ? ['data-service-protected="backlink" data-service-id="bl_1"'] : []),
    ];
    return `<a ${attributes.join(' ')}>partner</a>`;
  });

const { node } = fc.letrec<{ node: string; element: string }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', maxDepth: 6 },
    { arbitrary: text, weight: 2 },
    { arbitrary: comment, weight: 1 },
    { arbitrary: mxssShape, weight: 1 },
    { arbitrary: link, weight: 1 },
    { arbitrary: tie('element'), weight: 4 },
  ),
  element: fc
    .record({
      tag: fc.constantFrom(...TAGS),
      attributes: fc.array(attribute, { maxLength: 3 }),
      children: fc.array(tie('node'), { maxLength: 4 }),
      closed: fc.nat(3).map((n) => n > 0),
    })
    .map(({ tag, attributes, children, closed }) =>
      closed
        ? `<${tag}${attributes.join('')}>${children.join('')}</${tag}>`
        : `<${tag}${attributes.join('')}>${children.join('')}`,
    ),
}));
const markupSoup = fc.array(node, { maxLength: 6 }).map((nodes) => nodes.join(''));

/**
 * Soup of bare tags only, to stress the parser's restructuring: unwrapping `marquee`, `font`,
 * `nobr` or a custom element can leave a link in a link, a block in a paragraph, a heading in a
 * heading or a list item in a list item, which a second parse would move around.
 */
const STRUCTURAL_TAGS = [
  ...['p', 'div', 'a', 'b', 'i', 'em', 'strong', 's', 'small', 'code', 'q', 'span', 'br', 'hr', 'img'],
  ...['ul', 'ol', 'li', 'dl', 'dt', 'dd', 'h1', 'h2', 'pre', 'blockquote', 'figure', 'section'],
  ...['table', 'tbody', 'thead', 'tr', 'td', 'th', 'caption', 'colgroup', 'col'],
  ...['marquee', 'font', 'x-y', 'nobr', 'form', 'template', 'listing', 'button', 'select'],
];
const { structuralNode } = fc.letrec<{ structuralNode: string; structuralElement: string }>((tie) => ({
  structuralNode: fc.oneof(
    { depthSize: 'small', maxDepth: 7 },
    {
      arbitrary: fc.constantFrom('x', ' ', '\n', '</p>', '<p>', '</a>', '<a href=/z>', '<td>', '</li>'),
      weight: 2,
    },
    { arbitrary: tie('structuralElement'), weight: 5 },
  ),
  structuralElement: fc
    .record({
      tag: fc.constantFrom(...STRUCTURAL_TAGS),
      children: fc.array(tie('structuralNode'), { maxLength: 4 }),
      closed: fc.nat(3).map((n) => n > 0),
    })
    .map(({ tag, children, closed }) => {
      const start = tag === 'a' ? '<a href="/l">' : `<${tag}>`;
      return `${start}${children.join('')}${closed ? `</${tag}>` : ''}`;
    }),
}));
const tagSoup = fc.array(structuralNode, { maxLength: 5 }).map((nodes) => nodes.join(''));
const body = fc.oneof(markupSoup, tagSoup);

/** HTML_PROPERTY_RUNS=100000 for a long soak. */
const runs = { numRuns: Number(process.env.HTML_PROPERTY_RUNS ?? 300) };

describe('sanitizeHtml: properties', () => {
  it('is idempotent', () => {
    fc.assert(
      fc.property(body, (html) => {
        const once = sanitizeHtml(html, memory).html;
        // In full: sanitizeHtml knows `once` as a body it produced and would not parse it again.
        const twice = sanitizeFully(once);
        expect(twice.html).toBe(once);
        expect(twice.removed).toEqual([]);
        expect(sanitizeHtml(once, memory)).toEqual({ html: once, removed: [] });
      }),
      runs,
    );
  });

  it('gives markup that parses back to itself (no mutation XSS), in a div or a template context', () => {
    fc.assert(
      fc.property(body, (html) => {
        const out = sanitizeHtml(html, memory).html;
        expect(serialize(parseBody(out))).toBe(out);
        expect(serialize(parseFragment(out))).toBe(out);
      }),
      runs,
    );
  });

  it('hands over the facts of the body it returns (words, protected blocks): the same as parsing it again', () => {
    fc.assert(
      fc.property(body, (html) => {
        const out = sanitizeHtml(html, memory).html;
        expect(bodyFacts(out, memory)).toEqual(factsOf(parseBody(out)));
        // Words counted without laying the text out: as many as in the text a reader sees.
        expect(bodyFacts(out, memory).words).toBe(countWords(textContent(out)));
      }),
      runs,
    );
  });

  it('never lets through an element, attribute, event handler or URL scheme outside the allowlist', () => {
    fc.assert(
      fc.property(body, (html) => {
        expect(violations(sanitizeHtml(html).html)).toEqual([]);
      }),
      runs,
    );
  });

  it('agrees with the WHATWG URL parser on which URLs are safe', () => {
    const decoded = obfuscatedUrl.map((url) => {
      const element = parseBody(`<a href="${url}">`).childNodes[0];
      return element !== undefined && 'attrs' in element ? (element.attrs[0]?.value ?? '') : '';
    });
    fc.assert(
      fc.property(fc.oneof(decoded, relativeUrl), (url) => {
        expect(isAllowedUrl(url)).toBe(opensSafely(url));
      }),
      runs,
    );
  });
});

/**
 * The edit path (domain/html/layout.ts): an edit of a body sanitised before is parsed only where it
 * differs. Whatever it returns must be exactly what parsing the whole body gives.
 */
describe('sanitizeHtml: edits of a remembered body', () => {
  /** The remembered top-level nodes of `html` are those of its parse, one for one, ending where they do. */
  function expectLayoutOfParse(html: string): void {
    const layout = memory.layout(html);
    const parsed = parseBody(html).childNodes;
    expect(layout?.nodes.map((node) => [node.nodeName, serializeOuter(node)])).toEqual(
      parsed.map((node) => [node.nodeName, serializeOuter(node)]),
    );
    let end = 0;
    expect(layout?.ends).toEqual(parsed.map((node) => (end += serializeOuter(node).length)));
  }

  /** Sanitises `before` (remembered, as after storing it); returns it, and `edit` to try one of it. */
  function remembering(before: string) {
    memory.clear();
    const stored = sanitizeFully(before, memory).html;
    expect(memory.layout(stored) !== undefined).toBe(true);
    /** `next` by the edit path and in full (nothing remembered); the edit path's facts of it. */
    const edit = (next: string) => {
      const viaEdit = sanitizeEdit(next, memory);
      const factsViaEdit = viaEdit === undefined ? undefined : bodyFacts(next, memory);
      if (viaEdit !== undefined) expectLayoutOfParse(next);
      memory.clear();
      return { viaEdit, factsViaEdit, full: sanitizeFully(next) };
    };
    return { stored, edit };
  }

  /** Whether `next`, an edit of `before`, took the edit path; if it did, it gave what the full path gives. */
  function editPathAgrees(before: string, next: (stored: string) => string): boolean {
    const { stored, edit } = remembering(before);
    const text = next(stored);
    const result = edit(text);
    if (result.viaEdit === undefined) return false;
    expect(result.viaEdit).toEqual(result.full);
    expect(result.factsViaEdit).toEqual(factsOf(parseBody(text)));
    return true;
  }

  // Pieces of markup to splice into a stored body: clean ones (as the API gives them back), and
  // ones that leave the parser somewhere else than at the start (open elements, open tables,
  // formatting elements to reconstruct, foreign content, open tags, comments, raw text...).
  const clean = fc.constantFrom(
    '',
    'text',
    ' more words ',
    '<p>a new paragraph</p>',
    '<h2>A heading</h2>\n<p>and <strong>bold</strong> text</p>',
    '<ul><li>one</li><li>two</li></ul>',
    '<p>See <a href="https://example.com/">this</a>.</p>',
    '\n',
    '<br>',
    '<table><tbody><tr><td>x</td></tr></tbody></table>',
  );
  const troublesome = fc.constantFrom(
    '<p>',
    '<b>',
    '<p><b>x</p>',
    '<a href="x">',
    '<table>',
    '<table><tr><td>',
    '<svg>',
    '<math><mi>',
    '<template>',
    '<select>',
    '<textarea>',
    '<style>',
    '<plaintext>',
    '<pre>',
    '<li>',
    '<div>',
    '<!--',
    '<!',
    '<',
    '</',
    '<a href="',
    '&amp',
    '&',
    '\r',
    '</p>',
    '</div>',
    '<cs-edit-end>.',
    '<cs-edit-end>.</cs-edit-end>',
    '<form>',
    '<div><form></div>',
    '<nobr>',
    '<h2>',
    '<xmp>',
    '<noscript>',
  );
  const piece = fc.oneof(clean, troublesome, markupSoup, tagSoup);

  it('gives what a full parse gives, for any splice into any stored body, and often parses only the middle', () => {
    let viaEdit = 0;
    let total = 0;
    fc.assert(
      fc.property(
        body,
        fc.array(piece, { minLength: 1, maxLength: 3 }),
        fc.nat(),
        fc.nat(),
        (original, pieces, from, length) => {
          const splice = (stored: string): string => {
            const start = from % (stored.length + 1);
            const end = Math.min(stored.length, start + (length % 40));
            return stored.slice(0, start) + pieces.join('') + stored.slice(end);
          };
          total++;
          if (editPathAgrees(original, splice)) viaEdit++;
        },
      ),
      { numRuns: runs.numRuns * 10 },
    );
    // Not vacuous: a share of the splices took the edit path (short random bodies often share too
    // little with the edit for it: see the next test for long ones).
    expect(viaEdit).toBeGreaterThan(total / 25);
  });

  it('replaces sections of a long body: mostly the edit path, always the same as in full', () => {
    const sections = Array.from(
      { length: 24 },
      (_, i) =>
        `<h2>Part ${i}</h2>\n<p>Words of part ${i}, <a href="/p/${i}" data-service-protected="internal" data-service-id="il_${i}">link ${i}</a>.</p>`,
    );
    const stored = sanitizeFully(sections.join('\n')).html;
    let viaEdit = 0;
    let total = 0;
    fc.assert(
      fc.property(fc.nat(23), fc.nat(23), fc.oneof(clean, troublesome), (a, b, inserted) => {
        const [from, to] = a <= b ? [a, b] : [b, a];
        total++;
        if (
          editPathAgrees(stored, () =>
            [...sections.slice(0, from), inserted, ...sections.slice(to)].join('\n'),
          )
        ) {
          viaEdit++;
        }
      }),
      runs,
    );
    expect(viaEdit).toBeGreaterThan(total / 3);
  });

  it.each([
    ['an open paragraph', '<p>open'],
    ['a formatting element left to reconstruct', '<p><b>bold</p>'],
    ['an open table', '<table><tr><td>cell'],
    ['foreign content', '<svg><desc>'],
    ['an open link', '<a href="/x">link'],
    ['an open comment', '<!-- comment'],
    ['an open tag', '<a href="/x'],
    ['an open raw-text element', '<style>'],
    ['plaintext', '<plaintext>'],
    ['an open template', '<template>'],
    ['the sentinel itself, open', '<cs-edit-end>.'],
  ])('falls back to a full parse when the middle leaves %s', (_, middle) => {
    const head = '<h2>Head</h2>\n<p>first</p>\n';
    const tail = '\n<hr>\n<p>last <em>words</em></p>\n<h2>More</h2>';
    const { edit } = remembering(`${head}<p>old</p>${tail}`);
    const next = `${head}${middle}${tail}`;
    const result = edit(next);
    expect(result.viaEdit).toBeUndefined();
    expect(sanitizeHtml(next, memory)).toEqual(result.full);
  });

  it.each([
    '<p>open',
    '<p><b>bold</p>',
    '<b>',
    '<table>',
    '<table><tr><td>cell',
    '<svg>',
    '<svg><desc>',
    '<math><mi>',
    '<a href="/x">link',
    '<!-- comment',
    '<a href="/x',
    '</',
    '<!',
    '<style>',
    '<xmp>',
    '<plaintext>',
    '<template>',
    '<select>',
    '<textarea>',
    '<pre>',
    '<li>',
    '<cs-edit-end>.',
    '<cs-edit-end>',
  ])('parseMiddle: %j leaves the parser elsewhere than at the start, and is refused', (middle) => {
    expect(parseMiddle(middle)).toBeUndefined();
  });

  it.each([
    ['', 0],
    ['text', 1],
    ['<p>a</p>', 1],
    ['<p>a</p>\n<h2>b</h2>', 3],
    ['<p><b>x</b></p>', 1],
    ['<table><tbody><tr><td>x</td></tr></tbody></table>', 1],
    ['<cs-edit-end>.</cs-edit-end>', 1],
    ['&amp', 1],
    // A lone `<` before a tag is text, before the next body's first tag as before the sentinel.
    ['<', 1],
    ['\r', 1],
  ])('parseMiddle: %j ends at the start state: its nodes', (middle, count) => {
    expect(parseMiddle(middle)?.childNodes.length).toBe(count);
  });

  it('counts a word that runs across top-level inline nodes once, in full and by the edit path', () => {
    const around = '<p>A first paragraph long enough to be compared.</p>';
    const stored = sanitizeFully(
      `${around}<b>foo</b>bar<p>one two</p>x<i>y</i>-z <span>3</span>.5${around}`,
      memory,
    ).html;
    expect(bodyFacts(stored, memory).words).toBe(5 + 16);
    expect(bodyFacts(stored, memory).words).toBe(countWords(textContent(stored)));
    const { edit } = remembering(stored);
    const next = stored.replace('one two', 'one two three');
    const result = edit(next);
    expect(result.viaEdit).toEqual({ html: next, removed: [] });
    expect(result.factsViaEdit?.words).toBe(6 + 16);
  });

  it('takes the edit path for a clean change of one paragraph in a long body', () => {
    const sections = Array.from({ length: 40 }, (_, i) => `<h2>Part ${i}</h2>\n<p>Words of part ${i}.</p>`);
    const stored = sanitizeFully(sections.join('\n')).html;
    const next = stored.replace('Words of part 20.', 'Other words, <strong>20</strong>.');
    const { edit } = remembering(stored);
    const result = edit(next);
    expect(result.viaEdit).toEqual({ html: next, removed: [] });
    expect(result.full).toEqual({ html: next, removed: [] });
  });
});

describe('sanitizeHtml: elements', () => {
  it('keeps allowed markup byte for byte', () => {
    const html =
      '<h2 title="t">Title</h2><p lang="en">Some <strong>bold</strong>, <em>em</em>, <a href="https://example.com/x?a=1&amp;b=2" rel="nofollow noopener noreferrer" target="_blank">link</a>.</p>' +
      '<ul><li>one</li><li>two</li></ul><ol start="3" reversed=""><li>x</li></ol><blockquote cite="https://example.com/">q</blockquote>' +
      '<figure><img src="/a.png" alt="A" width="10" height="20" loading="lazy"><figcaption>cap</figcaption></figure>' +
      '<table><caption>c</caption><thead><tr><th scope="col">h</th></tr></thead><tbody><tr><td colspan="2">d</td></tr></tbody></table>' +
      '<p><abbr title="HyperText">HTML</abbr> <time datetime="2026-01-01">today</time> <code>x</code><br><sub>1</sub><sup>2</sup></p><hr><pre>a\n b</pre>';
    expect(sanitizeHtml(html)).toEqual({ html, removed: [] });
  });

  it('drops script, style, iframe, object, embed, svg, math and form controls with their content', () => {
    const result = sanitizeHtml(
      '<p>a<script>alert(1)</script>b<style>p{}</style>c<iframe src="https://x"></iframe>d<object data="x">fallback</object>' +
        '<embed src="x">e<svg><text>svg</text></svg><math><mi>x</mi></math><textarea>t</textarea><select><option>o</option></select></p>',
    );
    expect(result.html).toBe('<p>abcde</p>');
    expect(result.removed.map((item) => item.removed)).toEqual([
      '<script>',
      '<style>',
      '<iframe>',
      '<object>',
      '<embed>',
      '<svg>',
      '<math>',
      '<textarea>',
      '<select>',
    ]);
    expect(new Set(result.removed.map((item) => item.reason))).toEqual(new Set(['unsafe_element']));
  });

  it('unwraps unknown elements and keeps their content', () => {
    expect(sanitizeHtml('<center><font color="red">Hi <x-widget>there</x-widget></font></center>')).toEqual({
      html: 'Hi there',
      removed: [
        { path: 'center[1]', removed: '<center>', reason: 'element_not_allowed' },
        { path: 'center[1] > font[1]', removed: '<font>', reason: 'element_not_allowed' },
        { path: 'center[1] > font[1] > x-widget[1]', removed: '<x-widget>', reason: 'element_not_allowed' },
      ],
    });
  });

  it('drops comments', () => {
    expect(sanitizeHtml('<p>a<!-- secret -->b</p>')).toEqual({
      html: '<p>ab</p>',
      removed: [{ path: 'p[1] > #comment[1]', removed: '<!-- secret -->', reason: 'comment' }],
    });
  });

  it('names the path by tag and rank among same-named siblings', () => {
    const { removed } = sanitizeHtml('<p>x</p><p>y <a href="/a">a</a> <a href="/b" onclick="go()">b</a></p>');
    expect(removed).toEqual([{ path: 'p[2] > a[2]', removed: 'onclick="go()"', reason: 'event_handler' }]);
  });
});

describe('sanitizeHtml: attributes and URLs', () => {
  it('removes event handlers, whatever their case', () => {
    expect(sanitizeHtml('<img src="/a.png" OnError="alert(1)" onload=x>')).toEqual({
      html: '<img src="/a.png">',
      removed: [
        { path: 'img[1]', removed: 'onerror="alert(1)"', reason: 'event_handler' },
        { path: 'img[1]', removed: 'onload="x"', reason: 'event_handler' },
      ],
    });
  });

  it('removes attributes outside the allowlist, including ones allowed on other elements', () => {
    expect(sanitizeHtml('<p style="color:red" class="c" id="i" href="/x" title="t">a</p>')).toEqual({
      html: '<p title="t">a</p>',
      removed: [
        { path: 'p[1]', removed: 'style="color:red"', reason: 'attribute_not_allowed' },
        { path: 'p[1]', removed: 'class="c"', reason: 'attribute_not_allowed' },
        { path: 'p[1]', removed: 'id="i"', reason: 'attribute_not_allowed' },
        { path: 'p[1]', removed: 'href="/x"', reason: 'attribute_not_allowed' },
      ],
    });
  });

  it.each([
    ['javascript:alert(1)'],
    ['JavaScript:alert(1)'],
    ['jav&#x09;ascript:alert(1)'],
    ['jav&Tab;ascript:alert(1)'],
    ['java\nscript:alert(1)'],
    ['&#x20;&#1;javascript:alert(1)'],
    ['&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)'],
    ['javascript&colon;alert(1)'],
    ['data:text/html;base64,PHNjcmlwdD4='],
    ['vbscript:msgbox(1)'],
    ['ftp://example.com/'],
    ['file:///etc/passwd'],
  ])('removes the unsafe URL %s', (url) => {
    const { html, removed } = sanitizeHtml(`<a href="${url}">x</a>`);
    expect(html).toBe('<a>x</a>');
    expect(removed).toHaveLength(1);
    expect(removed[0]).toMatchObject({ path: 'a[1]', reason: 'unsafe_url' });
    expect(removed[0]?.removed).toMatch(/^href="/);
  });

  it.each([
    ['https://example.com/a'],
    ['HTTP://example.com/'],
    ['mailto:team@example.com'],
    ['tel:+441234567'],
    ['/relative/path'],
    ['page.html'],
    ['#section'],
    ['?page=2'],
    ['//cdn.example.com/x'],
    ['./javascript:alert(1)'],
  ])('keeps the URL %s', (url) => {
    expect(sanitizeHtml(`<a href="${url}">x</a>`).removed).toEqual([]);
  });

  it('checks src and cite as well as href', () => {
    expect(
      sanitizeHtml('<img src="data:image/png;base64,AAAA" alt="a"><q cite="javascript:x">q</q>'),
    ).toEqual({
      html: '<img alt="a"><q>q</q>',
      removed: [
        { path: 'img[1]', removed: 'src="data:image/png;base64,AAAA"', reason: 'unsafe_url' },
        { path: 'q[1]', removed: 'cite="javascript:x"', reason: 'unsafe_url' },
      ],
    });
  });

  it('shortens long values in the report', () => {
    const { removed } = sanitizeHtml(`<a href="javascript:${'x'.repeat(200)}">x</a>`);
    expect(removed[0]?.removed).toBe(`href="javascript:${'x'.repeat(46)}..."`);
  });

  it('keeps the protection markers on any element, with a known kind only', () => {
    const kept =
      '<p>Read our <a href="https://example.com/guide" data-service-protected="internal" data-service-id="il_3">plumbing guide</a> first.</p>' +
      '<a href="https://partner.example.org/" rel="noopener" data-service-protected="backlink" data-service-id="bl_12">partner</a>' +
      '<div data-service-protected="backlink" data-service-id="bl_13"><a href="https://b.example/">b</a></div>';
    expect(sanitizeHtml(kept)).toEqual({ html: kept, removed: [] });
    expect(sanitizeHtml('<a href="/x" data-service-protected="other">x</a>')).toEqual({
      html: '<a href="/x">x</a>',
      removed: [
        { path: 'a[1]', removed: 'data-service-protected="other"', reason: 'invalid_protection_marker' },
      ],
    });
  });
});

describe('sanitizeHtml: links that open another page', () => {
  it.each([
    ['<a href="/x" target="_blank" rel="opener">x</a>', 'rel="noopener noreferrer"', 'rel="opener"'],
    ['<a href="/x" target="_blank">x</a>', 'rel="noopener noreferrer"', 'rel=""'],
    [
      '<a href="/x" target="_self" rel="nofollow">x</a>',
      'rel="nofollow noopener noreferrer"',
      'rel="nofollow"',
    ],
    [
      '<a href="/x" target="_blank" rel="Opener NOFOLLOW noopener">x</a>',
      'rel="NOFOLLOW noopener noreferrer"',
      'rel="Opener NOFOLLOW noopener"',
    ],
    ['<a href="/x" rel="opener nofollow">x</a>', 'rel="nofollow"', 'rel="opener nofollow"'],
  ])('gives %s the rel it must have', (input, rel, had) => {
    const { html, removed } = sanitizeHtml(input);
    expect(html).toContain(rel);
    expect(removed).toEqual([{ path: 'a[1]', removed: had, reason: 'link_opener' }]);
    expect(sanitizeHtml(html)).toEqual({ html, removed: [] });
  });

  it.each([
    ['<a href="/x" target="_blank" rel="noopener noreferrer">x</a>'],
    ['<a href="/x" target="_blank" rel="NoReferrer  nofollow NOOPENER">x</a>'],
    ['<a href="/x" rel="nofollow">x</a>'],
    ['<a href="/x">x</a>'],
  ])('keeps %s as it is', (html) => {
    expect(sanitizeHtml(html)).toEqual({ html, removed: [] });
  });

  it('gives a protected link the same rel, and the protected-block check takes the link stored before as the same block', () => {
    const before =
      '<p><a href="https://partner.example.org/" target="_blank" data-service-protected="backlink" data-service-id="bl_1">partner</a></p>';
    const { html, removed } = sanitizeHtml(`${before}<p>More.</p>`);
    expect(html).toBe(
      '<p><a href="https://partner.example.org/" target="_blank" data-service-protected="backlink" data-service-id="bl_1" rel="noopener noreferrer">partner</a></p><p>More.</p>',
    );
    expect(removed).toEqual([{ path: 'p[1] > a[1]', removed: 'rel=""', reason: 'link_opener' }]);
    expect(checkProtectedBlocks(before, html)).toEqual({ ok: true });
    // Without an id, the id derived from the block is the same too.
    const unnamed = before.replace(' data-service-id="bl_1"', '');
    expect(checkProtectedBlocks(unnamed, sanitizeHtml(unnamed).html)).toEqual({ ok: true });
    // Its other tokens still count: dropping one is a rewrite.
    const nofollow = before.replace('target=', 'rel="nofollow" target=');
    expect(checkProtectedBlocks(nofollow, html)).toMatchObject({ ok: false });
  });
});

describe('sanitizeHtml: shapes the parser would restructure', () => {
  it('unwraps a link that unwrapping put inside another link', () => {
    expect(sanitizeHtml('<a href="/a"><marquee><a href="/b">x</a></marquee></a>')).toEqual({
      html: '<a href="/a">x</a>',
      removed: [
        { path: 'a[1] > marquee[1]', removed: '<marquee>', reason: 'element_not_allowed' },
        { path: 'a[1] > marquee[1] > a[1]', removed: '<a>', reason: 'invalid_nesting' },
      ],
    });
  });

  it('keeps a link in a table cell inside a link, which parses back the same', () => {
    const html = '<a href="/a"><table><tbody><tr><td><a href="/b">x</a></td></tr></tbody></table></a>';
    expect(sanitizeHtml(html)).toEqual({ html, removed: [] });
  });

  it('flattens blocks that unwrapping put inside a paragraph', () => {
    expect(sanitizeHtml('<p>a<marquee><div>b</div><ul><li>c</li></ul></marquee></p>').html).toBe(
      '<p>abc</p>',
    );
    expect(sanitizeHtml('<p>a<marquee><h2>b</h2><p>c</p></marquee></p>').html).toBe('<p>abc</p>');
  });

  it('keeps a table a parser closes the paragraph for as a sibling', () => {
    expect(sanitizeHtml('<p>a<table><tr><td>b</td></tr></table>').html).toBe(
      '<p>a</p><table><tbody><tr><td>b</td></tr></tbody></table>',
    );
  });

  it('unwraps a heading directly inside a heading, and list items inside list items', () => {
    expect(sanitizeHtml('<h1>a<font><h2>b</h2></font></h1>').html).toBe('<h1>ab</h1>');
    expect(sanitizeHtml('<ul><li>a<marquee><li>b</li></marquee></li></ul>').html).toBe(
      '<ul><li>ab</li></ul>',
    );
    expect(sanitizeHtml('<dl><dt>a<marquee><dd>b</dd></marquee></dt></dl>').html).toBe(
      '<dl><dt>ab</dt></dl>',
    );
  });

  it('keeps nesting the parser keeps', () => {
    const html =
      '<ul><li>a<ul><li>b</li></ul></li></ul><h1><span>x</span></h1><div><p>p</p><div>d</div></div>';
    expect(sanitizeHtml(html)).toEqual({ html, removed: [] });
  });

  it('drops table parts outside a table and text a table cannot hold', () => {
    expect(sanitizeHtml('<template><tr><td>x</td></tr></template><p>y</p>').html).toBe('<p>y</p>');
    expect(sanitizeHtml('<table><colgroup><col></colgroup><tr><td>x</td></tr></table>').html).toBe(
      '<table><tbody><tr><td>x</td></tr></tbody></table>',
    );
  });

  it('removes the leading newlines of a pre, which a parser would eat one by one', () => {
    const once = sanitizeHtml('<pre>\n\n\ncode\n</pre>').html;
    expect(once).toBe('<pre>code\n</pre>');
    expect(serialize(parseBody(once))).toBe(once);
  });

  it.each([
    ['<svg><p><style><img src=x onerror=alert(1)>', '<p></p>'],
    ['<math><mi><table><mglyph><style><img src=x onerror=alert(1)>', ''],
    ['<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">', '<p></p><img src="1">"&gt;'],
    ['<noscript><p title="</noscript><img src=x onerror=alert(1)>">', '<img src="x">"&gt;'],
    ['<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>', ''],
    ['<xmp><img src=x onerror=alert(1)></xmp>', '&lt;img src=x onerror=alert(1)&gt;'],
    ['<![CDATA[<img src=x onerror=alert(1)>]]>', ']]&gt;'],
  ])('neutralises the mutation-XSS shape %s', (html, expected) => {
    const out = sanitizeHtml(html).html;
    expect(out).toBe(expected);
    expect(violations(out)).toEqual([]);
  });
});

describe('sanitizeHtml: size', () => {
  it('walks very deep trees without recursion', () => {
    const deep = `${'<div><span>'.repeat(10_000)}x`;
    const { html } = sanitizeHtml(deep);
    expect(html.startsWith('<div><span><div>')).toBe(true);
    expect(html.length).toBe(deep.length - 1 + '</span></div>'.length * 10_000 + 1);
  });

  /** The JSON of a removed list, as the API answers it and the edit event stores it. */
  const jsonBytes = (removed: readonly SanitizedItem[]): number => Buffer.byteLength(JSON.stringify(removed));

  // Before the bound, each of these items carried its whole path: 100 000 nested unknown elements made
  // 100 000 items whose paths summed to 20 GB of text, which no answer or event can hold.
  it('lists at most 100 items of a deeply nested body, then how many more, and where the first of them was', () => {
    const { html, removed } = sanitizeFully('<q1>'.repeat(100_000));
    expect(html).toBe('');
    expect(removed).toHaveLength(REMOVED_LISTED_MAX + 1);
    expect(removed.slice(0, REMOVED_LISTED_MAX).every((item) => item.reason === 'element_not_allowed')).toBe(
      true,
    );
    expect(removed.at(-1)).toEqual({
      path: `q1[1] > q1[1] > q1[1] > …94… > q1[1] > q1[1] > q1[1] > q1[1]`,
      removed: '99900 more',
      reason: 'more_removed',
    });
    expect(jsonBytes(removed)).toBeLessThan(16 * 1024);
  }, 60_000);

  it('bounds the list of a deep mix of allowed, unknown and unsafe markup, and keeps its cleaned html a fixpoint', () => {
    const layer =
      '<div title="t"><q1><b onclick="x()"><font>t<a href="javascript:go()" target="_blank">l</a>' +
      `<${'x'.repeat(500)}><script>s()</script><!-- c --><section>`;
    const { html, removed } = sanitizeFully(layer.repeat(5_000));
    expect(removed).toHaveLength(REMOVED_LISTED_MAX + 1);
    expect(removed.at(-1)?.reason).toBe('more_removed');
    // Every path at most 8 steps and an elision, each step and value shortened to 60 characters.
    for (const item of removed) {
      expect(item.path.split(' > ').length).toBeLessThanOrEqual(PATH_STEPS_MAX + 1);
      expect(item.removed.length).toBeLessThanOrEqual(62);
    }
    expect(jsonBytes(removed)).toBeLessThan(128 * 1024);
    expect(
      html.startsWith('<div title="t"><b>t<a target="_blank" rel="noopener noreferrer">l</a><section>'),
    ).toBe(true);
    expect(sanitizeFully(html)).toEqual({ html, removed: [] });
  }, 60_000);

  it('lists up to 100 items as they are, and a 101st as one more', () => {
    const exactly = sanitizeFully('<x-a></x-a>'.repeat(REMOVED_LISTED_MAX));
    expect(exactly.removed).toHaveLength(REMOVED_LISTED_MAX);
    expect(exactly.removed.at(-1)).toEqual({
      path: 'x-a[100]',
      removed: '<x-a>',
      reason: 'element_not_allowed',
    });
    const oneMore = sanitizeFully('<x-a></x-a>'.repeat(REMOVED_LISTED_MAX + 1));
    expect(oneMore.html).toBe('');
    expect(oneMore.removed).toHaveLength(REMOVED_LISTED_MAX + 1);
    expect(oneMore.removed.at(-1)).toEqual({ path: 'x-a[101]', removed: '1 more', reason: 'more_removed' });
  });

  it('writes a path of up to 8 steps whole, and a longer one as its first 3 and last 4 steps around …N…', () => {
    const nested = (depth: number): string =>
      `<div>${'<q1>'.repeat(depth - 2)}<a href="/x" onclick="go()">x</a>`;
    expect(sanitizeFully(nested(8)).removed.at(-1)).toEqual({
      path: 'div[1] > q1[1] > q1[1] > q1[1] > q1[1] > q1[1] > q1[1] > a[1]',
      removed: 'onclick="go()"',
      reason: 'event_handler',
    });
    expect(sanitizeFully(nested(9)).removed.at(-1)?.path).toBe(
      'div[1] > q1[1] > q1[1] > …2… > q1[1] > q1[1] > q1[1] > a[1]',
    );
    expect(sanitizeFully(nested(14)).removed.at(-1)?.path).toBe(
      'div[1] > q1[1] > q1[1] > …7… > q1[1] > q1[1] > q1[1] > a[1]',
    );
    // The ranks stay those of each step, elided or not.
    expect(sanitizeFully(`<p></p><p>${'<i></i><i>'.repeat(9)}<b onclick="x">b</b>`).removed).toEqual([
      {
        path: 'p[2] > i[2] > i[2] > …4… > i[2] > i[2] > i[2] > b[1]',
        removed: 'onclick="x"',
        reason: 'event_handler',
      },
    ]);
  });

  it('shortens a long element or attribute name in a path and in what was removed', () => {
    const name = `x-${'y'.repeat(10_000)}`;
    const shown = `${name.slice(0, 57)}...`;
    expect(sanitizeFully(`<${name}><p onclick="x" ${name}="v">p</p>`)).toEqual({
      html: '<p>p</p>',
      removed: [
        { path: `${shown}[1]`, removed: `<${shown}>`, reason: 'element_not_allowed' },
        { path: `${shown}[1] > p[1]`, removed: 'onclick="x"', reason: 'event_handler' },
        { path: `${shown}[1] > p[1]`, removed: `${shown}="v"`, reason: 'attribute_not_allowed' },
      ],
    });
  });
});
