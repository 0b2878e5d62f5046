import { describe, expect, it } from 'vitest';
import { bodyFacts, factsOf } from '../../domain/html/facts.ts';
import { sanitizeFully, sanitizeHtml } from '../../domain/html/sanitize.ts';
import { parseBody } from '../../domain/html/tree.ts';
import { createHtmlMemory } from '../../infra/html-memory.ts';

const noFacts = { words: 0, protectedLinks: [], protectedForms: new Map() };
const body = (n: number, length: number): string => `${n}`.padEnd(length, 'x');

describe('the html memory', () => {
  it('misses what it was never given, and hits what it was', () => {
    const memory = createHtmlMemory();
    expect(memory.facts('<p>a</p>')).toBeUndefined();
    expect(memory.layout('<p>a</p>')).toBeUndefined();
    expect(memory.takeSanitized('<p>a</p>')).toBeUndefined();
    const facts = factsOf(parseBody('<p>a</p>'));
    memory.rememberFacts('<p>a</p>', facts);
    expect(memory.facts('<p>a</p>')).toBe(facts);
    expect(memory.size).toBe('<p>a</p>'.length);
  });

  it('hands out a result worked out ahead once', () => {
    const memory = createHtmlMemory();
    const result = { html: '<p>a</p>', removed: [] };
    memory.rememberSanitized('<p onclick="x()">a</p>', result);
    expect(memory.isSanitizedAhead('<p onclick="x()">a</p>')).toBe(true);
    expect(memory.takeSanitized('<p onclick="x()">a</p>')).toBe(result);
    expect(memory.isSanitizedAhead('<p onclick="x()">a</p>')).toBe(false);
    expect(memory.takeSanitized('<p onclick="x()">a</p>')).toBeUndefined();
    expect(memory.size).toBe(0);
  });

  it('counts bytes as the strings it holds, and forgets the least recently used first when over its size', () => {
    const memory = createHtmlMemory({ maxBytes: 1000 });
    for (let n = 0; n < 4; n++) memory.rememberFacts(body(n, 300), noFacts);
    // 4 x 300 > 1000: the first went.
    expect(memory.size).toBe(900);
    expect(memory.facts(body(0, 300))).toBeUndefined();
    // Read, the second becomes the most recent: the third goes next.
    expect(memory.facts(body(1, 300))).toBe(noFacts);
    memory.rememberFacts(body(4, 300), noFacts);
    expect(memory.facts(body(2, 300))).toBeUndefined();
    expect(memory.facts(body(1, 300))).toBe(noFacts);
    expect(memory.facts(body(3, 300))).toBe(noFacts);
    expect(memory.facts(body(4, 300))).toBe(noFacts);
    // A result worked out ahead counts its input, its html and what it removed.
    memory.clear();
    memory.rememberSanitized(body(5, 100), {
      html: body(6, 50),
      removed: [{ path: 'p[1]', removed: '<x>', reason: 'element_not_allowed' }],
    });
    expect(memory.size).toBe(100 + 50 + 'p[1]<x>element_not_allowed'.length);
  });

  it('keeps nothing larger than its whole size, and no layout of a body over the layout limit', () => {
    const memory = createHtmlMemory({ maxBytes: 1000, maxLayoutLength: 100 });
    memory.rememberFacts(body(1, 1001), noFacts);
    expect(memory.facts(body(1, 1001))).toBeUndefined();
    expect(memory.size).toBe(0);
    const long = `<p>${'x'.repeat(200)}</p>`;
    sanitizeFully(long, memory);
    expect(memory.layout(long)).toBeUndefined();
    expect(memory.facts(long)).toEqual(factsOf(parseBody(long)));
  });

  it('lists the layouts newest first, and gives what the rules give without it', () => {
    const memory = createHtmlMemory();
    const bodies = ['<p>one</p>', '<p>two</p>', '<p>three</p>'];
    for (const html of bodies) expect(sanitizeHtml(html, memory)).toEqual(sanitizeHtml(html));
    expect([...memory.layouts()].map(([html]) => html)).toEqual([...bodies].reverse());
    for (const html of bodies) expect(bodyFacts(html, memory)).toEqual(bodyFacts(html));
  });
});
