import { describe, expect, it } from 'vitest';
import { html, htmlText, raw } from '../../apps/server/http/html.ts';
import { STYLESHEET } from '../../apps/server/web/html.ts';
import { safeReturnTo } from '../../apps/server/web/kit.ts';
import { delayAfter, EMAIL_POLICY } from '../../apps/server/web/throttle.ts';

describe('html templates escape by default', () => {
  it('escapes interpolations, not nested fragments', () => {
    const name = '<script>alert("x")</script> & \'co\'';
    expect(htmlText(html`<p title="${name}">${name}</p>`)).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;</p>',
    );
    expect(htmlText(html`<ul>${['<a>', html`<li>ok</li>`]}</ul>`)).toBe('<ul>&lt;a&gt;<li>ok</li></ul>');
    expect(htmlText(html`${null}${undefined}${false}${0}`)).toBe('0');
    expect(htmlText(raw('<b>trusted</b>'))).toBe('<b>trusted</b>');
  });
});

describe('return_to after sign-in', () => {
  it.each(['/oauth/interaction/abc', '/connect?x=1'])('keeps the local path %s', (path) => {
    expect(safeReturnTo(path)).toBe(path);
  });
  it.each([
    'https://evil.example/',
    '//evil.example/',
    '/\\evil.example',
    'evil',
    '/a\nb',
    '',
    undefined,
    42,
  ])('refuses %s', (value) => {
    expect(safeReturnTo(value)).toBeNull();
  });
});

describe('sign-in slowing', () => {
  it('is free for the first failures, then doubles, capped', () => {
    expect([0, 1, 2, 3, 4, 5, 6].map((n) => delayAfter(n, EMAIL_POLICY))).toEqual([
      0, 0, 0, 1000, 2000, 4000, 8000,
    ]);
    expect(delayAfter(40, EMAIL_POLICY)).toBe(EMAIL_POLICY.maxDelayMs);
  });
});

describe('the stylesheet', () => {
  it('closes every block it opens (one unclosed brace silently drops every rule after it)', () => {
    let depth = 0;
    for (const ch of STYLESHEET.replace(/\/\*[\s\S]*?\*\//g, '')) {
      if (ch === '{') depth++;
      if (ch === '}') depth--;
      expect(depth).toBeGreaterThanOrEqual(0);
    }
    expect(depth).toBe(0);
  });
});
