import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkProtectedBlocks } from '../../../domain/html/facts.ts';
import { restoreProtectedBlocks } from '../../../domain/html/protected-repair.ts';
import { sanitizeHtml } from '../../../domain/html/sanitize.ts';
import { textContent } from '../../../domain/html/text.ts';

const internal =
  '<a href="https://example.com/guide" data-service-protected="internal" data-service-id="il_3">plumbing guide</a>';
const backlink =
  '<a href="https://partner.example.org/" rel="noopener noreferrer" data-service-protected="backlink" data-service-id="bl_12">partner</a>';
const current = `<h2>Leaks</h2><p>Read our ${internal} first.</p><p>Thanks to our ${backlink}.</p>`;

/** The repair, as the editor stores it: sanitised, then checked as every edit is. */
function repaired(draft: string, from = current): { html: string; ok: boolean } {
  const html = sanitizeHtml(restoreProtectedBlocks(from, draft)).html;
  return { html, ok: checkProtectedBlocks(from, html).ok };
}

describe('restoreProtectedBlocks', () => {
  it('leaves a draft that keeps every block as it is', () => {
    const draft = `<p>New start.</p>${current}`;
    expect(restoreProtectedBlocks(current, draft)).toBe(draft);
  });

  it('puts a removed link back where the text around it still is', () => {
    const draft = '<h2>Leaks</h2><p>Read our  first.</p><p>Mine.</p><p>Thanks to our .</p>';
    const out = repaired(draft);
    expect(out.ok).toBe(true);
    expect(out.html).toBe(
      `<h2>Leaks</h2><p>Read our ${internal} first.</p><p>Mine.</p><p>Thanks to our ${backlink}.</p>`,
    );
  });

  it('puts a link back on its own words where the person took the link off them', () => {
    const out = repaired('<h2>Leaks</h2><p>Read our plumbing guide first.</p><p>Thanks to our partner.</p>');
    expect(out.ok).toBe(true);
    expect(out.html).toBe(current);
  });

  it('finds the place by the words after a link when those before it are gone', () => {
    const from = `<p>Gone words, ${internal} first of all.</p>`;
    const out = repaired('<p>Start: first of all.</p>', from);
    expect(out.ok).toBe(true);
    // A space before it, as it had one: "Start: plumbing guide first of all", no word joined.
    expect(out.html).toBe(`<p>Start: ${internal} first of all.</p>`);
  });

  it('puts a removed link back at the end, in a paragraph, when its surroundings are rewritten too', () => {
    const draft = '<h2>Floods</h2><p>Something else entirely.</p>';
    const out = repaired(draft);
    expect(out.ok).toBe(true);
    expect(out.html).toBe(`${draft}<p>${internal}</p><p>${backlink}</p>`);
  });

  it('never puts a link back inside another link: the person’s link stays whole', () => {
    const mine = '<a href="https://mine.example/">Read our guide</a>';
    const out = repaired(`<h2>Leaks</h2><p>${mine} first.</p><p>Thanks to our ${backlink}.</p>`);
    expect(out.ok).toBe(true);
    expect(out.html).toBe(`<h2>Leaks</h2><p>${mine} ${internal} first.</p><p>Thanks to our ${backlink}.</p>`);
  });

  it('keeps the spacing the link had: a space the draft lost next to it comes back, none is added where it had none', () => {
    const advice =
      '<a href="https://example.com/advice" data-service-protected="internal" data-service-id="il_9">advice</a>';
    const from = `<p>Good plumbing ${advice} is worth paying for.</p><p>Ask for ${advice.replace('il_9', 'il_8')}, then compare.</p>`;
    const second = advice.replace('il_9', 'il_8');
    // The link and one space taken out (a textarea edit, or a rich editor that collapsed the two).
    const draft = '<p>Good plumbing is worth paying for.</p><p>Ask for, then compare.</p>';
    const out = repaired(draft, from);
    expect(out.ok).toBe(true);
    expect(out.html).toBe(
      `<p>Good plumbing ${advice} is worth paying for.</p><p>Ask for ${second}, then compare.</p>`,
    );
    expect(textContent(out.html)).toBe(
      'Good plumbing advice is worth paying for.\nAsk for advice, then compare.',
    );
    // Both spaces left in the draft: the link goes between them, nothing added.
    const both = repaired('<p>Good plumbing  is worth paying for.</p><p>Ask for , then compare.</p>', from);
    expect(both.html).toBe(
      `<p>Good plumbing ${advice} is worth paying for.</p><p>Ask for ${second}, then compare.</p>`,
    );
    // Found by the words after it: the space before it comes back too.
    const after = repaired(
      '<p>Fine plumbing is worth paying for.</p>',
      `<p>Good plumbing ${advice} is worth paying for.</p>`,
    );
    expect(after.html).toBe(`<p>Fine plumbing ${advice} is worth paying for.</p>`);
  });

  it('puts a changed block back in its place', () => {
    const changed = internal.replace('plumbing guide', 'my guide');
    const draft = `<p>Read our ${changed} first.</p><p>Thanks to our ${backlink}.</p>`;
    const out = repaired(draft);
    expect(out.ok).toBe(true);
    expect(out.html).toBe(`<p>Read our ${internal} first.</p><p>Thanks to our ${backlink}.</p>`);
  });

  it('makes a copy or a forgery an ordinary link, the original kept', () => {
    const forged =
      '<a href="https://forged.example/" data-service-protected="backlink" data-service-id="bl_99">forged</a>';
    const draft = `${current}<p>Again: ${internal} and ${forged}.</p>`;
    const out = repaired(draft);
    expect(out.ok).toBe(true);
    expect(out.html).toBe(
      `${current}<p>Again: <a href="https://example.com/guide">plumbing guide</a> and <a href="https://forged.example/">forged</a>.</p>`,
    );
  });

  // The invariant: whatever the draft did to the blocks, the repair is an edit the domain accepts,
  // and every word the person wrote outside the blocks is still there, in order.
  it('always yields a body the edit accepts, keeping the other text', () => {
    const word = fc.stringMatching(/^[a-z]{1,8}$/);
    const block = fc.record({
      id: fc.integer({ min: 1, max: 6 }),
      kind: fc.constantFrom('backlink', 'internal'),
      text: word,
    });
    const markup = (b: { id: number; kind: string; text: string }): string =>
      `<a href="https://x.example/${b.id}" data-service-protected="${b.kind}" data-service-id="p_${b.id}">${b.text}</a>`;
    // A draft's piece: the person's words, or what they did to a block (kept, changed, copied, forged).
    // The person's words include those around the blocks in the current body, so that a removed
    // block sometimes finds its place again in the middle of the text (next to one of them).
    const piece = fc.oneof(
      word.map((w) => ({ words: w, html: w })),
      fc.constantFrom('Start here', 'and then', 'the end.').map((w) => ({ words: w, html: w })),
      fc
        .constantFrom('Start here', 'and then')
        .map((w) => ({ words: w, html: `<a href="https://mine.example/">${w}</a>` })),
      fc.record({ n: fc.nat(5), change: fc.constantFrom('keep', 'text', 'href', 'marker') }),
      block.map((b) => ({ forged: b })),
    );
    fc.assert(
      fc.property(
        fc.uniqueArray(block, { selector: (b) => b.id, maxLength: 4 }),
        fc.array(fc.array(piece, { maxLength: 6 }), { maxLength: 5 }),
        (blocks, paragraphs) => {
          const currentBody = `<p>Start here ${blocks.map(markup).join(' and then ')} the end.</p>`;
          const written: string[] = [];
          const draft = paragraphs
            .map((pieces) => {
              const parts = pieces.map((p) => {
                if ('words' in p) {
                  written.push(p.words);
                  return p.html;
                }
                if ('forged' in p) return markup({ ...p.forged, id: p.forged.id + 10 });
                const b = blocks[p.n % Math.max(1, blocks.length)];
                if (!b) return '';
                if (p.change === 'text') return markup({ ...b, text: `${b.text}x` });
                if (p.change === 'href') return markup(b).replace('x.example', 'y.example');
                if (p.change === 'marker') return markup(b).replace(`"${b.kind}"`, '"internal" title="t"');
                return markup(b);
              });
              return `<p>${parts.join(' ')}</p>`;
            })
            .join('');
          const out = repaired(draft, currentBody);
          expect(out.ok).toBe(true);
          const text = textContent(out.html);
          let at = 0;
          for (const w of written) {
            const found = text.indexOf(w, at);
            expect(found).toBeGreaterThanOrEqual(0);
            at = found + w.length;
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  // Whitespace next to a link, in the body or the draft, is what keeps two words apart: whatever the
  // draft did to the links and to the spaces around them, every word of the repaired text (its runs
  // of letters, tags stripped) is a word of the body or of the draft, or part of one (a link moved to
  // the end of the body leaves the rest of its word behind), so that no two words are joined that
  // were apart in both.
  it('never joins two words around a link put back', () => {
    const word = fc.stringMatching(/^[a-z]{2,7}$/);
    const space = fc.constantFrom(' ', '  ', '\n', ' \n ');
    const item = fc.oneof(
      { weight: 3, arbitrary: word.map((w) => ({ word: w })) },
      {
        weight: 2,
        arbitrary: fc.record({
          text: fc.oneof(
            word,
            fc.tuple(word, word).map(([a, b]) => `${a} ${b}`),
          ),
          // What follows the link without a space: nothing, or punctuation.
          tail: fc.constantFrom('', '', '.', ','),
          // What the draft did to it: kept, taken out, left as its own words, its address changed.
          action: fc.constantFrom('keep', 'remove', 'remove', 'words', 'href'),
        }),
      },
    );
    // Each separator in the body, and in the draft: the same, another whitespace, or none.
    const separator = fc.record({ base: space, draft: fc.oneof(fc.constant(null), space, fc.constant('')) });
    const paragraph = fc.array(fc.tuple(item, separator), { minLength: 1, maxLength: 8 });
    fc.assert(
      fc.property(fc.array(paragraph, { minLength: 1, maxLength: 3 }), (paragraphs) => {
        let n = 0;
        const link = (text: string, host = 'x.example'): string =>
          `<a href="https://${host}/${n}" data-service-protected="internal" data-service-id="p_${n}">${text}</a>`;
        const base: string[] = [];
        const draft: string[] = [];
        for (const items of paragraphs) {
          let b = '';
          let d = '';
          items.forEach(([it, sep], i) => {
            if (i > 0) {
              b += sep.base;
              d += sep.draft ?? sep.base;
            }
            if ('word' in it) {
              b += it.word;
              d += it.word;
              return;
            }
            n += 1;
            b += link(it.text) + it.tail;
            const kept = {
              keep: link(it.text),
              remove: '',
              words: it.text,
              href: link(it.text, 'y.example'),
            };
            d += kept[it.action] + it.tail;
          });
          base.push(`<p>${b}</p>`);
          draft.push(`<p>${d}</p>`);
        }
        const from = base.join('');
        const sent = draft.join('');
        const out = repaired(sent, from);
        expect(out.ok).toBe(true);
        const words = (html: string): string[] =>
          textContent(html)
            .split(/[^a-z]+/)
            .filter(Boolean);
        const known = [...words(from), ...words(sent)];
        for (const w of words(out.html)) {
          expect(
            known.some((k) => k.includes(w)),
            `"${w}" in ${out.html}`,
          ).toBe(true);
        }
      }),
      { numRuns: 500 },
    );
  });
});
