import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { bodyFacts, factsOf } from '../../domain/html/facts.ts';
import { sanitizeHtml } from '../../domain/html/sanitize.ts';
import { parseBody } from '../../domain/html/tree.ts';
import { diffBodies } from '../../domain/html/word-diff.ts';
import { createHtmlMemory } from '../../infra/html-memory.ts';
import {
  createSanitizePool,
  DIFF_WAITING,
  IN_THREAD_MAX,
  type SanitizePool,
} from '../../infra/sanitize-pool.ts';
import {
  apiKeyActor,
  createTestRuntime,
  pipelineActor,
  protectedBody,
  setUpAccount,
} from '../support/runtime.ts';

const pieces = [
  '<p>text</p>',
  '<script>alert(1)</script>',
  '<img src=x onerror=alert(1)>',
  '<a href="javascript:alert(1)">x</a>',
  '<svg><p><style><img src=x onerror=alert(1)></style></p></svg>',
  '<table><tr><td>cell<p>para</table>',
  '<a href="https://ok.example/">ok</a>',
  '<b><i>misnested</b></i>',
  '<!-- comment -->',
  'plain & text',
];
const body = fc.array(fc.constantFrom(...pieces), { maxLength: 12 }).map((parts) => parts.join(''));

describe('the sanitise pool', () => {
  const memory = createHtmlMemory();
  const isSanitizedAhead = (input: string): boolean => memory.isSanitizedAhead(input);
  let pool: SanitizePool;
  beforeAll(() => {
    // Every body to the worker, however small (by default small ones stay in the server's thread).
    pool = createSanitizePool(1, memory, { inThreadMax: 0 });
  });
  afterAll(async () => pool?.close());

  it('leaves for the decider exactly what sanitising in its own thread gives, and the facts of the result', async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.nat(), async (parts, n) => {
        const input = `${parts}<p>${n}</p>`;
        const expected = structuredClone(sanitizeHtml(input));
        await pool.ahead(input);
        expect(isSanitizedAhead(input)).toBe(true);
        expect(sanitizeHtml(input, memory)).toEqual(expected);
        // Handed out once: the next call works it out again.
        expect(isSanitizedAhead(input)).toBe(false);
        expect(bodyFacts(expected.html, memory)).toEqual(factsOf(parseBody(expected.html)));
      }),
      { numRuns: 40 },
    );
  });

  it('leaves bodies up to IN_THREAD_MAX to the server thread by default, and sends larger ones', async () => {
    const byDefault = createSanitizePool(1, memory);
    try {
      const small = `<p onclick="x()">small</p>${'<p>x</p>'.repeat(10)}`;
      await byDefault.ahead(small);
      expect(isSanitizedAhead(small)).toBe(false);
      const large = `<p onclick="x()">large</p>${'<p>x</p>'.repeat(IN_THREAD_MAX / 8)}`;
      await byDefault.ahead(large);
      expect(isSanitizedAhead(large)).toBe(true);
      expect(sanitizeHtml(large, memory).removed).toEqual([
        { path: 'p[1]', removed: 'onclick="x()"', reason: 'event_handler' },
      ]);
    } finally {
      await byDefault.close();
    }
  });

  it('starts its threads when told to or when first used, never before; closed, it starts none', async () => {
    const told = createSanitizePool(1, createHtmlMemory());
    const used = createSanitizePool(1, createHtmlMemory());
    const unused = createSanitizePool(1, createHtmlMemory());
    try {
      expect([told.started, used.started, unused.started]).toEqual([false, false, false]);
      told.start();
      told.start();
      expect(told.started).toBe(true);
      // A small body stays in the server's thread: no thread for it.
      await used.ahead('<p>small</p>');
      expect(used.started).toBe(false);
      const large = `<p onclick="x()">large</p>${'<p>x</p>'.repeat(IN_THREAD_MAX / 8)}`;
      await used.ahead(large);
      expect(used.started).toBe(true);
    } finally {
      await Promise.all([told.close(), used.close(), unused.close()]);
    }
    unused.start();
    expect(unused.started).toBe(false);
  });

  it('does not send a body over the size limit (the decider refuses it unparsed)', async () => {
    const huge = `<p>${'x'.repeat(2 * 1024 * 1024 + 1)}</p>`;
    await pool.ahead(huge);
    expect(isSanitizedAhead(huge)).toBe(false);
  });
});

describe('diffs on the pool', () => {
  const paragraphs = (n: number, tag: string) =>
    Array.from(
      { length: n },
      (_, i) => `<p>Paragraph ${i} ${i % 7 === 0 ? tag : 'same'} words here.</p>`,
    ).join('');

  it('gives the diff the server thread would, within the same budget', async () => {
    // Patient (not DIFF_WAIT_MS): a worker started on a busy machine is slow to load, and giving up as
    // busy is another test's point.
    const pool = createSanitizePool(1, createHtmlMemory(), { diffWaitMs: 55_000 });
    try {
      const before = paragraphs(200, 'old');
      const after = paragraphs(200, 'new');
      expect(await pool.diff(before, after)).toEqual(diffBodies(before, after));
      // Too long and too different: none, for the page's note linking to both versions.
      expect(await pool.diff(paragraphs(30_000, 'a'), `<p>${'other words '.repeat(150_000)}</p>`)).toBeNull();
    } finally {
      await pool.close();
    }
  }, 60_000);

  it('runs at most its slots at once, keeps at most DIFF_WAITING waiting, and answers busy beyond', async () => {
    const pool = createSanitizePool(1, createHtmlMemory(), { diffSlots: 1 });
    try {
      const before = paragraphs(2_000, 'old');
      const after = paragraphs(2_000, 'new');
      const taken = Array.from({ length: 1 + DIFF_WAITING }, () => pool.diff(before, after));
      expect(await pool.diff(before, after)).toBe('busy');
      // The first one ran; the others each got a slot or were given up in time, never failed.
      const answers = await Promise.all(taken);
      expect(answers[0]).toEqual(diffBodies(before, after));
      for (const answer of answers) expect(answer === 'busy' || typeof answer === 'object').toBe(true);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it('gives a diff up as busy when it is not done in its time', async () => {
    const pool = createSanitizePool(1, createHtmlMemory(), { diffWaitMs: 1 });
    try {
      expect(await pool.diff(paragraphs(20_000, 'old'), paragraphs(20_000, 'new'))).toBe('busy');
      // The pool goes on: its worker was replaced.
      await pool.ahead(`<p onclick="x()">after</p>${'<p>x</p>'.repeat(IN_THREAD_MAX / 8)}`);
    } finally {
      await pool.close();
    }
  }, 60_000);
});

describe('commands with a sanitise pool', () => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime('postgres', { sanitizeThreads: 1 }));
  }, 60_000);
  afterAll(async () => {
    await runtime?.close();
    await drop?.();
  });

  it('an edit stores the body as sanitised in the worker, with what it removed, the same as without one', async () => {
    const { accountId, siteId } = await setUpAccount(runtime);
    const { articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: 'Pooled',
        body: `${protectedBody(1)}<script>alert(1)</script>`,
        url: 'https://northside.example/pooled',
        status: 'draft',
        publishedAt: null,
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    );
    // Over IN_THREAD_MAX, so that it goes to the worker.
    const filler = `<p>${'Long enough to be sanitised in a worker thread. '.repeat(IN_THREAD_MAX / 40)}</p>`;
    const edited = `${protectedBody(1)}<p onclick="x()">Hello <img src=x onerror=alert(1)></p>${filler}`;
    const expected = structuredClone(sanitizeHtml(edited));
    const result = await runtime.commands.editArticle(
      accountId,
      articleId,
      { body: edited },
      { origin: 'api', actor: apiKeyActor },
    );
    expect(result.article.body).toBe(expected.html);
    expect(result.sanitized).toEqual(expected.removed);
    expect(result.article.body).not.toContain('onclick');
    expect(runtime.html.isSanitizedAhead(edited)).toBe(false);
  });
});
