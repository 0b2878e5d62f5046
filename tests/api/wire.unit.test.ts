import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { articleJson, articleOut, changeJson } from '../../apps/application/articles.ts';
import { rfc3339 } from '../../apps/application/contract.ts';

describe('rfc3339', () => {
  it('writes UTC to the second, as CONTRACT does', () => {
    expect(rfc3339(new Date('2026-11-02T09:30:00.000Z'))).toBe('2026-11-02T09:30:00Z');
    expect(rfc3339(new Date('2026-11-02T11:30:59.999+02:00'))).toBe('2026-11-02T09:30:59Z');
  });

  it('is the ISO form without milliseconds, for any date', () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date('1970-01-01'), max: new Date('9999-12-31'), noInvalidDate: true }),
        (d) => {
          expect(rfc3339(d)).toBe(d.toISOString().replace(/\.\d{3}Z$/, 'Z'));
        },
      ),
    );
  });
});

describe('articleJson', () => {
  const text = fc.string({ unit: 'binary', maxLength: 40 });
  const links = fc.array(
    fc.record({
      kind: fc.constantFrom('backlink' as const, 'internal' as const),
      id: text,
      href: text,
      text,
    }),
    { maxLength: 3 },
  );
  const row = fc.record({
    id: text,
    site_id: text,
    title: text,
    url: text,
    status: fc.constantFrom(
      'draft' as const,
      'scheduled' as const,
      'published' as const,
      'archived' as const,
    ),
    published_at: fc.option(fc.date({ noInvalidDate: true })),
    target_keyword: fc.option(text),
    word_count: fc.nat(),
    featured_image: fc.option(fc.record({ url: text, alt: text, width: fc.nat(), height: fc.nat() })),
    revision: fc.integer({ min: 1 }),
    updated_at: fc.date({ noInvalidDate: true }),
    body: fc.string({ unit: 'binary', maxLength: 300 }),
    protected_links: fc.option(links),
  });

  it('writes what JSON.stringify writes of the article, from the body as stored JSON text', () => {
    fc.assert(
      fc.property(row, ({ body, ...rest }) => {
        const written = articleJson({ ...rest, body_json: JSON.stringify(body) });
        expect(written).toBe(JSON.stringify(articleOut({ ...rest, body })));
      }),
    );
  });

  it('changeJson writes what JSON.stringify writes of a change, the body from the given text', () => {
    const sanitized = fc.array(
      fc.record({
        path: text,
        removed: text,
        reason: fc.constantFrom('comment' as const, 'unsafe_url' as const),
      }),
      { maxLength: 3 },
    );
    fc.assert(
      fc.property(row, fc.boolean(), sanitized, ({ body, ...rest }, changed, items) => {
        const change = { ...articleOut({ ...rest, body }), changed, sanitized: items };
        expect(changeJson(change, (b) => JSON.stringify(b))).toBe(JSON.stringify(change));
      }),
    );
  });

  it('finds the links in the body of a row stored without them', () => {
    const body =
      '<p><a href="https://x.example/" data-service-protected="backlink" data-service-id="bl_1">x</a></p>';
    const rest = {
      id: 'art_1',
      site_id: 'site_1',
      title: 'T',
      url: 'https://x.example/t',
      status: 'published' as const,
      published_at: null,
      target_keyword: null,
      word_count: 1,
      featured_image: null,
      revision: 1,
      updated_at: new Date('2026-11-02T09:30:00Z'),
      protected_links: null,
    };
    const written = JSON.parse(articleJson({ ...rest, body_json: JSON.stringify(body) }));
    expect(written.protected_links).toHaveLength(1);
    expect(written).toEqual(JSON.parse(JSON.stringify(articleOut({ ...rest, body }))));
  });
});
