import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { mediaFiles } from '../support/media.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';

type Seed = { account_id: string; api_key: string; sites: { id: string }[] };

/** A day's edits in this server: small, so that the limit is reached within the test. */
const EDITS_PER_DAY = 3;

/** A PNG of its own colour: other bytes, so another stored file. */
async function png(background: string): Promise<{ bytes: Buffer; key: string }> {
  const bytes = await sharp({ create: { width: 40, height: 30, channels: 3, background } })
    .png()
    .toBuffer();
  return { bytes, key: `${createHash('sha256').update(bytes).digest('hex')}.png` };
}

describe('a refused featured-image write stores nothing', () => {
  let db: TestDatabase;
  let dir: string;
  let server: ServerProcess;
  let a: Seed;
  let b: Seed;
  let articleId: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-images-refused-'));
    db = await createTestDatabase('postgres');
    const env = { DATABASE_URL: db.databaseUrl as string, DATA_DIR: dir };
    const seed = async (): Promise<Seed> =>
      JSON.parse(
        (await cli(['seed-demo', '--json', '--sites', '1', '--articles', '2', '--backlinks', '0'], env))
          .stdout,
      ) as Seed;
    a = await seed();
    b = await seed();
    server = await startServer({
      ...env,
      RATE_LIMIT_PER_MINUTE: '100000',
      EDIT_LIMIT_PER_DAY: String(EDITS_PER_DAY),
    });
    const list = (await (
      await fetch(`${server.url}/api/v1/sites/${a.sites[0]?.id}/articles`, {
        headers: { authorization: `Bearer ${a.api_key}` },
      })
    ).json()) as { data: { id: string }[] };
    articleId = list.data[0]?.id as string;
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  const upload = async (key: string, image: Buffer, headers: Record<string, string> = {}) => {
    const form = new FormData();
    form.append('image', new Blob([image]), 'upload.png');
    const res = await fetch(`${server.url}/api/v1/articles/${articleId}/featured-image`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, ...headers },
      body: form,
    });
    return { status: res.status, body: (await res.json()) as { code?: string; revision?: number } };
  };
  const served = async (key: string): Promise<number> => (await fetch(`${server.url}/media/${key}`)).status;
  const media = (): Promise<string[]> => mediaFiles(join(dir, 'media'));

  it('on another account’s article (404), with a stale If-Match (412) and past the edit limit (429)', async () => {
    const images = await Promise.all(['#112233', '#223344', '#334455', '#445566', '#556677'].map(png));
    const [foreign, stale, first, second, over] = images as [
      Awaited<ReturnType<typeof png>>,
      Awaited<ReturnType<typeof png>>,
      Awaited<ReturnType<typeof png>>,
      Awaited<ReturnType<typeof png>>,
      Awaited<ReturnType<typeof png>>,
    ];
    const none = await media();

    const notOurs = await upload(b.api_key, foreign.bytes);
    expect(notOurs.status).toBe(404);
    expect(await media()).toEqual(none);
    expect(await served(foreign.key)).toBe(404);

    // Counts as an edit (it reached the article), and is refused before anything is stored.
    const mismatch = await upload(a.api_key, stale.bytes, { 'if-match': 'W/"7"' });
    expect(mismatch).toMatchObject({ status: 412, body: { code: 'revision_mismatch' } });
    expect(await media()).toEqual(none);
    expect(await served(stale.key)).toBe(404);

    // The accepted writes are stored and served: the edits 2 and 3 of the day.
    const ok = await upload(a.api_key, first.bytes, { 'if-match': 'W/"1"' });
    expect(ok).toMatchObject({ status: 200, body: { revision: 2 } });
    expect(await upload(a.api_key, second.bytes)).toMatchObject({ status: 200, body: { revision: 3 } });
    expect(await served(first.key)).toBe(200);
    expect(await served(second.key)).toBe(200);
    const stored = await media();
    expect(stored).toEqual([first.key, second.key].sort());

    const limited = await upload(a.api_key, over.bytes);
    expect(limited).toMatchObject({ status: 429, body: { code: 'edit_limit_reached' } });
    expect(await media()).toEqual(stored);
    expect(await served(over.key)).toBe(404);
  });
});
