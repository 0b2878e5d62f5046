import { mkdtemp, readdir, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { once } from '../../apps/application/idempotency.ts';
import type { Runtime } from '../../apps/runtime.ts';
import type { FeaturedImage } from '../../domain/article/events.ts';
import { requestHash } from '../../infra/idempotency.ts';
import { collectMedia, purgeIdempotency } from '../../infra/jobs/housekeeping.ts';
import { createDirectoryMediaStore, type MediaStore } from '../../infra/media/store.ts';
import { backends } from '../support/db.ts';
import { apiKeyActor, createTestRuntime, pipelineActor, setUpAccount } from '../support/runtime.ts';

const HOUR = 3_600_000;
const NOW = new Date('2026-11-23T12:00:00Z');
const PUBLIC_URL = 'https://content.example.test';

/** A PNG of its own colour: other bytes, another key. */
async function image(background: string): Promise<Buffer> {
  return sharp({ create: { width: 8, height: 6, channels: 3, background } })
    .png()
    .toBuffer();
}

async function filesIn(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => e.name)
    .sort();
}

describe.each(backends)('housekeeping jobs on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let dir: string;
  let media: MediaStore;
  let accountId: string;
  let siteId: string;

  beforeAll(async () => {
    const test = await createTestRuntime(backend);
    runtime = test.runtime;
    drop = test.drop;
    dir = await mkdtemp(path.join(tmpdir(), 'cs-housekeeping-'));
    media = createDirectoryMediaStore(dir);
    ({ accountId, siteId } = await setUpAccount(runtime));
  });
  afterAll(async () => {
    await drop?.();
    await rm(dir, { recursive: true, force: true });
  });

  /** Stores an image, its file dated `hoursAgo` before NOW; returns its key and its featured-image value. */
  async function stored(
    background: string,
    hoursAgo: number,
  ): Promise<{ key: string; image: FeaturedImage }> {
    const put = await media.put(await image(background), 'png', 'image/png');
    const at = new Date(NOW.getTime() - hoursAgo * HOUR);
    await utimes(path.join(dir, put.key.slice(0, 2), put.key), at, at);
    return { key: put.key, image: { url: `${PUBLIC_URL}${put.url}`, alt: '', width: 8, height: 6 } };
  }

  it('collects unreferenced images older than the grace period, and keeps every referenced or young one', async () => {
    const created = await stored('#100000', 72); // referenced by an ArticleCreated
    const old = await stored('#200000', 72); // referenced only by an old revision (replaced since)
    const current = await stored('#300000', 72); // the current featured image
    const restored = await stored('#400000', 72); // referenced by an ArticleRestored only after its own event
    const orphan = await stored('#500000', 25); // unreferenced, older than 24 h
    const young = await stored('#600000', 23); // unreferenced, within the grace period

    const caller = { origin: 'rewrite' as const, actor: pipelineActor };
    const article = (featuredImage: FeaturedImage | null, n: number) =>
      runtime.commands.createArticle(
        accountId,
        {
          siteId,
          title: `Article ${n}`,
          body: `<p>Body ${n}</p>`,
          url: `https://northside.example/${n}`,
          status: 'draft',
          publishedAt: null,
          targetKeyword: null,
          featuredImage,
        },
        caller,
      );
    await article(created.image, 1);
    const { articleId } = await article(null, 2);
    const api = { origin: 'api' as const, actor: apiKeyActor };
    await runtime.commands.replaceFeaturedImage(accountId, articleId, { featuredImage: old.image }, api);
    await runtime.commands.replaceFeaturedImage(accountId, articleId, { featuredImage: current.image }, api);
    const { articleId: other } = await article(null, 3);
    await runtime.commands.replaceFeaturedImage(accountId, other, { featuredImage: restored.image }, api);
    await runtime.commands.replaceFeaturedImage(accountId, other, { featuredImage: young.image }, api);
    await runtime.commands.restoreRevision(accountId, other, { revision: 2 }, api);
    // `young` was referenced by revision 3 of `other`: to have an unreferenced young file, store another.
    const unreferencedYoung = await stored('#700000', 1);

    const before = await filesIn(dir);
    const dry = await collectMedia({ db: runtime.db, media, now: () => NOW, dryRun: true });
    expect(dry).toMatchObject({ scanned: 7, removed: 1, dryRun: true });
    expect(await filesIn(dir)).toEqual(before);

    const summary = await collectMedia({ db: runtime.db, media, now: () => NOW });
    expect(summary).toMatchObject({ scanned: 7, referenced: 4, young: 2, removed: 1, dryRun: false });
    const after = await filesIn(dir);
    expect(after).toEqual(
      [created, old, current, restored, young, unreferencedYoung].map((s) => s.key).sort(),
    );
    expect(after).not.toContain(orphan.key);
    expect(await media.get(orphan.key)).toBeNull();

    // A shorter grace period takes the young unreferenced one too; referenced ones stay whatever their age.
    const again = await collectMedia({ db: runtime.db, media, now: () => NOW, graceHours: 0 });
    expect(again).toMatchObject({ removed: 1, referenced: 5 });
    expect(await filesIn(dir)).not.toContain(unreferencedYoung.key);
  });

  it('keeps an old unreferenced image stored again since it was listed (a write in flight)', async () => {
    const again = await stored('#800000', 48);
    // The same bytes stored again (a new write of the same image): renewed, so it is kept.
    await media.put(await image('#800000'), 'png', 'image/png');
    const summary = await collectMedia({ db: runtime.db, media, now: () => new Date() });
    expect(summary.removed).toBe(0);
    expect(await filesIn(dir)).toContain(again.key);
    // And the store's own check: a file renewed after the cutoff is not removed.
    expect(await media.remove(again.key, new Date(Date.now() - HOUR))).toBe(false);
    const kept = await media.get(again.key);
    expect(kept).not.toBeNull();
    kept?.stream.destroy();
  });

  it('purges idempotency records older than 24 hours and keeps younger ones, which still replay', async () => {
    const request = ['PATCH', '/api/v1/articles/art_1'];
    const answer = { revision: 2 };
    let runs = 0;
    const work = async () => {
      runs++;
      return answer;
    };
    const hash = requestHash(request);
    await once(runtime.db, accountId, { key: 'young-key', request }, work);
    expect(runs).toBe(1);
    for (const [key, hoursAgo] of [
      ['old-1', 25],
      ['old-2', 24 * 30],
      ['recent', 23],
    ] as const) {
      await runtime.db
        .insertInto('idempotency_keys')
        .values({
          account_id: accountId,
          key,
          request_hash: hash,
          status: 200,
          headers: JSON.stringify({}),
          body: JSON.stringify({ big: 'x'.repeat(1000) }),
          created_at: new Date(Date.now() - hoursAgo * HOUR),
        })
        .execute();
    }
    const keys = async (): Promise<string[]> =>
      (
        await runtime.db
          .selectFrom('idempotency_keys')
          .select('key')
          .where('account_id', '=', accountId)
          .orderBy('key')
          .execute()
      ).map((r) => r.key);

    expect(await purgeIdempotency({ db: runtime.db, now: () => new Date() })).toEqual({ purged: 2 });
    expect(await keys()).toEqual(['recent', 'young-key']);
    // Nothing more to purge: the job is idempotent.
    expect(await purgeIdempotency({ db: runtime.db, now: () => new Date() })).toEqual({ purged: 0 });

    // A retry within 24 hours still gets the first answer, without running the work again.
    const retry = await once(runtime.db, accountId, { key: 'young-key', request }, work);
    expect(retry).toEqual({ replayed: true, value: answer });
    expect(runs).toBe(1);
    const count = await sql<{ n: number }>`select count(*)::int as n from idempotency_keys`.execute(
      runtime.db,
    );
    expect(count.rows[0]?.n).toBe(2);
  });
});
