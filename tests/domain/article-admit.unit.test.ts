import { hash as argon2Hash } from '@node-rs/argon2';
import { describe, expect, it } from 'vitest';
import { isPasswordHash } from '../../domain/account/password.ts';
import {
  type ArticleCommand,
  type ArticleState,
  admitArticleEvent,
  decide,
  evolve,
  initialState,
  type StoredArticle,
} from '../../domain/article/decider.ts';
import type { ArticleEvent } from '../../domain/article/events.ts';
import { articleCreated, apiKey as key, metadata, pipeline, withBacklink } from '../support/events.ts';

/*
 * admitArticleEvent (what an import checks of each stored article event) takes every event `decide`
 * makes, whatever the sequence of commands, and refuses what no write makes.
 */

/** A small deterministic generator (mulberry32), so that a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const who = (origin: 'api' | 'rewrite' | 'editor') => ({
  articleId: 'art_1',
  origin,
  actor: origin === 'rewrite' ? pipeline : key,
  reason: null,
});

/** A command a write could send on the article as it is (`history`: its states by revision). */
function someCommand(next: () => number, state: ArticleState, history: ArticleState[]): ArticleCommand {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  const current = state.exists ? state.body : '';
  const bodies = [
    `${current}<p>more ${Math.floor(next() * 100)}</p>`,
    `<p>kept first</p>${current}`,
    `${current}<script>alert(1)</script><img src="x" onerror="alert(1)"><a href="javascript:x">x</a>`,
    `${current}<a href="https://new.example/" data-service-protected="backlink" data-service-id="bl_${Math.floor(next() * 9)}">new</a>`,
    '<p>no links left</p>',
  ];
  switch (Math.floor(next() * 5)) {
    case 0:
      return {
        type: 'EditArticle',
        data: { ...who(pick(['api', 'rewrite', 'editor'])), body: pick(bodies) },
        metadata,
      };
    case 1:
      return { type: 'EditArticle', data: { ...who('api'), title: pick(['New title', 'Other']) }, metadata };
    case 2:
      return {
        type: 'ReplaceFeaturedImage',
        data: {
          ...who('editor'),
          featuredImage: {
            url: `https://img.example/${Math.floor(next() * 5)}.png`,
            alt: 'a',
            width: 8,
            height: 8,
          },
        },
        metadata,
      };
    case 3: {
      const revision = 1 + Math.floor(next() * history.length);
      return {
        type: 'RestoreRevision',
        data: { ...who('editor'), revision, snapshot: history[revision - 1] as ArticleState },
        metadata,
      };
    }
    default:
      return {
        type: 'ChangeArticleStatus',
        data: { ...who('api'), status: pick(['draft', 'archived'] as const), publishedAt: null },
        metadata,
      };
  }
}

describe('admitArticleEvent', () => {
  it('admits every event decide makes, over 150 random histories', () => {
    const admitted = new Map<string, number>();
    for (let seed = 1; seed <= 150; seed++) {
      const next = random(seed);
      let state: ArticleState = initialState;
      const history: ArticleState[] = [];
      let stored: StoredArticle | undefined;
      const create: ArticleCommand = { type: 'CreateArticle', data: articleCreated().data, metadata };
      const commands = [create];
      for (let step = 0; step < 12; step++) {
        const command = commands.shift() ?? someCommand(next, state, history);
        let events: ArticleEvent[];
        try {
          events = decide(command, state);
        } catch {
          continue; // refused by the write: nothing stored
        }
        for (const event of events) {
          stored = admitArticleEvent(stored, event);
          admitted.set(event.type, (admitted.get(event.type) ?? 0) + 1);
          state = evolve(state, event);
          history.push(state);
        }
      }
      expect(stored?.revision, `seed ${seed}`).toBe(state.revision);
    }
    // Every kind of article event was made, many times.
    expect([...admitted.keys()].sort()).toEqual([
      'ArticleCreated',
      'ArticleEdited',
      'ArticleRestored',
      'ArticleStatusChanged',
      'FeaturedImageReplaced',
    ]);
    expect(Math.min(...admitted.values())).toBeGreaterThan(50);
  });

  it('refuses a body the sanitiser would change, a forged protected block and a skipped revision', () => {
    const created = articleCreated();
    const stored = admitArticleEvent(undefined, created);
    expect(() =>
      admitArticleEvent(undefined, articleCreated({ body: '<p>x</p><script>alert(1)</script>' })),
    ).toThrow(/The body is not one the sanitiser stores: it holds <script> at script\[1\]/);
    const edit = (body: string, revision = 2): ArticleEvent => ({
      type: 'ArticleEdited',
      data: { ...who('api'), revision, body, sanitized: [] },
      metadata,
    });
    expect(() => admitArticleEvent(stored, edit(`${withBacklink('bl_1')}${withBacklink('bl_2')}`))).toThrow(
      /bl_2 forged/,
    );
    expect(() => admitArticleEvent(stored, edit(withBacklink('bl_1'), 3))).toThrow(/not the next one \(2\)/);
    expect(admitArticleEvent(stored, edit(`<p>moved</p>${withBacklink('bl_1')}`)).revision).toBe(2);
  });
});

describe('isPasswordHash', () => {
  it("takes the service's own argon2id hashes and refuses weaker or other forms", async () => {
    const hash = await argon2Hash('correct horse battery staple');
    expect(isPasswordHash(hash)).toBe(true);
    expect(isPasswordHash(hash.replace('m=19456,t=2,p=1', 'm=4096,t=1,p=1'))).toBe(false);
    expect(isPasswordHash(hash.replace('$argon2id$', '$argon2i$'))).toBe(false);
    expect(isPasswordHash('5f4dcc3b5aa765d61d8327deb882cf99')).toBe(false);
  });
});
