import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';

/*
 * The embedded database's empty cluster, made once: PGlite's initdb (most of a first start) run at
 * install time (`npm install`'s postinstall, infra/db/build-template.ts) and kept as the tarball of its
 * data folder, which PGlite loads into a new DATA_DIR instead of running initdb again (its
 * `loadDataDir`). The file is named after PGlite's version: another version's is not used, and without
 * one (an install with --ignore-scripts) a new DATA_DIR is made by initdb as before.
 */

const ROOT = resolve(import.meta.dirname, '../..');

/** PGlite's version, from its package.json. */
async function pgliteVersion(): Promise<string> {
  const file = new URL('../package.json', import.meta.resolve('@electric-sql/pglite'));
  return (JSON.parse(await readFile(file, 'utf8')) as { version: string }).version;
}

/** Where the tarball of an empty cluster made by this version of PGlite is kept. */
export async function embeddedTemplateFile(): Promise<string> {
  return join(ROOT, 'node_modules/.cache/content-service', `pglite-${await pgliteVersion()}-initdb.tar.gz`);
}

/**
 * The empty cluster's tarball, or undefined when there is none for this version of PGlite (or it
 * cannot be read: it is a cache, and initdb makes the same cluster).
 */
export async function readEmbeddedTemplate(): Promise<Blob | undefined> {
  try {
    return new Blob([await readFile(await embeddedTemplateFile())]);
  } catch {
    return undefined;
  }
}

/**
 * Makes the empty cluster's tarball unless it is there: initdb in memory, the data folder dumped
 * (gzip), written beside its place and renamed into it, so that a reader finds it whole or not at all.
 */
export async function buildEmbeddedTemplate(): Promise<{ file: string; built: boolean }> {
  const file = await embeddedTemplateFile();
  if ((await readEmbeddedTemplate()) !== undefined) return { file, built: false };
  const pglite = await PGlite.create('memory://');
  let tarball: Blob;
  try {
    tarball = await pglite.dumpDataDir('gzip');
  } finally {
    await pglite.close();
  }
  await mkdir(dirname(file), { recursive: true });
  const partial = `${file}.${randomUUID()}.tmp`;
  try {
    await writeFile(partial, new Uint8Array(await tarball.arrayBuffer()));
    await rename(partial, file);
  } finally {
    await rm(partial, { force: true });
  }
  return { file, built: true };
}
