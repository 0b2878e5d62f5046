import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  bodyFacts,
  checkProtectedBlocks,
  extractProtectedLinks,
  factsOf,
} from '../../../domain/html/facts.ts';
import { sanitizeHtml } from '../../../domain/html/sanitize.ts';
import { parseBody } from '../../../domain/html/tree.ts';
import { createHtmlMemory } from '../../../infra/html-memory.ts';

const internal =
  '<a href="https://example.com/guide" data-service-protected="internal" data-service-id="il_3">plumbing guide</a>';
const backlink =
  '<a href="https://partner.example.org/" rel="noopener" data-service-protected="backlink" data-service-id="bl_12">partner</a>';
const stored = `<h2>Leaks</h2><p>Read our ${internal} first.</p><p>Thanks to our ${backlink}.</p>`;

describe('extractProtectedLinks', () => {
  it('lists the protected links in document order', () => {
    expect(extractProtectedLinks(stored)).toEqual([
      { id: 'il_3', kind: 'internal', href: 'https://example.com/guide', text: 'plumbing guide' },
      { id: 'bl_12', kind: 'backlink', href: 'https://partner.example.org/', text: 'partner' },
    ]);
  });

  it('takes the href of a wrapper from its first link, and its whole text', () => {
    const html =
      '<p data-service-protected="backlink" data-service-id="bl_1">By <b>Acme</b>: <a>no href</a> <a href="https://acme.example/">Acme tools</a> <a href="https://b.example/">b</a></p>';
    expect(extractProtectedLinks(html)).toEqual([
      { id: 'bl_1', kind: 'backlink', href: 'https://acme.example/', text: 'By Acme: no href Acme tools b' },
    ]);
  });

  it('lists a protected element nested in another one after it', () => {
    const html = `<div data-service-protected="internal" data-service-id="il_1">See ${backlink}</div>`;
    expect(extractProtectedLinks(html).map((link) => link.id)).toEqual(['il_1', 'bl_12']);
  });

  it('decodes entities in href and text', () => {
    const html =
      '<a href="/a?x=1&amp;y=2" data-service-protected="internal" data-service-id="il_1">R&amp;D</a>';
    expect(extractProtectedLinks(html)).toEqual([
      { id: 'il_1', kind: 'internal', href: '/a?x=1&y=2', text: 'R&D' },
    ]);
  });

  it('derives a stable id from the content when there is no data-service-id', () => {
    const html = '<a href="https://p.example/" data-service-protected="backlink">p</a>';
    const [link] = extractProtectedLinks(html);
    expect(link?.id).toMatch(/^p_[0-9a-f]{8}$/);
    expect(extractProtectedLinks(`<p>moved <b>${html}</b></p>`)[0]?.id).toBe(link?.id);
    expect(extractProtectedLinks(html.replace('>p<', '>q<'))[0]?.id).not.toBe(link?.id);
  });

  it('leaves out markers of an unknown kind', () => {
    expect(
      extractProtectedLinks('<a href="/x" data-service-protected="other" data-service-id="x">x</a>'),
    ).toEqual([]);
  });

  it('finds nothing in a body without markers', () => {
    expect(extractProtectedLinks('<p>Just <a href="/x">a link</a>.</p>')).toEqual([]);
    expect(extractProtectedLinks('')).toEqual([]);
  });
});

describe('checkProtectedBlocks: examples', () => {
  it('accepts the same body, and a body where the blocks moved and the text around them changed', () => {
    expect(checkProtectedBlocks(stored, stored)).toEqual({ ok: true });
    const moved = `<p>New intro thanks to ${backlink}.</p><ul><li>Also ${internal}</li></ul>`;
    expect(checkProtectedBlocks(stored, moved)).toEqual({ ok: true });
  });

  it('ignores how the markup is written: attribute order, quotes, entities', () => {
    const rewrittenSource =
      '<p><a data-service-id=bl_12 data-service-protected=\'backlink\' rel=noopener href="https://partner.example.org/">part&#110;er</a></p>' +
      '<a data-service-protected=internal href=\'https://example.com/guide\' data-service-id="il_3">plumbing&#32;guide</a>';
    expect(checkProtectedBlocks(stored, rewrittenSource)).toEqual({ ok: true });
  });

  it('accepts any body when the current one has no protected blocks, as long as it adds none', () => {
    expect(checkProtectedBlocks('<p>a</p>', '<p>b</p>')).toEqual({ ok: true });
  });

  it('reports a removed block', () => {
    const result = checkProtectedBlocks(stored, `<p>Read our ${internal} first.</p>`);
    expect(result).toMatchObject({ ok: false, errors: [{ id: 'bl_12', change: 'removed' }] });
  });

  it('reports a block kept only inside a comment as removed', () => {
    expect(checkProtectedBlocks(stored, `<p>${internal}</p><!-- ${backlink} -->`)).toMatchObject({
      ok: false,
      errors: [{ id: 'bl_12', change: 'removed' }],
    });
  });

  it.each([
    ['its text', backlink.replace('>partner<', '>cheap pills<')],
    ['its href', backlink.replace('partner.example.org', 'evil.example')],
    ['an attribute', backlink.replace('rel="noopener"', 'rel="nofollow"')],
    ['an added attribute', backlink.replace('<a ', '<a target="_blank" ')],
    ['a dropped attribute', backlink.replace(' rel="noopener"', '')],
    ['its kind', backlink.replace('"backlink"', '"internal"')],
    ['its tag', backlink.replace('<a ', '<span ').replace('</a>', '</span>')],
    ['its inner markup', backlink.replace('>partner<', '><b>partner</b><')],
  ])('reports a block whose %s changed as rewritten', (_, changed) => {
    const result = checkProtectedBlocks(stored, `<p>${internal}</p><p>${changed}</p>`);
    expect(result).toMatchObject({ ok: false, errors: [{ id: 'bl_12', change: 'rewritten' }] });
  });

  it('reports a new protected element, and a copy of an existing one, as forged', () => {
    const added =
      '<a href="https://me.example/" data-service-protected="backlink" data-service-id="bl_99">me</a>';
    expect(checkProtectedBlocks(stored, stored + added)).toMatchObject({
      ok: false,
      errors: [{ id: 'bl_99', change: 'forged' }],
    });
    expect(checkProtectedBlocks(stored, stored + backlink)).toMatchObject({
      ok: false,
      errors: [{ id: 'bl_12', change: 'forged' }],
    });
    const unnamed = '<span data-service-protected="internal">mine</span>';
    const result = checkProtectedBlocks(stored, stored + unnamed);
    expect(result.ok ? [] : result.errors.map((error) => error.change)).toEqual(['forged']);
  });

  it('reports a changed id as the old one removed and the new one forged', () => {
    const result = checkProtectedBlocks(
      stored,
      `<p>${internal}</p><p>${backlink.replace('bl_12', 'bl_13')}</p>`,
    );
    expect(result).toMatchObject({
      ok: false,
      errors: [
        { id: 'bl_12', change: 'removed' },
        { id: 'bl_13', change: 'forged' },
      ],
    });
  });

  it('sorts the errors by id, then change, and sums them up', () => {
    const current = `${stored}<a href="/z" data-service-protected="internal" data-service-id="il_1">z</a>`;
    const next = `${internal.replace('guide<', 'manual<')}${backlink}${backlink.replace('bl_12', 'bl_0')}`;
    const result = checkProtectedBlocks(current, next);
    expect(result).toEqual({
      ok: false,
      errors: [
        { id: 'bl_0', change: 'forged' },
        { id: 'il_1', change: 'removed' },
        { id: 'il_3', change: 'rewritten' },
      ],
      summary: expect.stringContaining('bl_0 forged, il_1 removed, il_3 rewritten'),
    });
  });

  it('checks a protected wrapper and the protected link inside it each on its own', () => {
    const current = `<div data-service-protected="internal" data-service-id="il_1">See ${backlink}</div>`;
    const next = `<div data-service-protected="internal" data-service-id="il_1">See ${backlink.replace('noopener', 'nofollow')}</div>`;
    expect(checkProtectedBlocks(current, next)).toMatchObject({
      ok: false,
      errors: [
        { id: 'bl_12', change: 'rewritten' },
        { id: 'il_1', change: 'rewritten' },
      ],
    });
  });

  it('counts duplicated ids one to one', () => {
    const twice = `<p>${backlink}</p><p>${backlink}</p>`;
    expect(checkProtectedBlocks(twice, twice)).toEqual({ ok: true });
    expect(checkProtectedBlocks(twice, backlink)).toMatchObject({
      ok: false,
      errors: [{ id: 'bl_12', change: 'removed' }],
    });
  });
});

// Properties: a body of random paragraphs around N protected blocks.

type Block = {
  id: string;
  kind: 'backlink' | 'internal';
  href: string;
  text: string;
  rel: string | null;
  wrapper: boolean;
};

const word = fc.constantFrom(
  'plumbing',
  'guide',
  'the',
  'water',
  'pipes',
  'fix',
  'leak',
  'our',
  'R&D',
  'a<b',
  'café',
);
const words = fc.array(word, { minLength: 1, maxLength: 5 }).map((list) => list.join(' '));
const href = fc.constantFrom(
  'https://partner.example.org/',
  'https://example.com/guide?a=1&b=2',
  '/articles/pipes',
  'https://shop.example/x',
);
const blocks = fc
  .array(
    fc.record({
      kind: fc.constantFrom('backlink' as const, 'internal' as const),
      href,
      text: words,
      rel: fc.option(fc.constantFrom('noopener', 'nofollow', 'sponsored'), { nil: null }),
      wrapper: fc.boolean(),
    }),
    { minLength: 1, maxLength: 5 },
  )
  .map((list): Block[] =>
    list.map((block, index) => ({ ...block, id: `${block.kind === 'backlink' ? 'bl' : 'il'}_${index + 1}` })),
  );

function escapeHtml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('"', '&quot;');
}

/** A block as markup; `style` varies the attribute order and quoting, which must not matter. */
function render(block: Block, style = 0): string {
  const markers = [`data-service-protected="${block.kind}"`, `data-service-id="${block.id}"`];
  const link = [`href="${escapeHtml(block.href)}"`, ...(block.rel === null ? [] : [`rel="${block.rel}"`])];
  const order = (attributes: string[]): string => {
    const rotated = [
      ...attributes.slice(style % attributes.length),
      ...attributes.slice(0, style % attributes.length),
    ];
    return rotated.map((attribute) => (style % 2 === 1 ? attribute.replace(/"/g, "'") : attribute)).join(' ');
  };
  const text = escapeHtml(block.text);
  return block.wrapper
    ? `<span ${order(markers)}>From <a ${link.join(' ')}>${text}</a></span>`
    : `<a ${order([...link, ...markers])}>${text}</a>`;
}

const CONTAINERS = [
  (inner: string, filler: string) => `<p>${filler} ${inner} ${filler}.</p>`,
  (inner: string, filler: string) => `<ul><li>${filler}</li><li>${inner}</li></ul>`,
  (inner: string, filler: string) => `<blockquote><p>${inner}</p>${filler}</blockquote>`,
  (inner: string, filler: string) =>
    `<table><tr><td>${filler}</td><td><strong>${inner}</strong></td></tr></table>`,
  (inner: string, filler: string) => `${inner}<h3>${filler}</h3>`,
];

type Layout = { order: number[]; containers: number[]; fillers: string[]; styles: number[] };

/** One block rendered otherwise (altered or removed) in a body. */
type Override = { id: string; html: (style: number) => string };

function body(list: readonly Block[], layout: Layout, override?: Override): string {
  const parts = layout.order.map((position, index) => {
    const block = list[position];
    const container = CONTAINERS[(layout.containers[index] ?? 0) % CONTAINERS.length];
    if (block === undefined || container === undefined) return '';
    const style = layout.styles[index] ?? 0;
    const inner = block.id === override?.id ? override.html(style) : render(block, style);
    return container(inner, escapeHtml(layout.fillers[index] ?? ''));
  });
  return `<h2>${escapeHtml(layout.fillers.at(-1) ?? '')}</h2>${parts.join('<p>between</p>')}`;
}

function layoutFor(list: readonly Block[]): fc.Arbitrary<Layout> {
  const n = list.length;
  return fc.record({
    order: fc.shuffledSubarray([...list.keys()], { minLength: n, maxLength: n }),
    containers: fc.array(fc.nat(CONTAINERS.length - 1), { minLength: n, maxLength: n }),
    fillers: fc.array(words, { minLength: n + 1, maxLength: n + 1 }),
    styles: fc.array(fc.nat(5), { minLength: n, maxLength: n }),
  });
}

const scenario = blocks.chain((list) =>
  fc.record({
    list: fc.constant(list),
    current: layoutFor(list),
    next: layoutFor(list),
    target: fc.nat(list.length - 1),
  }),
);

const MUTATIONS = ['remove', 'text', 'href', 'rel', 'kind', 'tag', 'inner', 'attribute'] as const;
type Mutation = (typeof MUTATIONS)[number];

function mutate(
  block: Block,
  mutation: Mutation,
): { html: (style: number) => string; change: 'removed' | 'rewritten' } {
  switch (mutation) {
    case 'remove':
      return { html: () => escapeHtml(block.text), change: 'removed' };
    case 'text':
      return { html: (style) => render({ ...block, text: `${block.text} now` }, style), change: 'rewritten' };
    case 'href':
      return {
        html: (style) => render({ ...block, href: `${block.href}#changed` }, style),
        change: 'rewritten',
      };
    case 'rel':
      return {
        html: (style) => render({ ...block, rel: block.rel === 'nofollow' ? 'noopener' : 'nofollow' }, style),
        change: 'rewritten',
      };
    case 'kind':
      return {
        html: (style) =>
          render({ ...block, kind: block.kind === 'backlink' ? 'internal' : 'backlink' }, style),
        change: 'rewritten',
      };
    case 'tag':
      return {
        html: (style) =>
          render(block, style)
            .replace(/^<(a|span) /, '<em ')
            .replace(/<\/(a|span)>$/, '</em>'),
        change: 'rewritten',
      };
    case 'inner':
      return {
        html: (style) => render(block, style).replace(/>([^<>]*)<\/(a|span)>$/, '><b>$1</b></$2>'),
        change: 'rewritten',
      };
    case 'attribute':
      return {
        html: (style) => render(block, style).replace(/^<(a|span) /, '<$1 title="x" '),
        change: 'rewritten',
      };
    default: {
      const unknown: never = mutation;
      throw new Error(`unknown mutation ${String(unknown)}`);
    }
  }
}

const runs = { numRuns: Number(process.env.HTML_PROPERTY_RUNS ?? 250) };

describe('checkProtectedBlocks: properties', () => {
  it('always accepts the blocks intact, moved, reordered, re-quoted, with the text around them changed', () => {
    fc.assert(
      fc.property(scenario, ({ list, current, next }) => {
        expect(checkProtectedBlocks(body(list, current), body(list, next))).toEqual({ ok: true });
      }),
      runs,
    );
  });

  it('survives the sanitiser: a sanitised body keeps every block, and sanitising again changes no byte', () => {
    fc.assert(
      fc.property(scenario, ({ list, current }) => {
        const html = body(list, current);
        const memory = createHtmlMemory();
        const sanitised = sanitizeHtml(html, memory);
        expect(sanitised.removed).toEqual([]);
        expect(checkProtectedBlocks(html, sanitised.html, memory)).toEqual({ ok: true });
        expect(sanitizeHtml(sanitised.html, memory)).toEqual({ html: sanitised.html, removed: [] });
        expect(bodyFacts(sanitised.html, memory)).toEqual(factsOf(parseBody(sanitised.html)));
      }),
      runs,
    );
  });

  it('extracts every block, in document order', () => {
    fc.assert(
      fc.property(scenario, ({ list, current }) => {
        const expected = current.order.map((position) => {
          const { id, kind, href, text, wrapper } = list[position] as Block;
          return { id, kind, href, text: wrapper ? `From ${text}` : text };
        });
        expect(extractProtectedLinks(body(list, current))).toEqual(expected);
      }),
      runs,
    );
  });

  it('never accepts one block removed or altered, and names it with the right change', () => {
    fc.assert(
      fc.property(scenario, fc.constantFrom(...MUTATIONS), ({ list, current, next, target }, mutation) => {
        const victim = list[target] as Block;
        const { html, change } = mutate(victim, mutation);
        const result = checkProtectedBlocks(body(list, current), body(list, next, { id: victim.id, html }));
        expect(result).toMatchObject({ ok: false, errors: [{ id: victim.id, change }] });
        expect(result.ok ? 0 : result.errors.length).toBe(1);
      }),
      runs,
    );
  });

  it('never accepts a forged block: a new id or a second copy of an existing one', () => {
    fc.assert(
      fc.property(scenario, fc.boolean(), ({ list, current, next, target }, copy) => {
        const victim = list[target] as Block;
        const forged = copy ? victim : { ...victim, id: `${victim.id}_forged` };
        const result = checkProtectedBlocks(
          body(list, current),
          `${body(list, next)}<p>${render(forged)}</p>`,
        );
        expect(result).toEqual({
          ok: false,
          errors: [{ id: forged.id, change: 'forged' }],
          summary: expect.stringContaining(forged.id),
        });
      }),
      runs,
    );
  });
});
