import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import sharp from 'sharp';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { describeContents } from '../../infra/archive/import.ts';
import { projectors } from '../../projections/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { mediaFiles } from '../support/media.ts';
import { baseEnv, CLI_ARGS, cli, NODE, ROOT } from '../support/process.ts';

/*
 * An import stopped by a signal keeps nothing (docs/operations.md, "Export and import"): its
 * transaction rolls back and the images it had written are removed, whether they were still arriving
 * or all written. The import is held, once its image is written, by a transaction of the test that
 * holds the log's position sequence (ALTER SEQUENCE blocks the import's setval until it ends): the
 * signal arrives at a known point, on a busy machine too. On PostgreSQL only: nothing outside the
 * process can hold the embedded database's import at a chosen point.
 */

const HEAVY = 240_000;
const SLOW = { timeout: 180_000, interval: 50 } as const;

let dir: string;
let archive: string;
let target: TestDatabase;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cs-import-signal-'));
  const source = { DATA_DIR: join(dir, 'source'), MEDIA_DIR: join(dir, 'source-media') };
  const seeded = await cli(['seed-demo', '--sites', '1', '--articles', '1', '--backlinks', '1'], source);
  expect(seeded.code, seeded.stderr).toBe(0);
  const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#345612' } })
    .png()
    .toBuffer();
  const key = `${createHash('sha256').update(png).digest('hex')}.png`;
  await mkdir(join(source.MEDIA_DIR, key.slice(0, 2)), { recursive: true });
  await writeFile(join(source.MEDIA_DIR, key.slice(0, 2), key), png);
  archive = join(dir, 'installation.tar.gz');
  const exported = await cli(['export', '--to', archive], source);
  expect(exported.code, exported.stderr).toBe(0);
  target = await createTestDatabase('postgres');
}, HEAVY);

afterAll(async () => {
  await target?.drop();
  await rm(dir, { recursive: true, force: true });
});

it(
  'stopped by SIGTERM once it wrote an image, keeps nothing: no rows, no image',
  async () => {
    const mediaDir = join(dir, 'target-media');
    // The test's transaction holds the sequence until released.
    let release = (): void => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding = (): void => {};
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    const holder = target.handle.db
      .transaction()
      .execute(async (trx) => {
        await sql`alter sequence events_position_seq restart`.execute(trx);
        holding();
        await released;
        throw new Error('rolled back on purpose');
      })
      .catch(() => {});
    await held;

    const child = spawn(NODE, [...CLI_ARGS, 'import', '--from', archive], {
      cwd: ROOT,
      env: { ...baseEnv(), LOG_LEVEL: 'warn', DATABASE_URL: target.databaseUrl, MEDIA_DIR: mediaDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.stdout.resume();
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    let ended = false;
    void exited.then(() => {
      ended = true;
    });
    try {
      // The image is written (the import waits for the sequence after it).
      await vi.waitFor(async () => {
        expect(ended, stderr).toBe(false);
        expect(await mediaFiles(mediaDir)).toHaveLength(1);
      }, SLOW);
      child.kill('SIGTERM');
      // The import says it stops (or, not handling the signal, is gone).
      await vi.waitFor(() => {
        expect(ended || /SIGTERM: stopping/.test(stderr)).toBe(true);
      }, SLOW);
    } finally {
      release();
      await holder;
    }
    const { code, signal } = await exited;
    expect({ code, signal }, stderr).toEqual({ code: 143, signal: null });
    expect(stderr).toMatch(/the import was stopped by SIGTERM and nothing of it was kept/);
    expect(await mediaFiles(mediaDir)).toEqual([]);
    expect(await describeContents(target.handle.db, projectors)).toEqual([]);

    // Nothing held, the same archive imports whole.
    const again = await cli(['import', '--from', archive], {
      DATABASE_URL: target.databaseUrl,
      MEDIA_DIR: mediaDir,
    });
    expect(again.code, again.stderr).toBe(0);
    expect(await mediaFiles(mediaDir)).toHaveLength(1);
  },
  HEAVY,
);
