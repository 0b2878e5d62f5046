import { describe, expect, it } from 'vitest';
import { resultsCount } from '../../apps/server/web/search.ts';
import { SEARCH_RANKED_MAX } from '../../domain/article/search.ts';

describe("the search page's count of results", () => {
  it('counts the matches below the bound', () => {
    expect(resultsCount(1)).toBe('1 article matches, most relevant first.');
    expect(resultsCount(13)).toBe('13 articles match, most relevant first.');
    expect(resultsCount(SEARCH_RANKED_MAX - 1)).toBe(
      `${SEARCH_RANKED_MAX - 1} articles match, most relevant first.`,
    );
  });

  it('says "or more" at the bound, where only the newest are ranked, and how to narrow the search', () => {
    const text = resultsCount(SEARCH_RANKED_MAX);
    expect(text).toMatch(/^1,000 or more articles match: the newest 1,000 are ranked/);
    expect(text).toContain('Add words');
  });
});
