import { createHash } from 'node:crypto';
import { rm, stat } from 'node:fs/promises';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { NewEvent } from '../event-store.ts';
import { writeCheckpoint } from '../event-store.ts';
import { MEDIA_KEY, restoreMediaFile } from '../media/store.ts';
import type { Projector } from '../projection.ts';
import { replayAll } from '../projection-runner.ts';
import type { ArchiveProgress } from './export.ts';
import { FORMAT, FORMAT_VERSIONS, MANIFEST, Manifest, type Part, SOURCE_TABLES } from './format.ts';
import { ArchiveDamaged, readTar } from './tar.ts';

/*
 * `npm run cli -- import --from FILE`, in two passes over the archive:
 *
 * 1. verifyArchive reads the whole file and writes nothing: a well-formed gzip'd tar to its end, a
 *    manifest of a format version this code reads and of this code's schema, every part present once
 *    with the rows, bytes and SHA-256 the manifest gives, no part it does not name, and each image's
 *    bytes matching its name.
 * 2. importArchive loads it in ONE transaction on the target: every table locked, the target found
 *    empty, the sources of truth loaded (each part checked again as it is read), every read model
 *    replayed from the loaded log (replayAll, the rebuild's own replay), the async ones' checkpoints
 *    set at the log's end and the subscriptions' kept where they were. A failure anywhere rolls all of
 *    it back, and the images it wrote are removed: the target is as it was.
 *
 * The imported events keep their positions, ids, versions and times; their transaction id is the
 * import's own (transaction ids belong to a database), so the log's order is position order.
 */

/** The archive is not one this code can import; nothing was written. */
export class ArchiveRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArchiveRefused';
  }
}

/** The target database holds data: an import loads into an empty one only. */
export class TargetNotEmpty extends Error {
  readonly contents: ReadonlyArray<{ table: string; rows: number }>;
  constructor(contents: ReadonlyArray<{ table: string; rows: number }>) {
    const list = contents.map((c) => `${c.rows} ${c.table}`).join(', ');
    super(
      `the target database is not empty (${list}): import loads into an empty database only. ` +
        'Use a new database (createdb, or an empty DATA_DIR), and start no server on it before the import ' +
        '(a server makes its keys at start).',
    );
    this.name = 'TargetNotEmpty';
    this.contents = contents;
  }
}

const PART_PATH =
  /^(?:events\/\d{6}\.ndjson|checkpoints\/\d{6}\.ndjson|tables\/([a-z_]+)\/\d{6}\.ndjson|media\/([0-9a-f]{2})\/([^/]+))$/;

/** What kind of part a path names, or null for a path no archive holds. */
function kindOf(path: string): { kind: Part['kind'] | 'media'; table?: string } | null {
  if (path === MANIFEST) return null;
  const m = PART_PATH.exec(path);
  if (!m) return null;
  if (path.startsWith('events/')) return { kind: 'events' };
  if (path.startsWith('checkpoints/')) return { kind: 'checkpoints' };
  if (m[1] !== undefined)
    return SOURCE_TABLES.some((t) => t.name === m[1]) ? { kind: 'table', table: m[1] } : null;
  const key = m[3] ?? '';
  return MEDIA_KEY.test(key) && key.startsWith(m[2] ?? '') ? { kind: 'media' } : null;
}

function countLines(chunk: Buffer): number {
  let n = 0;
  for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) n += 1;
  return n;
}

/** The most a manifest may take (it is held whole). */
const MANIFEST_MAX = 64 * 1024 * 1024;

/**
 * Reads the whole archive and returns its manifest, or throws ArchiveRefused (ArchiveDamaged for a
 * file that is not a whole gzip'd tar) saying what is wrong. `schema`: the last migration this code
 * knows, which the archive's must be.
 */
export async function verifyArchive(
  file: string,
  opts: { schema: string; onProgress?: ArchiveProgress },
): Promise<Manifest> {
  const info = await stat(file).catch((error: NodeJS.ErrnoException) => {
    throw new ArchiveRefused(
      `cannot read ${file}: ${error.code === 'ENOENT' ? 'no such file' : error.message}`,
    );
  });
  if (!info.isFile()) throw new ArchiveRefused(`${file} is not a file`);
  const seen = new Map<
    string,
    { bytes: number; sha256: string; rows: number; kind: Part['kind']; table?: string }
  >();
  // Images are counted, not kept: each one's checksum is its name, checked as it is read.
  const media = { files: 0, bytes: 0 };
  let manifestText: string | undefined;
  let read = 0;
  opts.onProgress?.('verify', 0, info.size);
  try {
    for await (const entry of readTar(file, (n) => {
      read = n;
    })) {
      if (seen.has(entry.path) || (entry.path === MANIFEST && manifestText !== undefined))
        throw new ArchiveRefused(`the archive holds ${entry.path} twice: it is not one an export made`);
      if (entry.path === MANIFEST) {
        if (entry.size > MANIFEST_MAX) throw new ArchiveRefused("the archive's manifest.json is too large");
        const chunks: Buffer[] = [];
        for await (const chunk of entry.body()) chunks.push(chunk);
        manifestText = Buffer.concat(chunks).toString('utf8');
        continue;
      }
      const kind = kindOf(entry.path);
      if (!kind) throw new ArchiveRefused(`the archive holds ${entry.path}, which no export writes`);
      const hash = createHash('sha256');
      let rows = 0;
      let last = 10;
      for await (const chunk of entry.body()) {
        hash.update(chunk);
        if (kind.kind !== 'media') rows += countLines(chunk);
        if (chunk.length > 0) last = chunk[chunk.length - 1] as number;
      }
      const sha256 = hash.digest('hex');
      if (kind.kind === 'media') {
        const name = entry.path.slice(entry.path.lastIndexOf('/') + 1);
        if (sha256 !== name.slice(0, 64))
          throw new ArchiveRefused(
            `${entry.path} does not hold the image its name says: the archive is damaged`,
          );
        media.files += 1;
        media.bytes += entry.size;
      } else {
        if (last !== 10)
          throw new ArchiveRefused(`${entry.path} does not end with a whole line: the archive is damaged`);
        const table = kind.table === undefined ? {} : { table: kind.table };
        seen.set(entry.path, { bytes: entry.size, sha256, rows, kind: kind.kind, ...table });
      }
      opts.onProgress?.('verify', read, info.size);
    }
  } catch (error) {
    if (error instanceof ArchiveDamaged) {
      throw new ArchiveRefused(
        manifestText === undefined && seen.size === 0
          ? `${error.message}; is ${file} an archive that \`export\` made?`
          : error.message,
      );
    }
    throw error;
  }
  opts.onProgress?.('verify', info.size, info.size);
  if (manifestText === undefined)
    throw new ArchiveRefused('the archive has no manifest.json: it is not a whole export archive');

  let raw: unknown;
  try {
    raw = JSON.parse(manifestText);
  } catch {
    throw new ArchiveRefused("the archive's manifest.json is not JSON: the archive is damaged");
  }
  const head = raw as { format?: unknown; version?: unknown };
  if (head?.format !== FORMAT) throw new ArchiveRefused(`the archive's manifest is not a ${FORMAT} manifest`);
  if (!(FORMAT_VERSIONS as readonly unknown[]).includes(head.version)) {
    throw new ArchiveRefused(
      `the archive is format version ${JSON.stringify(head.version)}, which this version of the service does not ` +
        `read (it reads ${FORMAT_VERSIONS.join(', ')}): import it with the version that made it`,
    );
  }
  const parsed = Manifest.safeParse(raw);
  if (!parsed.success)
    throw new ArchiveRefused(`the archive's manifest is malformed: ${parsed.error.issues[0]?.message ?? ''}`);
  const manifest = parsed.data;
  if (manifest.schema !== opts.schema) {
    throw new ArchiveRefused(
      `the archive was made on schema ${manifest.schema}; this version of the service is at ${opts.schema}. ` +
        'Import it with the version that made it, then start this version on the result (it migrates).',
    );
  }

  const named = new Set<string>();
  const totals: Record<string, number> = {};
  for (const part of manifest.parts) {
    const got = seen.get(part.path);
    if (!got)
      throw new ArchiveRefused(`the archive lacks ${part.path}, which its manifest lists: it is incomplete`);
    if (named.has(part.path)) throw new ArchiveRefused(`the manifest lists ${part.path} twice`);
    named.add(part.path);
    if (got.kind !== part.kind || got.table !== part.table)
      throw new ArchiveRefused(`${part.path} is not the part the manifest says it is`);
    if (got.bytes !== part.bytes || got.sha256 !== part.sha256)
      throw new ArchiveRefused(
        `${part.path} does not match its checksum in the manifest: the archive is damaged`,
      );
    if (got.rows !== part.rows)
      throw new ArchiveRefused(
        `${part.path} holds ${got.rows} rows, its manifest ${part.rows}: the archive is damaged`,
      );
    const key = part.kind === 'table' ? (part.table as string) : part.kind;
    totals[key] = (totals[key] ?? 0) + got.rows;
  }
  totals.media = media.files;
  totals.media_bytes = media.bytes;
  for (const path of seen.keys()) {
    if (!named.has(path))
      throw new ArchiveRefused(`the archive holds ${path}, which its manifest does not list`);
  }
  for (const [key, n] of Object.entries(manifest.counts)) {
    if ((totals[key] ?? 0) !== n)
      throw new ArchiveRefused(`the manifest counts ${n} ${key} but its parts hold ${totals[key] ?? 0}`);
  }
  for (const [key, n] of Object.entries(totals)) {
    if (manifest.counts[key] !== n)
      throw new ArchiveRefused(`the manifest does not count the ${n} ${key} its parts hold`);
  }
  return manifest;
}

/** Every table an import writes and must find empty: the event store's, the sources of truth, the read models. */
function tablesOf(projectors: readonly Projector<NewEvent>[]): string[] {
  return [
    'events',
    'checkpoints',
    ...SOURCE_TABLES.map((t) => t.name),
    ...new Set(projectors.flatMap((p) => p.tables)),
  ];
}

/** The tables of `tables` that hold rows, with their counts. */
export async function describeContents(
  db: Kysely<Database>,
  projectors: readonly Projector<NewEvent>[],
): Promise<Array<{ table: string; rows: number }>> {
  const out: Array<{ table: string; rows: number }> = [];
  for (const table of tablesOf(projectors)) {
    const { rows } = await sql<{ n: string }>`select count(*) as n from ${sql.table(table)}`.execute(db);
    const n = Number(rows[0]?.n ?? 0);
    if (n > 0) out.push({ table, rows: n });
  }
  return out;
}

/** Lines inserted by one statement, at most (or fewer, past INSERT_BYTES). */
const INSERT_ROWS = 500;
const INSERT_BYTES = 4 * 1024 * 1024;

/** The lines of an NDJSON body, in batches for one insert each. */
async function* batchesOf(body: AsyncIterable<Buffer>): AsyncGenerator<string[]> {
  let rest = '';
  let batch: string[] = [];
  let bytes = 0;
  for await (const chunk of body) {
    const text = rest + chunk.toString('utf8');
    const lines = text.split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines) {
      batch.push(line);
      bytes += line.length;
      if (batch.length >= INSERT_ROWS || bytes >= INSERT_BYTES) {
        yield batch;
        batch = [];
        bytes = 0;
      }
    }
  }
  if (batch.length > 0) yield batch;
}

/** A body read and hashed on the way, checked against its part when it ends. */
async function* checked(body: AsyncIterable<Buffer>, part: Part): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  for await (const chunk of body) {
    hash.update(chunk);
    yield chunk;
  }
  if (hash.digest('hex') !== part.sha256)
    throw new ArchiveRefused(`${part.path} changed since it was verified: the archive is damaged`);
}

const jsonArray = (lines: readonly string[]): string => `[${lines.join(',')}]`;

async function insertRows(
  trx: Transaction<Database>,
  table: string,
  lines: readonly string[],
): Promise<void> {
  await sql`insert into ${sql.table(table)} overriding system value
    select * from jsonb_populate_recordset(null::${sql.table(table)}, ${jsonArray(lines)}::jsonb)`.execute(
    trx,
  );
}

/** Events with their positions; the transaction id is this transaction's (the column's default). */
async function insertEvents(trx: Transaction<Database>, lines: readonly string[]): Promise<void> {
  await sql`insert into events (position, event_id, stream_id, version, type, data, metadata, recorded_at)
    overriding system value
    select position, event_id, stream_id, version, type, data, metadata, recorded_at
    from jsonb_populate_recordset(null::events, ${jsonArray(lines)}::jsonb)`.execute(trx);
}

/** A subscription's checkpoint: through `covered_through` in the imported log's (position) order. */
async function insertCheckpoints(trx: Transaction<Database>, lines: readonly string[]): Promise<void> {
  await sql`insert into checkpoints (name, transaction_id, position, updated_at)
    select c.name, pg_current_xact_id(), c.covered_through, c.updated_at
    from jsonb_to_recordset(${jsonArray(lines)}::jsonb)
      as c(name text, covered_through bigint, updated_at timestamptz)`.execute(trx);
}

/** Sets a sequence past the largest value its column holds (or back to its start on an empty table). */
async function resetSequence(trx: Transaction<Database>, table: string, column: string): Promise<void> {
  await sql`select setval(pg_get_serial_sequence(${table}, ${column}),
      coalesce((select max(${sql.ref(column)}) from ${sql.table(table)}), 1),
      (select max(${sql.ref(column)}) from ${sql.table(table)}) is not null)`.execute(trx);
}

export type ImportSummary = {
  counts: Record<string, number>;
  /** Images written to the media folder, and those already there (the same bytes, by their name). */
  mediaWritten: number;
  mediaPresent: number;
  /** Events each read model replayed. */
  replayed: Record<string, number>;
};

/**
 * Loads a verified archive (`manifest` from verifyArchive) into the empty database `db` and its images
 * into `mediaDir`, in one transaction; replays every projector of `projectors` from the loaded log.
 */
export async function importArchive(opts: {
  db: Kysely<Database>;
  file: string;
  manifest: Manifest;
  mediaDir: string;
  projectors: readonly Projector<NewEvent>[];
  onProgress?: ArchiveProgress;
}): Promise<ImportSummary> {
  const { manifest, projectors } = opts;
  const byPath = new Map(manifest.parts.map((p) => [p.path, p]));
  const written: string[] = [];
  let mediaPresent = 0;
  const replayed: Record<string, number> = {};
  const total = Object.entries(manifest.counts)
    .filter(([k]) => k !== 'media_bytes')
    .reduce((a, [, n]) => a + n, 0);
  try {
    await opts.db.transaction().execute(async (trx) => {
      // Held to the commit: a server that starts on the target meanwhile waits, then finds it loaded.
      await sql`lock table ${sql.join(tablesOf(projectors).map((t) => sql.table(t)))} in access exclusive mode`.execute(
        trx,
      );
      const contents = await describeContents(trx, projectors);
      if (contents.length > 0) throw new TargetNotEmpty(contents);

      let done = 0;
      opts.onProgress?.('load', 0, total);
      for await (const entry of readTar(opts.file)) {
        if (entry.path === MANIFEST) continue;
        if (kindOf(entry.path)?.kind === 'media') {
          // restoreMediaFile checks the bytes against the name before the file takes it.
          const key = entry.path.slice(entry.path.lastIndexOf('/') + 1);
          const result = await restoreMediaFile(opts.mediaDir, key, entry.body(), entry.mtime ?? new Date());
          if (result.written) written.push(result.file);
          else mediaPresent += 1;
          done += 1;
          opts.onProgress?.('load', done, total);
          continue;
        }
        const part = byPath.get(entry.path);
        if (!part)
          throw new ArchiveRefused(
            `${entry.path} is not in the manifest: the archive changed since it was verified`,
          );
        for await (const lines of batchesOf(checked(entry.body(), part))) {
          if (part.kind === 'events') await insertEvents(trx, lines);
          else if (part.kind === 'checkpoints') await insertCheckpoints(trx, lines);
          else await insertRows(trx, part.table as string, lines);
          done += lines.length;
          opts.onProgress?.('load', done, total);
        }
      }
      await resetSequence(trx, 'events', 'position');
      for (const t of SOURCE_TABLES) if (t.sequence) await resetSequence(trx, t.name, t.sequence);

      const head = await sql<{ position: string | null; transaction_id: string }>`
        select max(position)::text as position, pg_current_xact_id()::text as transaction_id from events`.execute(
        trx,
      );
      const end = head.rows[0];
      for (const p of projectors) {
        replayed[p.name] = await replayAll(trx, p, ({ done: d, total: t }) =>
          opts.onProgress?.(`replay ${p.name}`, d, t),
        );
        await trx.deleteFrom('checkpoints').where('name', '=', p.name).execute();
        if (p.mode === 'async' && end?.position != null) {
          await writeCheckpoint(trx, p.name, {
            transactionId: BigInt(end.transaction_id),
            position: BigInt(end.position),
          });
        }
      }
    });
  } catch (error) {
    for (const file of written) await rm(file, { force: true });
    throw error;
  }
  return { counts: manifest.counts, mediaWritten: written.length, mediaPresent, replayed };
}
