import { describe, expect, it } from 'vitest';
import { activityUrl, operationLabel, readFilters, sourceLabel } from '../../apps/server/web/activity.ts';

describe('the activity page helpers', () => {
  it('reads the filters with the API rules: empty fields are no filter, other parameters are ignored', () => {
    const read = readFilters({
      from: ' 2026-11-01 ',
      to: '',
      source: 'api',
      site_id: 'site_1',
      article_id: ['art_1', 'art_2'],
      page: '2',
      utm: 'x',
    });
    expect(read).toEqual({
      ok: true,
      form: { from: '2026-11-01', source: 'api', site_id: 'site_1', article_id: 'art_1', page: '2' },
      query: {
        from: '2026-11-01',
        source: 'api',
        site_id: 'site_1',
        article_id: 'art_1',
        page: 2,
        per_page: 20,
      },
    });
  });

  it("names each refused field once, with the API's message, and keeps what was sent", () => {
    const read = readFilters({ from: '2026-11-10', to: '2026-11-01', source: 'fax', per_page: '500' });
    expect(read.ok).toBe(false);
    if (read.ok) return;
    // The range is checked once every field is well formed, as the API does.
    expect(read.errors).toEqual({ source: 'must be one of the choices', per_page: 'must be at most 100' });
    expect(read.form).toEqual({ from: '2026-11-10', to: '2026-11-01', source: 'fax', per_page: '500' });
    expect(readFilters({ from: '2026-11-10', to: '2026-11-01' })).toMatchObject({
      ok: false,
      errors: { from: 'must not be after to' },
    });
    expect(readFilters({ from: '2026-13-01' })).toMatchObject({
      ok: false,
      errors: { from: 'must be a date YYYY-MM-DD' },
    });
  });

  it('makes page addresses that keep the filters, leaving out page 1 and empty fields', () => {
    expect(activityUrl({}, 1)).toBe('/activity');
    expect(activityUrl({ source: 'mcp', page: '3' }, 1)).toBe('/activity?source=mcp');
    expect(activityUrl({ site_id: 'site_1', article_id: 'a b&c', per_page: '5' }, 2)).toBe(
      '/activity?site_id=site_1&article_id=a+b%26c&page=2&per_page=5',
    );
  });

  it("names a record's source, support staff's as Support", () => {
    expect(sourceLabel('mcp', { type: 'oauth_client' })).toBe('Assistant (MCP)');
    expect(sourceLabel('system', { type: 'staff' })).toBe('Support');
    expect(sourceLabel('system', { type: 'system' })).toBe('Service');
    expect(sourceLabel('system')).toBe('Service');
  });

  it('words an operation', () => {
    expect(operationLabel('update_article')).toBe('Update article');
    expect(operationLabel('staff_view')).toBe('Staff view');
    // The editor's "Put the protected links back": named as the button says, not as its operation.
    expect(operationLabel('articles.put_back_protected_links')).toBe('Put protected links back');
  });
});
