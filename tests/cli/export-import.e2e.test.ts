import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../infra/db/open.ts';
import type { Db } from '../../infra/db/schema.ts';
import { type Receiver, startReceiver } from '../../reliability/crash-support.ts';
import { type Backend, backends, createTestDatabase, type TestDatabase } from '../support/db.ts';
import {
  findInstallation,
  type Installation,
  installationSnapshot,
  seedInstallation,
} from '../support/installation.ts';
import { cli } from '../support/process.ts';
import { catchUpAll } from '../support/runtime.ts';

/*
 * `export` then `import` (docs/operations.md, "Export and import"), through the real CLI, from each
 * backend into an empty database of each: the imported installation's read models (replayed from the
 * imported log) are the source's row for row, as text; so are the log and every source-of-truth table;
 * the images are in the target's media folder. Across backends a real server on the copy finds
 * everything (installation.ts findInstallation): sign-in, the key, history, activity, the image, the
 * assistant's tokens, the webhook going on where it was.
 */

const HEAVY = 240_000;

let receiver: Receiver;
let dir: string;
const databases: TestDatabase[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  dir = await mkdtemp(join(tmpdir(), 'cs-export-'));
});

afterAll(async () => {
  for (const db of databases) await db.drop();
  await receiver?.close();
  await rm(dir, { recursive: true, force: true });
});

/** Where an installation of `kind` keeps its data in this test: its environment, and its database. */
async function place(
  kind: Backend,
  name: string,
): Promise<{ env: Record<string, string>; open(): Promise<{ db: Db; close(): Promise<void> }> }> {
  const media = join(dir, `${name}-media`);
  if (kind === 'postgres') {
    const test = await createTestDatabase('postgres');
    databases.push(test);
    return {
      env: {
        DATABASE_URL: test.databaseUrl as string,
        DATA_DIR: join(dir, `${name}-unused`),
        MEDIA_DIR: media,
      },
      open: async () => ({ db: test.handle.db, close: async () => {} }),
    };
  }
  const dataDir = join(dir, name);
  return {
    env: { DATA_DIR: dataDir, MEDIA_DIR: media },
    open: async () => {
      const handle = await openDatabase({ dataDir });
      return { db: handle.db, close: () => handle.close() };
    },
  };
}

describe.each(backends)('an installation on %s', (sourceKind) => {
  let installation: Installation;
  let archive: string;
  let before: Record<string, string[]>;
  let sourceMedia: string;

  beforeAll(async () => {
    const source = await place(sourceKind, `source-${sourceKind}`);
    sourceMedia = source.env.MEDIA_DIR as string;
    installation = await seedInstallation(source.env, receiver);
    // The async read models caught up, as the source's own projectors would have them.
    const opened = await source.open();
    try {
      await catchUpAll(opened.db);
      before = await installationSnapshot(opened.db);
    } finally {
      await opened.close();
    }
    archive = join(dir, `${sourceKind}.tar.gz`);
    const exported = await cli(['export', '--to', archive], source.env);
    expect(exported.code, exported.stderr).toBe(0);
    const summary = JSON.parse(exported.stdout) as { counts: Record<string, number> };
    expect(summary.counts).toMatchObject({ media: 1, webhook_endpoints: 1, oauth_grants: 1 });
    expect(summary.counts.events).toBe(before.events?.length);
    // A second export to the same name is refused, and the first archive is kept.
    const again = await cli(['export', '--to', archive], source.env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('exists already');
  }, HEAVY);

  it.each(backends)(
    'imports into an empty %s database: read models, log and sources of truth equal the source',
    async (targetKind) => {
      const target = await place(targetKind, `from-${sourceKind}-to-${targetKind}`);
      const imported = await cli(['import', '--from', archive], target.env);
      expect(imported.code, imported.stderr).toBe(0);
      const opened = await target.open();
      let after: Record<string, string[]>;
      try {
        after = await installationSnapshot(opened.db);
      } finally {
        await opened.close();
      }
      expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort());
      for (const [table, rows] of Object.entries(before)) {
        expect(after[table], table).toEqual(rows);
      }
      expect(before['source:oauth_grants']?.length).toBe(1);
      expect(before['source:webhook_deliveries']?.length).toBeGreaterThanOrEqual(6);

      const key = new URL(installation.imageUrl).pathname.split('/').pop() as string;
      const copied = join(target.env.MEDIA_DIR as string, key.slice(0, 2), key);
      expect((await readFile(copied)).equals(installation.image)).toBe(true);
      // The image keeps the time it was stored at, to the second (the media collector reads it).
      const original = join(sourceMedia, key.slice(0, 2), key);
      const seconds = async (file: string): Promise<number> => Math.floor((await stat(file)).mtimeMs / 1000);
      expect(await seconds(copied)).toBe(await seconds(original));

      if (targetKind !== sourceKind) await findInstallation(target.env, installation, receiver);
    },
    HEAVY,
  );
});
