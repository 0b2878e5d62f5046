import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOf, type EditLimit, type Principal, unwrap } from '../../apps/application/call.ts';
import { type Application, createApplication } from '../../apps/application/index.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { isDomainError } from '../../domain/errors.ts';
import type { Origin } from '../../domain/event.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { apiKeyActor, createTestRuntime, protectedBody, setUpAccount } from '../support/runtime.ts';

/*
 * The preview says what the edit then does, on a real database through the use cases: 1,000 random
 * edits of one article (hostile HTML, protected links removed, rewritten, forged or moved, unchanged
 * bodies, title-only edits, from every origin), each previewed and then made. When the preview says ok
 * and would_change, the edit makes the next revision with exactly its title, body, sanitized and
 * word_count; not ok, the edit is refused with protected_links_modified and the same errors; nothing to
 * change, the edit answers changed: false.
 */

const WORDS = [
  'boiler',
  'pipe',
  'valve',
  'radiator',
  'leak',
  'tap',
  'the',
  'and',
  'heat',
  'water',
  'ünïcode',
  '&',
];
const HOSTILE = [
  '<script>alert(1)</script>',
  '<iframe src="https://evil.example/"></iframe>',
  '<a href="javascript:alert(1)">click</a>',
  '<img src="https://img.example/x.png" onerror="alert(1)">',
  '<object data="x.swf"></object>',
  '<!-- a comment -->',
  '<a href="https://ok.example/" target="_blank">new tab</a>',
  '<p data-service-protected="">marker without id</p>',
];
const FORGED =
  '<a href="https://forged.example/" data-service-protected="backlink" data-service-id="bl_forged">forged</a>';

type Tamper = 'none' | 'remove' | 'rewrite-href' | 'rewrite-text' | 'forge' | 'duplicate' | 'move';
type Recipe = {
  origin: Origin;
  title: { kind: 'none' } | { kind: 'current' } | { kind: 'new'; text: string };
  body:
    | { kind: 'none' }
    | { kind: 'current' }
    | {
        kind: 'new';
        paragraphs: { words: string; hostile: number | null; onclick: boolean }[];
        tamper: Tamper;
        which: number;
      };
  expect: boolean;
};

const words = fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 8 }).map((w) => w.join(' '));
const recipe: fc.Arbitrary<Recipe> = fc
  .record({
    origin: fc.constantFrom<Origin>('api', 'mcp', 'editor', 'editor', 'api', 'rewrite'),
    title: fc.oneof(
      fc.constant({ kind: 'none' as const }),
      fc.constant({ kind: 'current' as const }),
      words.map((text) => ({ kind: 'new' as const, text: `${text}`.slice(0, 300) })),
    ),
    body: fc.oneof(
      { weight: 1, arbitrary: fc.constant({ kind: 'none' as const }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'current' as const }) },
      {
        weight: 5,
        arbitrary: fc.record({
          kind: fc.constant('new' as const),
          paragraphs: fc.array(
            fc.record({
              words,
              hostile: fc.option(fc.nat(HOSTILE.length - 1), { freq: 3 }),
              onclick: fc.boolean(),
            }),
            { minLength: 0, maxLength: 3 },
          ),
          tamper: fc.constantFrom<Tamper>(
            'none',
            'none',
            'none',
            'remove',
            'rewrite-href',
            'rewrite-text',
            'forge',
            'duplicate',
            'move',
          ),
          which: fc.nat(),
        }),
      },
    ),
    expect: fc.boolean(),
  })
  .filter((r) => r.title.kind !== 'none' || r.body.kind !== 'none');

/** The protected elements of a stored body, as it stores them. */
function protectedElements(body: string): string[] {
  return body.match(/<a [^>]*data-service-protected[^>]*>.*?<\/a>/g) ?? [];
}

/** The body a recipe makes from the article's protected elements (as stored now) and its paragraphs. */
function bodyOf(r: Extract<Recipe['body'], { kind: 'new' }>, kept: readonly string[]): string {
  let blocks = [...kept];
  const i = kept.length === 0 ? 0 : r.which % kept.length;
  const target = blocks[i];
  if (target !== undefined) {
    if (r.tamper === 'remove') blocks.splice(i, 1);
    if (r.tamper === 'rewrite-href')
      blocks[i] = target.replace(/href="[^"]*"/, 'href="https://elsewhere.example/"');
    if (r.tamper === 'rewrite-text') blocks[i] = target.replace(/>([^<]*)<\/a>$/, '>other words</a>');
    if (r.tamper === 'duplicate') blocks.push(target);
    if (r.tamper === 'move') blocks = [...blocks.slice(i + 1), ...blocks.slice(0, i + 1)];
  }
  if (r.tamper === 'forge') blocks.push(FORGED);
  const paragraphs = r.paragraphs.map(
    (p) =>
      `<p${p.onclick ? ' onclick="steal()"' : ''}>${p.words}${p.hostile === null ? '' : HOSTILE[p.hostile]}</p>`,
  );
  return `${paragraphs.join('')}<p>Links: ${blocks.join(' and ')}.</p>`;
}

describe('the preview and the edit it previews', () => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let app: Application;
  let accountId: string;
  let articleId: string;

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime('postgres'));
    ({ accountId } = await setUpAccount(runtime));
    const { siteId } = await runtime.commands.addSite(accountId, {
      name: 'Preview Plumbing',
      domain: 'preview.example',
      url: 'https://preview.example/',
    });
    ({ articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: 'Boilers',
        body: protectedBody(1),
        url: 'https://preview.example/boilers',
        status: 'published',
        publishedAt: '2026-11-01T09:00:00.000Z',
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: apiKeyActor },
    ));
    const unlimited: EditLimit = {
      take: async () => ({
        policy: { name: 'edits', quota: 1_000_000, window: 'utc-day' as const },
        allowed: true,
        remaining: 1_000_000,
        resetSeconds: 3600,
      }),
    };
    app = createApplication({
      db: runtime.db,
      commands: runtime.commands,
      publicUrl: 'https://content.example',
      now: () => new Date(),
      editLimit: unlimited,
      media: createDirectoryMediaStore('/nonexistent'),
      fetchImage: async () => new Uint8Array(),
    });
  });
  afterAll(async () => {
    await drop?.();
  });

  it('agree on 1,000 random edits: would_change and ok make that revision, not ok the same 422, no change changed: false', async () => {
    const counts = { saved: 0, refused: 0, unchanged: 0 };
    await fc.assert(
      fc.asyncProperty(recipe, async (r) => {
        const principal: Principal = { accountId, actor: apiKeyActor, origin: r.origin, scope: 'write' };
        const call = callOf(principal);
        const current = unwrap(await app.articles.get(call, articleId));
        const title =
          r.title.kind === 'none' ? undefined : r.title.kind === 'current' ? current.title : r.title.text;
        const body =
          r.body.kind === 'none'
            ? undefined
            : r.body.kind === 'current'
              ? current.body
              : bodyOf(r.body, protectedElements(current.body));
        const input = {
          articleId,
          title,
          body,
          expectedRevision: r.expect ? current.revision : undefined,
        };
        const { preview } = unwrap(await app.articles.preview(call, input));
        expect(preview.base_revision).toBe(current.revision);
        const edit = await app.articles.edit(call, input);
        if (!preview.protected_links.ok) {
          counts.refused++;
          expect(preview.would_change).toBe(false);
          expect(edit.ok).toBe(false);
          const error = edit.ok ? undefined : edit.error;
          expect(isDomainError(error) && error.code).toBe('protected_links_modified');
          expect(isDomainError(error) && error.errors).toEqual(preview.protected_links.errors);
          return;
        }
        expect(preview.protected_links.errors).toEqual([]);
        const { change } = unwrap(edit);
        if (preview.would_change) {
          counts.saved++;
          expect(change).toMatchObject({
            changed: true,
            revision: current.revision + 1,
            title: preview.title,
            body: preview.body,
            sanitized: preview.sanitized,
            word_count: preview.word_count,
          });
        } else {
          counts.unchanged++;
          expect(change).toMatchObject({ changed: false, revision: current.revision });
          expect(preview).toMatchObject({
            title: change.title,
            body: change.body,
            word_count: change.word_count,
          });
        }
      }),
      { numRuns: 1000 },
    );
    // Each kind of verdict is met many times.
    expect(counts.saved).toBeGreaterThan(100);
    expect(counts.refused).toBeGreaterThan(100);
    expect(counts.unchanged).toBeGreaterThan(50);
  }, 300_000);
});
