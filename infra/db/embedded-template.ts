import { createHash, randomUUID } from 'node:crypto';
import { chmodSync, cpSync, existsSync, readdirSync, renameSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';

/*
 * The embedded database as a first start finds it, made once: PGlite's initdb and this code's
 * migrations (most of a first start) run at install time (`npm install`'s postinstall,
 * infra/db/build-template.ts), and the data folder they leave, closed cleanly, is kept; a new DATA_DIR
 * is a copy of it, which PGlite then opens as it opens any existing folder. The folder is named after
 * PGlite's version and a fingerprint of the migrations' files: another version's, or one made before a
 * migration was added or changed, is not used. Without one (an install with --ignore-scripts, a
 * checkout moved on without an install) a new DATA_DIR is made by initdb and migrated at its start:
 * the same database, only slower. The template holds no secret: the authorization server's keys and
 * the web secret are made by the first start (apps/server/oauth/keys.ts), and no migration writes a
 * row of its own.
 */

const ROOT = resolve(import.meta.dirname, '../..');
const MIGRATIONS = join(ROOT, 'infra/db/migrations');
const CACHE = join(ROOT, 'node_modules/.cache/content-service');
/** The file a cluster's folder is known by. */
const MARKER = 'PG_VERSION';
/**
 * The template's marker file under another name: a copy gives it its name last (a rename), so that a
 * copy cut short is not taken for a cluster, and the next start copies again.
 */
const TEMPLATE_MARKER = `${MARKER}.template`;

/** PGlite's version, from its package.json. */
async function pgliteVersion(): Promise<string> {
  const file = new URL('../package.json', import.meta.resolve('@electric-sql/pglite'));
  return (JSON.parse(await readFile(file, 'utf8')) as { version: string }).version;
}

/** The first 16 hex digits of the SHA-256 of the migrations' file names and contents, in name order. */
export async function migrationsFingerprint(folder = MIGRATIONS): Promise<string> {
  const names = (await readdir(folder)).filter((name) => name.endsWith('.ts')).sort();
  const hash = createHash('sha256');
  for (const name of names)
    hash
      .update(`${name}\0`)
      .update(await readFile(join(folder, name)))
      .update('\0');
  return hash.digest('hex').slice(0, 16);
}

/** Where the migrated cluster made by this version of PGlite with these migrations is kept. */
export async function embeddedTemplateFolder(): Promise<string> {
  const [version, fingerprint] = await Promise.all([pgliteVersion(), migrationsFingerprint()]);
  return join(CACHE, `pglite-${version}-migrations-${fingerprint}`);
}

/** Whether `folder` holds a cluster (its marker file is there). */
export function holdsCluster(folder: string): boolean {
  return existsSync(join(folder, MARKER));
}

/** Whether the migrated cluster for this version of PGlite and these migrations is there. */
export async function hasEmbeddedTemplate(): Promise<boolean> {
  return existsSync(join(await embeddedTemplateFolder(), TEMPLATE_MARKER));
}

/**
 * Copies the migrated cluster into `location` (a folder that holds none; made if missing, what is in it
 * kept), its marker file named last: true, or false when there is no template for this version of
 * PGlite and these migrations (it is a cache: initdb and the migrations make the same database).
 * Synchronous: Node copies a folder natively only so, 0.15 to 0.2 s for the 41 MB, 1,150 files of the
 * template against 0.7 to 0.9 s asynchronously (2-core VM); it runs in the engine's thread.
 */
export function copyEmbeddedTemplate(template: string, location: string): boolean {
  if (!existsSync(join(template, TEMPLATE_MARKER))) return false;
  cpSync(template, location, { recursive: true });
  // The copy its owner's alone, as a cluster initdb makes (the template is readable by all).
  for (const entry of readdirSync(template, { withFileTypes: true, recursive: true })) {
    const path = join(location, relative(template, join(entry.parentPath, entry.name)));
    chmodSync(path, entry.isDirectory() ? 0o700 : 0o600);
  }
  renameSync(join(location, TEMPLATE_MARKER), join(location, MARKER));
  return true;
}

/**
 * The template readable by every user, its folders searchable: it is copied by whoever runs the
 * service, who need not be who installed it (the container image's own user; an install by root),
 * and PGlite leaves some of its files to their owner alone. It holds no secret (above).
 */
async function readableByAll(folder: string): Promise<void> {
  await chmod(folder, 0o755);
  for (const entry of await readdir(folder, { withFileTypes: true, recursive: true })) {
    await chmod(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o644);
  }
}

/**
 * Makes the migrated cluster unless it is there: a data folder beside its place, opened as the server
 * opens one (initdb, as no template is there yet) and migrated as a start migrates it, closed, then
 * renamed into its place, so that a reader finds it whole or not at all.
 */
export async function buildEmbeddedTemplate(): Promise<{ folder: string; built: boolean }> {
  const folder = await embeddedTemplateFolder();
  if (await hasEmbeddedTemplate()) {
    // One made by an install before its files were readable by all.
    await readableByAll(folder);
    return { folder, built: false };
  }
  // Loaded here only: the engine's thread reads the template through this module.
  const [{ openDatabase }, { migrateToLatest }] = await Promise.all([
    import('./open.ts'),
    import('./migrate.ts'),
  ]);
  const work = join(CACHE, `.building-${randomUUID()}`);
  await mkdir(work, { recursive: true });
  try {
    const dataDir = join(work, 'data');
    const handle = await openDatabase({ dataDir, holder: "the embedded database's template (npm install)" });
    try {
      await migrateToLatest(handle.db);
    } finally {
      await handle.close();
    }
    await rename(join(dataDir, MARKER), join(dataDir, TEMPLATE_MARKER));
    await readableByAll(dataDir);
    await rm(folder, { recursive: true, force: true });
    await rename(dataDir, folder);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return { folder, built: true };
}
