import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  copyEmbeddedTemplate,
  embeddedTemplateFolder,
  hasEmbeddedTemplate,
  holdsCluster,
  migrationsFingerprint,
} from '../../infra/db/embedded-template.ts';
import { pendingMigrations } from '../../infra/db/migrate.ts';
import { openDatabase } from '../../infra/db/open.ts';

/*
 * The embedded database's migrated cluster, made by `npm install` (infra/db/build-template.ts): named
 * after the migrations' files, copied into a new DATA_DIR with its marker named last, opened with
 * nothing to migrate and no row of anyone's.
 */
describe('the embedded database template', () => {
  let work: string;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'cs-template-test-'));
  });

  afterAll(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('is named after the migrations: a file added, renamed or changed names another template', async () => {
    const folder = join(work, 'migrations');
    await mkdir(folder);
    await writeFile(join(folder, '2026-01-01-001-a.ts'), 'export async function up() {}\n');
    const one = await migrationsFingerprint(folder);
    expect(one).toMatch(/^[0-9a-f]{16}$/);
    expect(await migrationsFingerprint(folder)).toBe(one);
    await writeFile(join(folder, '2026-01-01-001-a.ts'), 'export async function up() { /* changed */ }\n');
    const changed = await migrationsFingerprint(folder);
    expect(changed).not.toBe(one);
    await writeFile(join(folder, '2026-01-02-002-b.ts'), 'export async function up() {}\n');
    expect(await migrationsFingerprint(folder)).not.toBe(changed);
    await writeFile(join(folder, 'README.md'), 'not a migration');
    expect(await migrationsFingerprint(folder)).toBe(await migrationsFingerprint(folder));
  });

  it('copies nothing where there is no template', () => {
    const target = join(work, 'no-template-target');
    expect(copyEmbeddedTemplate(join(work, 'absent'), target)).toBe(false);
    expect(existsSync(target)).toBe(false);
  });

  it('makes a new folder the migrated cluster, keeping what the folder held, and opens it with nothing to do', async () => {
    // `npm install` made it; without it this test says so.
    expect(await hasEmbeddedTemplate()).toBe(true);
    const template = await embeddedTemplateFolder();
    expect(holdsCluster(template)).toBe(false);
    const dataDir = join(work, 'data');
    await mkdir(dataDir);
    await writeFile(join(dataDir, 'kept'), 'a file of the folder (the lock file, say)');
    expect(copyEmbeddedTemplate(template, dataDir)).toBe(true);
    expect(holdsCluster(dataDir)).toBe(true);
    const names = await readdir(dataDir);
    expect(names).toContain('kept');
    expect(names.filter((name) => name.startsWith('PG_VERSION'))).toEqual(['PG_VERSION']);
    // The template is read by whoever runs the service (the image's own user, not the installer); the
    // copy is its owner's alone, as initdb leaves a cluster.
    const modes = (folder: string): Map<string, string> =>
      new Map(
        readdirSync(folder, { withFileTypes: true, recursive: true }).map((e) => {
          const path = join(e.parentPath, e.name);
          return [relative(folder, path), (statSync(path).mode & 0o777).toString(8)];
        }),
      );
    const templateModes = modes(template);
    expect(templateModes.size).toBeGreaterThan(100);
    expect([...new Set(templateModes.values())].sort()).toEqual(['644', '755']);
    const copied = modes(dataDir);
    copied.delete('kept');
    expect(copied.size).toBe(templateModes.size);
    expect([...new Set(copied.values())].sort()).toEqual(['600', '700']);
    const handle = await openDatabase({ dataDir });
    try {
      expect(await pendingMigrations(handle.db)).toEqual([]);
      const rows = await sql<{ events: number; accounts: number; keys: number }>`select
        (select count(*)::int from events) as events,
        (select count(*)::int from accounts) as accounts,
        (select count(*)::int from oauth_keys) as keys`.execute(handle.db);
      expect(rows.rows).toEqual([{ events: 0, accounts: 0, keys: 0 }]);
    } finally {
      await handle.close();
    }
  }, 60_000);

  it('copies again over a copy cut short (its marker not yet named), and opens it', async () => {
    const template = await embeddedTemplateFolder();
    const dataDir = join(work, 'cut-short');
    // What a copy leaves when the process dies before its last step: everything, the marker unnamed.
    expect(copyEmbeddedTemplate(template, dataDir)).toBe(true);
    await rm(join(dataDir, 'PG_VERSION'));
    await writeFile(join(dataDir, 'PG_VERSION.template'), '18\n');
    await rm(join(dataDir, 'global'), { recursive: true });
    expect(holdsCluster(dataDir)).toBe(false);
    const handle = await openDatabase({ dataDir });
    try {
      expect(await pendingMigrations(handle.db)).toEqual([]);
    } finally {
      await handle.close();
    }
    expect(holdsCluster(dataDir)).toBe(true);
  }, 60_000);
});
