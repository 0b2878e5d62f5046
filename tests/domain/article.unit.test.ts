import { describe, expect, it } from 'vitest';
import {
  type ArticleCommand,
  type ArticleState,
  decide,
  evolve,
  fold,
  initialState,
} from '../../domain/article/decider.ts';
import type { ArticleEvent } from '../../domain/article/events.ts';
import { specFor } from '../support/decider.ts';
import {
  articleCreated,
  articleEdited,
  apiKey as key,
  metadata,
  pipeline as system,
  withBacklink,
} from '../support/events.ts';

const spec = specFor<ArticleState, ArticleEvent, ArticleCommand>({ initialState, evolve, decide });

function editArticle(data: { title?: string; body?: string; expectedRevision?: number; reason?: string }) {
  return {
    type: 'EditArticle' as const,
    data: { articleId: 'art_1', origin: 'api' as const, actor: key, reason: data.reason ?? null, ...data },
    metadata,
  };
}

/** Restore revision `revision` (the article replayed up to it: `snapshot`) from the editor. */
function restore(revision: number, snapshot: ArticleState) {
  return {
    type: 'RestoreRevision' as const,
    data: { articleId: 'art_1', origin: 'editor' as const, actor: key, reason: null, revision, snapshot },
    metadata,
  };
}

describe('article decider', () => {
  it('creates an article as revision 1 with a sanitised body', () => {
    spec
      .given([])
      .when({
        type: 'CreateArticle',
        data: {
          ...articleCreated().data,
          body: '<p>Hi<script>alert(1)</script></p>',
        },
        metadata,
      })
      .thenEvents((events) => {
        expect(events).toHaveLength(1);
        expect(events[0]?.type).toBe('ArticleCreated');
        expect(events[0]?.data).toMatchObject({ revision: 1, body: '<p>Hi</p>' });
      });
  });

  it('refuses to create an article twice', () => {
    spec
      .given([articleCreated()])
      .when({ type: 'CreateArticle', data: articleCreated().data, metadata })
      .thenThrows('conflict');
  });

  it('edits the title as the next revision, with origin, actor and reason', () => {
    spec
      .given([articleCreated()])
      .when(editArticle({ title: 'Boiler care in winter', reason: 'seasonal' }))
      .thenEvents([articleEdited({ reason: 'seasonal', title: 'Boiler care in winter' })]);
  });

  it('refuses an edit that drops a protected backlink', () => {
    spec
      .given([articleCreated()])
      .when(editArticle({ body: '<p>no links left</p>' }))
      .thenThrows('protected_links_modified', { errors: [{ id: 'bl_1', change: 'removed' }] });
  });

  it('refuses a new protected block from an API edit (a forgery), but lets the pipeline insert one', () => {
    const added = `${withBacklink('bl_1')}<p><a href="https://x.example/" data-service-protected="backlink" data-service-id="bl_2">x</a></p>`;
    spec
      .given([articleCreated()])
      .when(editArticle({ body: added }))
      .thenThrows('protected_links_modified', { errors: [{ id: 'bl_2', change: 'forged' }] });
    spec
      .given([articleCreated()])
      .when({
        ...editArticle({ body: added }),
        data: { ...editArticle({ body: added }).data, origin: 'rewrite', actor: system },
      })
      .thenEvents((events) =>
        expect(events[0]).toMatchObject({ type: 'ArticleEdited', data: { origin: 'rewrite' } }),
      );
    spec
      .given([articleCreated()])
      .when({
        ...editArticle({ body: '<p>gone</p>' }),
        data: { ...editArticle({ body: '<p>gone</p>' }).data, origin: 'rewrite', actor: system },
      })
      .thenThrows('protected_links_modified', { errors: [{ id: 'bl_1', change: 'removed' }] });
  });

  it('refuses an edit that rewrites the text of a protected backlink', () => {
    spec
      .given([articleCreated()])
      .when(editArticle({ body: withBacklink('bl_1', 'cheap boilers') }))
      .thenThrows('protected_links_modified', { errors: [{ id: 'bl_1', change: 'rewritten' }] });
  });

  it('accepts an edit that moves the protected backlink and reports what it sanitised', () => {
    const moved = `<p>See <a href="https://partner.example.org/" data-service-protected="backlink" data-service-id="bl_1">our partner</a> first.</p><p onclick="x()">Then the intro.</p>`;
    spec
      .given([articleCreated()])
      .when(editArticle({ body: moved }))
      .thenEvents((events) => {
        expect(events).toHaveLength(1);
        const data = events[0]?.data as { body: string; sanitized: { removed: string }[]; revision: number };
        expect(data.revision).toBe(2);
        expect(data.body).not.toContain('onclick');
        expect(data.body).toContain('data-service-id="bl_1"');
        expect(data.sanitized.length).toBeGreaterThan(0);
      });
  });

  it('creates no revision for an edit that changes nothing', () => {
    spec
      .given([articleCreated()])
      .when(editArticle({ title: 'Boiler care', body: withBacklink('bl_1') }))
      .thenEvents([]);
  });

  it('refuses a stale expected revision', () => {
    spec
      .given([articleCreated()])
      .when(editArticle({ title: 'New', expectedRevision: 3 }))
      .thenThrows('revision_mismatch');
  });

  it('refuses an empty edit and a title that is blank or too long', () => {
    spec.given([articleCreated()]).when(editArticle({})).thenThrows('invalid_request');
    spec
      .given([articleCreated()])
      .when(editArticle({ title: '   ' }))
      .thenThrows('invalid_request');
    spec
      .given([articleCreated()])
      .when(editArticle({ title: 'x'.repeat(301) }))
      .thenThrows('invalid_request');
  });

  it.each([
    ['title', { title: 'Boiler\u0000care' }],
    ['title', { title: 'Boiler\ncare' }],
    ['title', { title: 'Boiler \ud83d care' }],
    ['body', { body: `${withBacklink('bl_1')}<p>\udc00</p>` }],
    ['body', { body: `${withBacklink('bl_1')}<p>\u0000</p>` }],
    ['reason', { title: 'Boiler care 2', reason: 'because\u001b[31m' }],
  ])('refuses a %s with a control character or a lone surrogate, naming it', (name, data) => {
    spec
      .given([articleCreated()])
      .when(editArticle(data))
      .thenThrows('invalid_request', { errors: [{ field: name, message: expect.any(String) }] });
  });

  it('takes tabs and line breaks in a body and a reason', () => {
    const body = `${withBacklink('bl_1')}<p>one\r\n\ttwo</p>`;
    const events = decide(editArticle({ body, reason: 'line one\nline two' }), fold([articleCreated()]));
    expect(events).toHaveLength(1);
  });

  it('refuses a body over 2 MiB', () => {
    spec
      .given([articleCreated()])
      .when(editArticle({ body: `${withBacklink('bl_1')}<p>${'é'.repeat(1024 * 1024)}</p>` }))
      .thenThrows('invalid_request');
  });

  it('refuses a body under 2 MiB whose sanitised form is over 2 MiB, on edit and on creation', () => {
    // Each bare `&` is stored as `&amp;`: 1 byte in, 5 bytes out.
    const prefix = `${withBacklink('bl_1')}<p>`;
    const body = `${prefix}${'&'.repeat(2 * 1024 * 1024 - prefix.length - 8)}</p>`;
    expect(new TextEncoder().encode(body).length).toBeLessThanOrEqual(2 * 1024 * 1024);
    spec.given([articleCreated()]).when(editArticle({ body })).thenThrows('invalid_request');
    const created = articleCreated();
    spec
      .given([])
      .when({ type: 'CreateArticle', data: { ...created.data, body }, metadata })
      .thenThrows('invalid_request');
    // A body that stays under the limit once sanitised is accepted.
    const fits = `${prefix}${'&'.repeat(1000)}</p>`;
    spec
      .given([articleCreated()])
      .when(editArticle({ body: fits }))
      .thenEvents((events) => expect(events).toHaveLength(1));
  });

  it('does not edit an article that does not exist', () => {
    spec
      .given([])
      .when(editArticle({ title: 'x' }))
      .thenThrows('not_found');
  });

  it('replaces the featured image as a revision, and not when it is the same image', () => {
    const image = { url: 'https://cdn.example.com/a.webp', alt: 'A boiler', width: 1200, height: 800 };
    const command = {
      type: 'ReplaceFeaturedImage' as const,
      data: { articleId: 'art_1', origin: 'mcp' as const, actor: key, reason: null, featuredImage: image },
      metadata,
    };
    spec
      .given([articleCreated()])
      .when(command)
      .thenEvents((events) =>
        expect(events[0]).toMatchObject({ type: 'FeaturedImageReplaced', data: { revision: 2 } }),
      );
    spec
      .given([articleCreated({ featuredImage: image })])
      .when(command)
      .thenEvents([]);
    // The same image read back from the event store's jsonb, which orders an object's keys its own way.
    const stored = { alt: image.alt, url: image.url, height: image.height, width: image.width };
    spec
      .given([articleCreated({ featuredImage: stored })])
      .when(command)
      .thenEvents([]);
  });

  it('restores an earlier revision as a new revision that names where it came from', () => {
    const history = [articleCreated(), articleEdited({ title: 'Changed' })];
    const snapshot = fold(history.slice(0, 1));
    spec
      .given(history)
      .when({
        type: 'RestoreRevision',
        data: { articleId: 'art_1', origin: 'editor', actor: key, reason: 'undo', revision: 1, snapshot },
        metadata,
      })
      .thenEvents((events) => {
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({
          type: 'ArticleRestored',
          data: { revision: 3, restoredFrom: 1, title: 'Boiler care', origin: 'editor' },
        });
        const after = fold([...history, ...events]);
        expect(after.exists && after.title).toBe('Boiler care');
      });
  });

  it('refuses a restore that would drop a protected link added after that revision', () => {
    const history = [articleCreated({ body: '<p>Plain.</p>' })];
    const withLink = articleEdited({ origin: 'rewrite', actor: system, body: withBacklink('bl_9') });
    spec
      .given([...history, withLink])
      .when(restore(1, fold(history)))
      .thenThrows('protected_links_modified', { errors: [{ id: 'bl_9', change: 'removed' }] });
  });

  it('edits a body stored before links with a target had to carry noopener: its protected link is the same block', () => {
    const storedBefore =
      '<p>See <a href="https://partner.example.org/" target="_blank" data-service-protected="backlink" data-service-id="bl_1">our partner</a>.</p>';
    spec
      .given([articleCreated({ body: storedBefore })])
      .when(editArticle({ body: `${storedBefore}<p>A new paragraph.</p>` }))
      .thenEvents((events) => {
        const data = events[0]?.data as { body: string; sanitized: unknown[] };
        expect(data.body).toContain('rel="noopener noreferrer"');
        expect(data.sanitized).toEqual([{ path: 'p[1] > a[1]', removed: 'rel=""', reason: 'link_opener' }]);
      });
  });

  it('restores a revision stored under earlier rules as the sanitiser stores it now', () => {
    const history = [
      articleCreated({ body: '<p><a href="https://x.example/" target="_blank" rel="opener">x</a></p>' }),
      articleEdited({ body: '<p>Changed.</p>' }),
    ];
    spec
      .given(history)
      .when(restore(1, fold(history.slice(0, 1))))
      .thenEvents((events) =>
        expect(events[0]).toMatchObject({
          type: 'ArticleRestored',
          data: {
            body: '<p><a href="https://x.example/" target="_blank" rel="noopener noreferrer">x</a></p>',
          },
        }),
      );
  });

  it('refuses to restore a featured image whose address is not http(s) (ingested before that rule)', () => {
    const image = { url: 'javascript:alert(1)', alt: 'x', width: null, height: null };
    const history = [articleCreated({ featuredImage: image }), articleEdited({ title: 'Changed' })];
    spec
      .given(history)
      .when(restore(1, fold(history.slice(0, 1))))
      .thenThrows('invalid_request', {
        errors: [{ field: 'revision', message: expect.stringContaining('http') }],
      });
  });

  it('refuses to restore a revision that does not exist', () => {
    spec.given([articleCreated()]).when(restore(5, initialState)).thenThrows('not_found');
  });

  it('changes the status as a revision and needs a publication time to publish', () => {
    spec
      .given([articleCreated()])
      .when({
        type: 'ChangeArticleStatus',
        data: {
          articleId: 'art_1',
          origin: 'rewrite',
          actor: system,
          reason: null,
          status: 'archived',
          publishedAt: '2026-11-01T08:00:00.000Z',
        },
        metadata,
      })
      .thenEvents((events) =>
        expect(events[0]).toMatchObject({
          type: 'ArticleStatusChanged',
          data: { revision: 2, status: 'archived' },
        }),
      );
    spec
      .given([articleCreated({ status: 'draft', publishedAt: null })])
      .when({
        type: 'ChangeArticleStatus',
        data: {
          articleId: 'art_1',
          origin: 'rewrite',
          actor: system,
          reason: null,
          status: 'published',
          publishedAt: null,
        },
        metadata,
      })
      .thenThrows('invalid_request');
  });

  it('replaying up to n gives the content at revision n', () => {
    const events: ArticleEvent[] = [
      articleCreated(),
      articleEdited({ title: 'Two' }),
      articleEdited({ revision: 3, origin: 'mcp', title: 'Three' }),
    ];
    const at2 = fold(events.slice(0, 2));
    expect(at2.exists && [at2.revision, at2.title]).toEqual([2, 'Two']);
    const at3 = fold(events);
    expect(at3.exists && [at3.revision, at3.title]).toEqual([3, 'Three']);
  });
});
