import type { AccountOpened, ApiKeyCreated } from '../../domain/account/events.ts';
import type { ArticleCreated, ArticleEdited } from '../../domain/article/events.ts';
import type { BacklinkAcquired } from '../../domain/backlink/events.ts';
import type { Actor, EventMetadata } from '../../domain/event.ts';
import type { SiteAdded } from '../../domain/site/events.ts';

/*
 * Events for decider tests, with defaults that fit together (account acc_1, site site_1, article
 * art_1, backlink bl_1): a test names only what it is about.
 */

const at = '2026-11-02T09:30:00.000Z';
export const metadata: EventMetadata = { at };
export const apiKey: Actor = { type: 'api_key', id: 'key_1', name: 'Reporting key' };
export const pipeline: Actor = { type: 'system', id: 'pipeline', name: 'Content pipeline' };

/** A body with one protected backlink, `id`, whose text is `text`. */
export const withBacklink = (id: string, text = 'our partner'): string =>
  `<p>Intro.</p><p>See <a href="https://partner.example.org/" data-service-protected="backlink" data-service-id="${id}">${text}</a>.</p>`;

export function accountOpened(overrides: Partial<AccountOpened['data']> = {}): AccountOpened {
  return {
    type: 'AccountOpened',
    data: { accountId: 'acc_1', name: 'Plumbers Ltd', email: 'owner@plumbers.example', ...overrides },
    metadata,
  };
}

export function apiKeyCreated(overrides: Partial<ApiKeyCreated['data']> = {}): ApiKeyCreated {
  return {
    type: 'ApiKeyCreated',
    data: {
      accountId: 'acc_1',
      keyId: 'key_1',
      name: 'Reports',
      prefix: 'cs_live_ab12',
      scope: 'read',
      ...overrides,
    },
    metadata,
  };
}

export function siteAdded(overrides: Partial<SiteAdded['data']> = {}): SiteAdded {
  return {
    type: 'SiteAdded',
    data: {
      siteId: 'site_1',
      accountId: 'acc_1',
      name: 'Northside Plumbing',
      domain: 'plumber.example.com',
      url: 'https://plumber.example.com/',
      ...overrides,
    },
    metadata,
  };
}

export function backlinkAcquired(overrides: Partial<BacklinkAcquired['data']> = {}): BacklinkAcquired {
  return {
    type: 'BacklinkAcquired',
    data: {
      backlinkId: 'bl_1',
      siteId: 'site_1',
      accountId: 'acc_1',
      acquiredOn: '2026-10-01',
      sourceDomain: 'partner.example.org',
      sourceUrl: 'https://partner.example.org/plumbers',
      targetUrl: 'https://plumber.example.com/',
      anchorText: 'our partner',
      anchorType: 'branded',
      category: 'industry',
      ...overrides,
    },
    metadata,
  };
}

/** Revision 1 of art_1, by the pipeline, with one protected backlink (bl_1) in its body. */
export function articleCreated(overrides: Partial<ArticleCreated['data']> = {}): ArticleCreated {
  return {
    type: 'ArticleCreated',
    data: {
      articleId: 'art_1',
      siteId: 'site_1',
      accountId: 'acc_1',
      revision: 1,
      origin: 'rewrite',
      actor: pipeline,
      reason: null,
      title: 'Boiler care',
      body: withBacklink('bl_1'),
      url: 'https://plumber.example.com/boiler-care',
      status: 'published',
      publishedAt: '2026-11-01T08:00:00.000Z',
      targetKeyword: 'boiler care',
      featuredImage: null,
      ...overrides,
    },
    metadata,
  };
}

/** Revision 2 of art_1 through the API key, changing nothing until told what (`title`, `body`). */
export function articleEdited(overrides: Partial<ArticleEdited['data']> = {}): ArticleEdited {
  return {
    type: 'ArticleEdited',
    data: {
      articleId: 'art_1',
      revision: 2,
      origin: 'api',
      actor: apiKey,
      reason: null,
      sanitized: [],
      ...overrides,
    },
    metadata,
  };
}
