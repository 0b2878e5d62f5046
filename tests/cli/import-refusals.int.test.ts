import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { sql } from 'kysely';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATION_TABLES, SOURCE_TABLES } from '../../infra/archive/format.ts';
import { describeContents } from '../../infra/archive/import.ts';
import { openDatabase } from '../../infra/db/open.ts';
import { projectors } from '../../projections/index.ts';
import { archiveEntries, type Entry, editRows, sealed, tarEntries, tarOf } from '../support/archive.ts';
import { backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { mediaFiles } from '../support/media.ts';
import { cli } from '../support/process.ts';

/*
 * `import` refuses what it cannot load whole, before it writes anything (docs/operations.md, "Export
 * and import"): an archive cut short anywhere (in the gzip stream, in a tar header, inside a part), a
 * part whose bytes changed, one without its manifest, a manifest of an unknown format version, a file
 * that is no archive, and a target that is not empty. Each is one line on stderr and exit code 1, and
 * the target is left empty (on PGlite its folder is not even made). A load that fails midway (a row
 * the database refuses) is rolled back whole, images included.
 */

let source: TestDatabase;
let dir: string;
let good: Buffer;
let sourceEnv: Record<string, string>;

const entriesOf = tarEntries;

/** The good archive's entries as (name, bytes), for rewriting. */
function goodEntries(): Entry[] {
  return archiveEntries(good);
}

async function write(name: string, bytes: Buffer): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, bytes);
  return file;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cs-refusals-'));
  source = await createTestDatabase('postgres');
  sourceEnv = { DATABASE_URL: source.databaseUrl as string, MEDIA_DIR: join(dir, 'source-media') };
  const seeded = await cli(['seed-demo', '--sites', '1', '--articles', '3', '--backlinks', '2'], sourceEnv);
  expect(seeded.code, seeded.stderr).toBe(0);
  // An image in the store, so that an import has one to write.
  const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#123456' } })
    .png()
    .toBuffer();
  const key = `${createHash('sha256').update(png).digest('hex')}.png`;
  await mkdir(join(sourceEnv.MEDIA_DIR as string, key.slice(0, 2)), { recursive: true });
  await writeFile(join(sourceEnv.MEDIA_DIR as string, key.slice(0, 2), key), png);
  const exported = await cli(['export', '--to', join(dir, 'good.tar.gz')], sourceEnv);
  expect(exported.code, exported.stderr).toBe(0);
  good = await readFile(join(dir, 'good.tar.gz'));
}, 120_000);

afterAll(async () => {
  await source?.drop();
  await rm(dir, { recursive: true, force: true });
});

it('knows every table of the schema: a read model, the event store, a source of truth, or the migrations', async () => {
  const { rows } = await sql<{ name: string }>`
    select table_name as name from information_schema.tables
    where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`.execute(source.handle.db);
  const known = new Set<string>([
    ...projectors.flatMap((p) => p.tables),
    'events',
    'checkpoints',
    ...SOURCE_TABLES.map((t) => t.name),
    ...MIGRATION_TABLES,
  ]);
  expect(rows.map((r) => r.name).filter((name) => !known.has(name))).toEqual([]);
  // A read model is never in the archive: the import replays it.
  const readModels = new Set<string>(projectors.flatMap((p) => p.tables));
  expect(SOURCE_TABLES.filter((t) => readModels.has(t.name))).toEqual([]);
});

describe.each(backends)('into %s', (kind) => {
  let target: TestDatabase | undefined;
  let env: Record<string, string>;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = join(dir, `target-${kind}`);
    if (kind === 'postgres') {
      target = await createTestDatabase('postgres');
      env = { DATABASE_URL: target.databaseUrl as string, MEDIA_DIR: join(dir, `media-${kind}`) };
    } else {
      env = { DATA_DIR: dataDir, MEDIA_DIR: join(dir, `media-${kind}`) };
    }
  });
  afterAll(async () => {
    await target?.drop();
  });

  /** Runs the import and checks the refusal: one line naming `why`, exit 1, nothing written. */
  async function refused(file: string, why: RegExp): Promise<void> {
    const r = await cli(['import', '--from', file], env);
    expect(r.code, r.stderr).toBe(1);
    const lines = r.stderr.split('\n').filter((l) => l.trim() !== '' && !/^(verify|load|replay)\b/.test(l));
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(why);
    expect(r.stdout).toBe('');
    await expectEmpty();
  }

  async function expectEmpty(): Promise<void> {
    expect(await mediaFiles(env.MEDIA_DIR as string)).toEqual([]);
    if (target) expect(await describeContents(target.handle.db, projectors)).toEqual([]);
    else if (existsSync(dataDir)) {
      const handle = await openDatabase({ dataDir });
      try {
        expect(await describeContents(handle.db, projectors)).toEqual([]);
      } finally {
        await handle.close();
      }
    }
  }

  it('refuses an archive cut short in its gzip stream, at several points', async () => {
    for (const keep of [10, Math.floor(good.length / 2), good.length - 4]) {
      await refused(await write(`cut-${keep}.tar.gz`, good.subarray(0, keep)), /truncated|cannot be read/);
    }
    if (kind === 'pglite') expect(existsSync(dataDir)).toBe(false);
  });

  it('refuses a tar cut inside a part and one cut before its manifest', async () => {
    const tar = gunzipSync(good);
    const entries = entriesOf(tar);
    const events = entries.find((e) => e.path.startsWith('events/'));
    const manifest = entries.find((e) => e.path === 'manifest.json');
    if (!events || !manifest) throw new Error('the export has no events or no manifest');
    await refused(
      await write('inside-part.tar.gz', gzipSync(tar.subarray(0, events.body + Math.floor(events.size / 2)))),
      /ends inside events\/000001\.ndjson \(truncated\)/,
    );
    await refused(
      await write('before-manifest.tar.gz', gzipSync(tar.subarray(0, manifest.header))),
      /truncated/,
    );
  });

  it('refuses a part with a flipped byte (its checksum), and an image whose bytes are not its name', async () => {
    const tar = Buffer.from(gunzipSync(good));
    const events = entriesOf(tar).find((e) => e.path.startsWith('events/'));
    if (!events) throw new Error('no events part');
    const at = events.body + 20;
    tar[at] = (tar[at] as number) ^ 0x01;
    await refused(
      await write('flipped.tar.gz', gzipSync(tar)),
      /events\/000001\.ndjson does not match its checksum in the manifest/,
    );
    // An image's checksum is its name.
    const clean = Buffer.from(gunzipSync(good));
    const image = entriesOf(clean).find((e) => e.path.startsWith('media/'));
    if (!image) throw new Error('no image');
    const inImage = image.body + image.size - 1;
    clean[inImage] = (clean[inImage] as number) ^ 0x01;
    await refused(
      await write('flipped-image.tar.gz', gzipSync(clean)),
      /media\/[0-9a-f]{2}\/[0-9a-f]{64}\.png does not hold the image its name says/,
    );
  });

  it('refuses an archive without its manifest, and one of an unknown format version', async () => {
    const entries = goodEntries();
    await refused(
      await write('no-manifest.tar.gz', gzipSync(tarOf(entries.filter((e) => e.path !== 'manifest.json')))),
      /no manifest\.json/,
    );
    const future = entries.map((e) =>
      e.path === 'manifest.json'
        ? { ...e, bytes: Buffer.from(JSON.stringify({ ...JSON.parse(e.bytes.toString()), version: 99 })) }
        : e,
    );
    await refused(await write('future.tar.gz', gzipSync(tarOf(future))), /format version 99/);
    await refused(await write('not-an-archive.txt', Buffer.from('hello\n')), /an archive that `export` made/);
  });

  it('rolls back a load that fails midway: nothing kept, images removed', async () => {
    // The second event given the first one's id: every checksum, count and rule is right, the database
    // refuses it (event ids are unique).
    const entries = editRows(goodEntries(), 'events/000001.ndjson', (rows) =>
      rows.map((r, i) => (i === 1 ? { ...r, event_id: rows[0]?.event_id } : r)),
    );
    // The images come before the manifest and after the tables and events: written, then removed.
    const media = entries.filter((e) => e.path.startsWith('media/'));
    expect(media).toHaveLength(1);
    const reordered = [...media, ...entries.filter((e) => !e.path.startsWith('media/'))];
    await refused(
      await write('fails-midway.tar.gz', sealed(reordered)),
      /the import failed and nothing of it was kept.*duplicate key/,
    );
  });

  it('refuses a target that is not empty, saying what is in it, and leaves it as it was', async () => {
    const first = await cli(['import', '--from', join(dir, 'good.tar.gz')], env);
    expect(first.code, first.stderr).toBe(0);
    expect(await mediaFiles(env.MEDIA_DIR as string)).toHaveLength(1);
    const again = await cli(['import', '--from', join(dir, 'good.tar.gz')], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/the target database is not empty \(\d+ events, .*\d+ credentials/);
    const count = async (): Promise<number> => {
      const handle = target ? undefined : await openDatabase({ dataDir });
      try {
        const db = target?.handle.db ?? handle?.db;
        if (!db) throw new Error('no database');
        return Number(
          (await sql<{ n: string }>`select count(*) as n from events`.execute(db)).rows[0]?.n ?? 0,
        );
      } finally {
        await handle?.close();
      }
    };
    const exported = JSON.parse(
      (await cli(['export', '--to', join(dir, `again-${kind}.tar.gz`)], sourceEnv)).stdout,
    ) as { counts: { events: number } };
    expect(await count()).toBe(exported.counts.events);
  }, 180_000);
});
