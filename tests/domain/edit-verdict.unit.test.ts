import { describe, expect, it } from 'vitest';
import { type Article, decide, editVerdict, fold } from '../../domain/article/decider.ts';
import { isDomainError } from '../../domain/errors.ts';
import type { Origin } from '../../domain/event.ts';
import { diffChanges, diffText } from '../../domain/html/word-diff.ts';
import { apiKey, articleCreated, metadata, withBacklink } from '../support/events.ts';

/*
 * editVerdict: what an edit would store and its protected-link verdict, the judgement `decide` makes
 * its EditArticle events from; and diffChanges, a word diff as the wire's {op, text} steps.
 */

const article = fold([articleCreated({ body: withBacklink('bl_1') })]) as Article;
const FORGED =
  '<p><a href="https://x.example/" data-service-protected="backlink" data-service-id="bl_9">x</a></p>';

function edit(data: { title?: string; body?: string; expectedRevision?: number }, origin: Origin = 'api') {
  return { articleId: 'art_1', origin, actor: apiKey, reason: null, ...data };
}

describe('editVerdict', () => {
  it('gives the sanitised body, what was removed and would_change for an accepted edit', () => {
    const body = `${withBacklink('bl_1')}<p onclick="x()">More<script>alert(1)</script></p>`;
    const verdict = editVerdict(article, edit({ body }));
    expect(verdict.protected).toEqual({ ok: true });
    expect(verdict.wouldChange).toBe(true);
    expect(verdict.body).toBe(`${withBacklink('bl_1')}<p>More</p>`);
    expect(verdict.title).toBe(article.title);
    expect(verdict.sanitized.map((s) => s.reason).sort()).toEqual(['event_handler', 'unsafe_element']);
    const [event] = decide({ type: 'EditArticle', data: edit({ body }), metadata }, article);
    expect(event?.type === 'ArticleEdited' && event.data).toMatchObject({
      body: verdict.body,
      sanitized: verdict.sanitized,
    });
  });

  it('answers a refused protected check instead of throwing it, with the errors decide throws', () => {
    const data = edit({ body: '<p>No links left.</p>' });
    const verdict = editVerdict(article, data);
    expect(verdict.protected).toMatchObject({ ok: false, errors: [{ id: 'bl_1', change: 'removed' }] });
    expect(verdict.wouldChange).toBe(false);
    let thrown: unknown;
    try {
      decide({ type: 'EditArticle', data, metadata }, article);
    } catch (error) {
      thrown = error;
    }
    expect(isDomainError(thrown) && thrown.code).toBe('protected_links_modified');
    expect(isDomainError(thrown) && thrown.errors).toEqual(
      verdict.protected.ok ? [] : verdict.protected.errors,
    );
  });

  it('holds the origin to its rule: a new protected block is forged from anyone but the pipeline', () => {
    const body = `${withBacklink('bl_1')}${FORGED}`;
    expect(editVerdict(article, edit({ body }, 'mcp')).protected).toMatchObject({
      ok: false,
      errors: [{ id: 'bl_9', change: 'forged' }],
    });
    const fromPipeline = editVerdict(article, edit({ body }, 'rewrite'));
    expect(fromPipeline.protected).toEqual({ ok: true });
    expect(fromPipeline.wouldChange).toBe(true);
  });

  it('says nothing would change for the same title and body, and for a title-only edit of the same title', () => {
    expect(editVerdict(article, edit({ title: article.title, body: article.body })).wouldChange).toBe(false);
    expect(editVerdict(article, edit({ title: article.title })).wouldChange).toBe(false);
    const renamed = editVerdict(article, edit({ title: 'Renamed' }));
    expect(renamed).toMatchObject({ wouldChange: true, title: 'Renamed', body: article.body, sanitized: [] });
  });

  it('throws what the edit throws before its protected check', () => {
    const codeOf = (data: ReturnType<typeof edit>): string | undefined => {
      try {
        editVerdict(article, data);
      } catch (error) {
        return isDomainError(error) ? error.code : 'other';
      }
      return undefined;
    };
    expect(codeOf(edit({}))).toBe('invalid_request');
    expect(codeOf(edit({ title: ' ' }))).toBe('invalid_request');
    expect(codeOf(edit({ title: 'x', expectedRevision: 2 }))).toBe('revision_mismatch');
    expect(codeOf(edit({ body: '<p>\u0000</p>' }))).toBe('invalid_request');
  });
});

describe('diffChanges', () => {
  it('maps same, added and removed text to equal, insert and delete, in order', () => {
    const diff = diffText('the old boiler', 'the new boiler');
    expect(diff).not.toBeNull();
    const steps = diffChanges(diff as NonNullable<typeof diff>);
    expect(steps.map((s) => s.op)).toEqual(['equal', 'delete', 'insert', 'equal']);
    expect(
      steps
        .filter((s) => s.op !== 'insert')
        .map((s) => s.text)
        .join(''),
    ).toBe('the old boiler');
    expect(
      steps
        .filter((s) => s.op !== 'delete')
        .map((s) => s.text)
        .join(''),
    ).toBe('the new boiler');
  });
});
