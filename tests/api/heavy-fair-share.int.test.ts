import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { buildApp } from '../../apps/server/app.ts';
import {
  createHeavyWork,
  HEAVY_BUSY_DETAIL,
  HEAVY_WAITING_PER_ACCOUNT,
  type HeavyWork,
} from '../../apps/server/http/heavy-work.ts';
import { createPerson } from '../oauth/helpers.ts';
import { injectBrowser, signInWith } from '../support/inject-browser.ts';
import { addSiteWithArticle, createTestRuntime, pipelineActor, protectedBody } from '../support/runtime.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * One account's large requests cannot make another's fail or wait long (docs/operations.md "Large
 * requests"): the heavy work's turns are shared between accounts. Each scenario holds the one turn
 * with a request of its own while the accounts' requests arrive, so that the order they are let in
 * is the queue's, not the machine's speed; the test then lets the turn go and reads that order.
 */

/** An article body of about 1.9 MiB that keeps the article's protected links. */
const LARGE_BODY = `${protectedBody(1)}<p>${'word '.repeat(380_000)}</p>`;
/** The heavy-page budget, the API's quota (RATE_LIMIT_PER_MINUTE's default). */
const HEAVY_PAGES_PER_MINUTE = 60;

let app: FastifyInstance;
let runtime: Runtime;
let drop: () => Promise<void>;
let heavy: HeavyWork;
/** Who was let into heavy work, in order: `hold`, or the label of the article the request is about. */
const admitted: string[] = [];
/** Article id to the label `admitted` records for requests about it. */
const labels = new Map<string, string>();
let releaseHold: () => void = () => {};

beforeAll(async () => {
  ({ runtime, drop } = await createTestRuntime('postgres'));
  // Requests wait as long as the test needs them to (the busy machine must not turn them into 503s).
  const inner = createHeavyWork({ waitMs: 120_000 });
  heavy = {
    ...inner,
    async admit(request, reply) {
      await inner.admit(request, reply);
      const id = /\/articles\/([^/?]+)/.exec(request.url)?.[1] ?? '';
      admitted.push(request.url === '/test/hold' ? 'hold' : (labels.get(id) ?? request.url));
    },
  };
  app = await buildApp({
    runtime,
    config: { PUBLIC_URL: 'http://cs.example.test', LOG_LEVEL: 'silent', MEDIA_DIR: '/tmp/cs-heavy-test' },
    logger: false,
    heavy,
  });
  // Holds the heavy turn until the test lets it go.
  app.get('/test/hold', async (request, reply) => {
    await heavy.admit(request, reply);
    await new Promise<void>((resolve) => {
      releaseHold = resolve;
    });
    return { held: true };
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await drop?.();
});

beforeEach(() => {
  admitted.length = 0;
});

/** Takes the heavy turn and keeps it until `release` is called. */
async function holdTheTurn(): Promise<{ release: () => Promise<void> }> {
  const held = app.inject({ method: 'GET', url: '/test/hold' });
  await vi.waitFor(() => expect(admitted).toEqual(['hold']), PATIENCE);
  return {
    async release() {
      releaseHold();
      expect((await held).statusCode).toBe(200);
    },
  };
}

/** An account with an API key and an article whose body is about 1.9 MiB, labelled `label`. */
async function apiAccount(label: string): Promise<{ key: string; path: string }> {
  const { accountId } = await createPerson(runtime, label);
  const { articleId } = await addSiteWithArticle(runtime, accountId);
  labels.set(articleId, label);
  const { key } = await runtime.commands.createApiKey(accountId, { name: 'Test key', scope: 'write' });
  return { key, path: `/api/v1/articles/${articleId}` };
}

function largePut(who: { key: string; path: string }): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'PUT',
    url: who.path,
    headers: { authorization: `Bearer ${who.key}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ body: LARGE_BODY, reason: 'a large edit' }),
  });
}

/** Sends every request at once; `settled` counts the answers received so far. */
function all(requests: Array<Promise<LightMyRequestResponse>>): {
  answers: Promise<LightMyRequestResponse[]>;
  settled: () => number;
} {
  let settled = 0;
  const counted = requests.map((r) =>
    r.finally(() => {
      settled++;
    }),
  );
  return { answers: Promise.all(counted), settled: () => settled };
}

const statuses = (answers: LightMyRequestResponse[]): Record<number, number> =>
  answers.reduce<Record<number, number>>((n, a) => {
    n[a.statusCode] = (n[a.statusCode] ?? 0) + 1;
    return n;
  }, {});

describe("one account's large requests and another's", () => {
  it("A's 120 revision pages of its 2 MiB article leave B's 2 MiB API edit a turn after one of A's: B is served, A's excess refused", async () => {
    const a = await createPerson(runtime, 'Account A');
    const { siteId } = await runtime.commands.addSite(a.accountId, {
      name: 'Northside Plumbing',
      domain: 'northside.example',
      url: 'https://northside.example/',
    });
    const { articleId } = await runtime.commands.createArticle(
      a.accountId,
      {
        siteId,
        title: 'Boilers at length',
        body: LARGE_BODY,
        url: 'https://northside.example/boilers',
        status: 'draft',
        publishedAt: null,
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: pipelineActor },
    );
    labels.set(articleId, 'A');
    await runtime.commands.editArticle(
      a.accountId,
      articleId,
      { body: `${LARGE_BODY}<p>One more line.</p>` },
      { origin: 'rewrite', actor: pipelineActor },
    );
    const browser = injectBrowser(app, { remoteAddress: '198.51.100.21' });
    await signInWith(browser, a);
    const b = await apiAccount('B');

    const hold = await holdTheTurn();
    const pages = all(Array.from({ length: 120 }, () => browser.get(`/articles/${articleId}/revisions/1`)));
    // Every page is answered now (refused) or waits for its turn.
    await vi.waitFor(() => expect(pages.settled() + heavy.waiting()).toBe(120), PATIENCE);
    const waitingBefore = heavy.waiting();
    const edit = all([largePut(b)]);
    await vi.waitFor(() => expect(edit.settled() + heavy.waiting()).toBe(waitingBefore + 1), PATIENCE);
    await hold.release();

    const [bAnswer] = await edit.answers;
    expect(bAnswer?.statusCode).toBe(200);
    expect(bAnswer?.json()).toMatchObject({ revision: 2 });
    const answers = await pages.answers;
    // B was let in after the one of A's that was first in line, before A's other waiting pages.
    expect(admitted).toEqual(['hold', 'A', 'B', ...Array(HEAVY_WAITING_PER_ACCOUNT - 1).fill('A')]);
    // 60 a minute pass the heavy-page budget (the rest: 429); of those, A's share waits, the rest 503.
    expect(statuses(answers)).toEqual({
      200: HEAVY_WAITING_PER_ACCOUNT,
      429: 120 - HEAVY_PAGES_PER_MINUTE,
      503: HEAVY_PAGES_PER_MINUTE - HEAVY_WAITING_PER_ACCOUNT,
    });
    const budget = answers.find((p) => p.statusCode === 429);
    expect(budget?.body).toContain('Too many large pages at once');
    expect(Number(budget?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(budget?.headers['ratelimit-policy']).toBe(
      `"pages";q=600;w=60, "heavy-pages";q=${HEAVY_PAGES_PER_MINUTE};w=60`,
    );
    const busy = answers.find((p) => p.statusCode === 503);
    expect(busy?.headers['retry-after']).toBe('1');
    expect(busy?.body).toContain(HEAVY_BUSY_DETAIL);
  }, 120_000);

  it("A's many large API edits leave B's large edit the next turn but one of A's, not a place behind all of them", async () => {
    const a = await apiAccount('A');
    const b = await apiAccount('B');

    const hold = await holdTheTurn();
    const aEdits = all(Array.from({ length: 20 }, () => largePut(a)));
    await vi.waitFor(() => expect(aEdits.settled() + heavy.waiting()).toBe(20), PATIENCE);
    const waitingBefore = heavy.waiting();
    const bEdit = all([largePut(b)]);
    await vi.waitFor(() => expect(bEdit.settled() + heavy.waiting()).toBe(waitingBefore + 1), PATIENCE);
    // B waits: nothing refused it while A's share was full.
    expect(bEdit.settled()).toBe(0);
    await hold.release();

    const [bAnswer] = await bEdit.answers;
    expect(bAnswer?.statusCode).toBe(200);
    const answers = await aEdits.answers;
    // B's edit was let in before A's later-queued ones: A's requests never put it further back than one.
    expect(admitted).toEqual(['hold', 'A', 'B', ...Array(HEAVY_WAITING_PER_ACCOUNT - 1).fill('A')]);
    expect(statuses(answers)).toEqual({
      200: HEAVY_WAITING_PER_ACCOUNT,
      503: 20 - HEAVY_WAITING_PER_ACCOUNT,
    });
    const refused = answers.find((r) => r.statusCode === 503);
    expect(refused?.headers['retry-after']).toBe('1');
    expect(refused?.json()).toMatchObject({ code: 'unavailable', detail: HEAVY_BUSY_DETAIL });
  }, 120_000);
});
