import { describe, expect, it } from 'vitest';
import { htmlText } from '../../apps/server/http/html.ts';
import { draftOf, removedList, savedNotice } from '../../apps/server/web/editor.ts';

describe('editor helpers', () => {
  it('reads the form, anything missing empty, a bad expected revision replaced by the current one', () => {
    expect(draftOf({ title: 'T', body: '<p>B</p>', reason: 'R', expected_revision: '7' }, 9)).toEqual({
      title: 'T',
      body: '<p>B</p>',
      reason: 'R',
      expectedRevision: 7,
    });
    expect(draftOf({ expected_revision: '0x7', title: ['a'] }, 9)).toEqual({
      title: '',
      body: '',
      reason: '',
      expectedRevision: 9,
    });
    expect(draftOf(undefined, 3).expectedRevision).toBe(3);
  });

  it('names what the sanitiser removed in words, escaped and shortened', () => {
    expect(htmlText(removedList([]))).toBe('');
    const out = htmlText(
      removedList([
        { path: 'p[1]', removed: 'onclick="x()"', reason: 'event_handler' },
        { path: 'p[2]', removed: `<script>${'a'.repeat(300)}`, reason: 'a_new_reason' },
        { path: 'p[3] > a[1]', removed: 'rel="opener"', reason: 'link_opener' },
        {
          path: 'p[4] > q1[1] > q1[1] > …2… > q1[1] > q1[1] > q1[1] > q1[1]',
          removed: '250 more',
          reason: 'more_removed',
        },
      ]),
    );
    expect(out).toContain(
      '<code>250 more</code></td><td>removed as well, not listed one by one (where the first of them was)</td><td><code>p[4] &gt; q1[1] &gt; q1[1] &gt; …2… &gt;',
    );
    expect(out).toContain('<code>onclick=&quot;x()&quot;</code></td><td>script event handler</td>');
    expect(out).toContain(
      '<code>rel=&quot;opener&quot;</code></td><td>a link that opens another page: its rel now says',
    );
    expect(out).toContain(`&lt;script&gt;${'a'.repeat(192)}…</code></td><td>a_new_reason</td>`);
  });

  it('shows the saved notice only for a revision number the article has', () => {
    expect(htmlText(savedNotice({ saved: '4' }, 4))).toBe(
      '<p class="notice" role="status" id="saved-notice">Saved as revision 4.</p>',
    );
    expect(htmlText(savedNotice({ saved: '5' }, 4))).toBe('');
    expect(htmlText(savedNotice({ saved: '<b>' }, 4))).toBe('');
    expect(htmlText(savedNotice({}, 4))).toBe('');
    expect(htmlText(savedNotice(undefined, 4))).toBe('');
  });
});
