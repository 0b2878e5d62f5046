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
    expect(out.html).toBe(`<p>Start:${internal} first of all.</p>`);
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
    expect(out.html).toBe(`<h2>Leaks</h2><p>${mine}${internal} first.</p><p>Thanks to our ${backlink}.</p>`);
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
});
