import { createHash, randomBytes } from 'node:crypto';
import { link, open, rm, stat } from 'node:fs/promises';
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { Database, Db } from '../db/schema.ts';
import { createDirectoryMediaStore } from '../media/store.ts';
import {
  FORMAT,
  FORMAT_VERSION,
  MANIFEST,
  type Manifest,
  PART_BYTES,
  type Part,
  partPath,
  SOURCE_TABLES,
} from './format.ts';
import { createTarWriter, type TarWriter } from './tar.ts';

/*
 * `npm run cli -- export --to FILE`: the installation's sources of truth (format.ts) in one archive,
 * read in one snapshot (a repeatable-read, read-only transaction: on PostgreSQL the service may keep
 * running, as for pg_dump), through cursors, and written part by part, so memory stays the same
 * whatever the installation's size. The file appears under its name only once complete.
 */

/** Progress of a long step: `stage` names it, `done` of `total` units (rows, files). */
export type ArchiveProgress = (stage: string, done: number, total: number) => void;

/** The archive file exists already: an export never overwrites one. */
export class ArchiveExists extends Error {
  constructor(file: string) {
    super(`${file} exists already: an export never overwrites a file (choose another name, or remove it)`);
    this.name = 'ArchiveExists';
  }
}

/** Rows fetched from a cursor at a time. */
const FETCH = 500;

/** Collects NDJSON lines into parts of about PART_BYTES, each written to the archive whole. */
function partWriter(
  tar: TarWriter,
  parts: Part[],
  prefix: string,
  kind: Part['kind'],
  table?: string,
): { line(text: string): Promise<void>; close(): Promise<void> } {
  let chunks: Buffer[] = [];
  let bytes = 0;
  let rows = 0;
  let n = 0;
  const flush = async (): Promise<void> => {
    if (rows === 0) return;
    n += 1;
    const body = Buffer.concat(chunks, bytes);
    const path = partPath(prefix, n);
    await tar.add(path, body);
    parts.push({
      path,
      kind,
      ...(table ? { table } : {}),
      rows,
      bytes,
      sha256: createHash('sha256').update(body).digest('hex'),
    });
    chunks = [];
    bytes = 0;
    rows = 0;
  };
  return {
    async line(text) {
      const buf = Buffer.from(`${text}\n`, 'utf8');
      chunks.push(buf);
      bytes += buf.length;
      rows += 1;
      if (bytes >= PART_BYTES) await flush();
    },
    close: flush,
  };
}

/** Every row of `query` (one text column `row`), FETCH at a time through a cursor of the transaction. */
async function* cursorRows(trx: Transaction<Database>, query: RawBuilder<unknown>): AsyncGenerator<string> {
  await sql`declare archive_rows no scroll cursor for ${query}`.execute(trx);
  try {
    for (;;) {
      const { rows } = await sql<{ row: string }>`fetch forward ${sql.lit(FETCH)} from archive_rows`.execute(
        trx,
      );
      for (const r of rows) yield r.row;
      if (rows.length < FETCH) return;
    }
  } finally {
    await sql`close archive_rows`.execute(trx);
  }
}

const orderBy = (columns: readonly string[]): RawBuilder<unknown> => sql.join(columns.map((c) => sql.ref(c)));

async function count(trx: Transaction<Database>, table: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`select count(*) as n from ${sql.table(table)}`.execute(trx);
  return Number(rows[0]?.n ?? 0);
}

/**
 * Writes the archive of the installation on `db` to `file` (which must not exist) and returns its
 * manifest. `rebuilt`: the projectors' names, whose checkpoints an import makes anew (the other
 * checkpoints, the subscriptions', are kept). `mediaDir`: the media store's folder.
 */
export async function exportInstallation(opts: {
  db: Db;
  backend: 'postgres' | 'pglite';
  file: string;
  mediaDir: string;
  rebuilt: readonly string[];
  onProgress?: ArchiveProgress;
}): Promise<Manifest> {
  const { db, file } = opts;
  if (await stat(file).catch(() => null)) throw new ArchiveExists(file);
  const temp = `${file}.partial-${randomBytes(6).toString('hex')}`;
  const tar = createTarWriter(temp);
  const parts: Part[] = [];
  const counts: Record<string, number> = {};
  try {
    const media = createDirectoryMediaStore(opts.mediaDir);
    // Counted first, for the progress bar; listed again when they are written (nothing held meanwhile).
    let mediaFiles = 0;
    for await (const entry of media.list()) if (entry.stored) mediaFiles += 1;

    const schema = await db
      .transaction()
      .setIsolationLevel('repeatable read')
      .execute(async (trx) => {
        await sql`set transaction read only`.execute(trx);
        const migration = await sql<{ name: string }>`
          select name from kysely_migration order by name desc limit 1`.execute(trx);
        const totals = { events: await count(trx, 'events') } as Record<string, number>;
        for (const t of SOURCE_TABLES) totals[t.name] = await count(trx, t.name);
        const total = Object.values(totals).reduce((a, b) => a + b, 0) + mediaFiles;
        let done = 0;
        const step = (): void => {
          done += 1;
          if (done % FETCH === 0) opts.onProgress?.('export', done, total);
        };
        opts.onProgress?.('export', 0, total);

        // The log, in position order, without the transaction ids (the database's own: an import's are its own).
        const events = partWriter(tar, parts, 'events', 'events');
        counts.events = 0;
        for await (const row of cursorRows(
          trx,
          sql`select (to_jsonb(e) - 'transaction_id')::text as row from events e order by e.position`,
        )) {
          await events.line(row);
          counts.events += 1;
          step();
        }
        await events.close();

        // A subscription's checkpoint, as the position through which every event is covered: the log
        // an import writes is in position order, while this one is in (transaction id, position) order.
        const checkpoints = partWriter(tar, parts, 'checkpoints', 'checkpoints');
        counts.checkpoints = 0;
        const rebuilt = opts.rebuilt.length > 0 ? opts.rebuilt : [''];
        for await (const row of cursorRows(
          trx,
          sql`select jsonb_build_object(
                'name', c.name,
                'covered_through', coalesce(
                  (select min(e.position) - 1 from events e
                    where (e.transaction_id, e.position) > (c.transaction_id, c.position)),
                  (select coalesce(max(position), 0) from events)),
                'updated_at', c.updated_at)::text as row
              from checkpoints c
              where c.name not in (${sql.join(rebuilt.map((n) => sql`${n}`))})
              order by c.name`,
        )) {
          await checkpoints.line(row);
          counts.checkpoints += 1;
        }
        await checkpoints.close();

        for (const t of SOURCE_TABLES) {
          const part = partWriter(tar, parts, `tables/${t.name}`, 'table', t.name);
          counts[t.name] = 0;
          for await (const row of cursorRows(
            trx,
            sql`select to_jsonb(t)::text as row from ${sql.table(t.name)} t order by ${orderBy(t.order)}`,
          )) {
            await part.line(row);
            counts[t.name] = (counts[t.name] ?? 0) + 1;
            step();
          }
          await part.close();
        }
        opts.onProgress?.('export', done, total);
        return { name: migration.rows[0]?.name, done, total };
      });
    if (schema.name === undefined)
      throw new Error('the database has no migrations applied: nothing to export');

    // The images, after the snapshot (a long transaction would hold back a running server's projectors):
    // files are only ever added, and one the snapshot refers to is never removed.
    let done = schema.done;
    counts.media = 0;
    counts.media_bytes = 0;
    for await (const f of media.list()) {
      if (!f.stored) continue;
      const object = await media.get(f.key);
      if (!object) continue; // collected since it was listed: nothing in the snapshot refers to it
      const hash = createHash('sha256');
      const path = `media/${f.key.slice(0, 2)}/${f.key}`;
      await tar.addStream(path, object.size, object.stream, f.storedAt, (chunk) => hash.update(chunk));
      const sha256 = hash.digest('hex');
      if (sha256 !== f.key.slice(0, 64))
        throw new Error(
          `the media file ${f.key} in ${opts.mediaDir} is damaged (its SHA-256 is not its name); remove it, or put back a good copy`,
        );
      counts.media += 1;
      counts.media_bytes += object.size;
      done += 1;
      opts.onProgress?.('export', done, schema.total);
    }

    const manifest: Manifest = {
      format: FORMAT,
      version: FORMAT_VERSION,
      created_at: new Date().toISOString(),
      schema: schema.name,
      source: { backend: opts.backend },
      counts,
      parts,
    };
    await tar.add(MANIFEST, Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`, 'utf8'));
    await tar.finish();
    const handle = await open(temp, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    // A hard link: the name appears whole, and never over a file that appeared meanwhile.
    try {
      await link(temp, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new ArchiveExists(file);
      throw error;
    }
    await rm(temp, { force: true });
    return manifest;
  } catch (error) {
    await tar.abort();
    await rm(temp, { force: true });
    throw error;
  }
}
