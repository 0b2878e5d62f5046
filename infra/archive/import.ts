import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type Kysely, sql, type Transaction } from 'kysely';
import { MAX_IMAGE_BYTES } from '../../domain/article/events.ts';
import type { Database } from '../db/schema.ts';
import type { NewEvent } from '../event-store.ts';
import { writeCheckpoint } from '../event-store.ts';
import { MEDIA_KEY, restoreMediaFile } from '../media/store.ts';
import type { Projector } from '../projection.ts';
import { replayAll } from '../projection-runner.ts';
import { type ArchiveStaffMember, createContentCheck } from './contents.ts';
import type { ArchiveProgress } from './export.ts';
import {
  ArchiveRefused,
  FORMAT,
  FORMAT_VERSIONS,
  MANIFEST,
  Manifest,
  PART_BYTES,
  type Part,
  SOURCE_TABLES,
} from './format.ts';
import { LINE_MAX, linesOf } from './lines.ts';
import { ArchiveDamaged, readTar, TAIL_MAX } from './tar.ts';

/*
 * `npm run cli -- import --from FILE`, in two passes over the archive:
 *
 * 1. verifyArchive reads the whole file and writes nothing: a well-formed gzip'd tar to its end (no
 *    entry larger than an export writes, nothing but a tar record's padding after its end), a manifest
 *    of a format version this code reads and of this code's schema, every part present once with the
 *    rows, bytes and SHA-256 the manifest gives, no part it does not name, each image's bytes matching
 *    its name, every line at most LINE_MAX bytes, and what the rows say checked as the writes that
 *    made them were (contents.ts: the events by the event store's own check, the article bodies by the
 *    sanitiser, the credentials by the events that set them).
 * 2. importArchive loads it in ONE transaction on the target: every table locked, the target found
 *    empty, the sources of truth loaded (each part checked again as it is read: the same bytes as
 *    verified, so the same rows), every read model replayed from the loaded log (replayAll, the
 *    rebuild's own replay), the async ones' checkpoints set at the log's end and the subscriptions'
 *    kept where they were. The images go to a folder of their own in the media folder
 *    (`.import-<random>`) and into place only once the transaction committed. A failure anywhere, or a
 *    stop asked for (`signal`), rolls all of it back and removes that folder: the target is as it was.
 *    The gzip stream is read no further than the tar the first pass measured.
 *
 * The imported events keep their positions, ids, versions and times; their transaction id is the
 * import's own (transaction ids belong to a database), so the log's order is position order.
 */

export { ArchiveRefused } from './format.ts';

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

/** The most a manifest may take (it is held whole). */
const MANIFEST_MAX = 64 * 1024 * 1024;

/** The most bytes an export writes in one entry of each kind: refused from its header, before its body is read. */
function entryLimit(kind: Part['kind'] | 'media'): number {
  // A part is cut once it holds PART_BYTES, so it holds at most that and one more line.
  return kind === 'media' ? MAX_IMAGE_BYTES : PART_BYTES + LINE_MAX;
}

/** The bytes of a tar entry of `size`: its header and its body padded to whole blocks. */
const entryBytes = (size: number): number => 512 + Math.ceil(size / 512) * 512;

/** A verified archive: its manifest, and what the import should say it brings. */
export type VerifiedArchive = {
  manifest: Manifest;
  /** The support staff members the archive brings (who can sign in to the staff pages). */
  staff: ArchiveStaffMember[];
  /** The bytes of its tar, decompressed: a second read that finds more stops there. */
  tarBytes: number;
};

/**
 * Reads the whole archive and returns its manifest, or throws ArchiveRefused (ArchiveDamaged for a
 * file that is not a whole gzip'd tar) saying what is wrong. `schema`: the last migration this code
 * knows, which the archive's must be. Besides its integrity, what its rows say is checked as the
 * writes that made them were (contents.ts); a damaged archive is said to be damaged first.
 */
export async function verifyArchive(
  file: string,
  opts: { schema: string; onProgress?: ArchiveProgress },
): Promise<VerifiedArchive> {
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
  const contents = createContentCheck();
  // The first thing a row says that no write makes: reported once the archive is known to be whole.
  let refusal: ArchiveRefused | undefined;
  let manifestText: string | undefined;
  let tarBytes = 1024;
  let read = 0;
  opts.onProgress?.('verify', 0, info.size);
  try {
    for await (const entry of readTar(file, {
      onBytes: (n) => {
        read = n;
      },
    })) {
      if (seen.has(entry.path) || (entry.path === MANIFEST && manifestText !== undefined))
        throw new ArchiveRefused(`the archive holds ${entry.path} twice: it is not one an export made`);
      tarBytes += entryBytes(entry.size);
      if (entry.path === MANIFEST) {
        if (entry.size > MANIFEST_MAX) throw new ArchiveRefused("the archive's manifest.json is too large");
        const chunks: Buffer[] = [];
        for await (const chunk of entry.body()) chunks.push(chunk);
        manifestText = Buffer.concat(chunks).toString('utf8');
        continue;
      }
      const kind = kindOf(entry.path);
      if (!kind) throw new ArchiveRefused(`the archive holds ${entry.path}, which no export writes`);
      if (entry.size > entryLimit(kind.kind))
        throw new ArchiveRefused(
          `${entry.path} is ${entry.size} bytes, more than an export writes in one (${entryLimit(kind.kind)})`,
        );
      const hash = createHash('sha256');
      const hashed = async function* (): AsyncGenerator<Buffer> {
        for await (const chunk of entry.body()) {
          hash.update(chunk);
          yield chunk;
        }
      };
      let rows = 0;
      if (kind.kind === 'media') {
        for await (const _ of hashed()) void _;
      } else {
        for await (const line of linesOf(hashed(), entry.path)) {
          rows += 1;
          if (refusal !== undefined) continue;
          try {
            if (kind.kind === 'events') contents.event(line, entry.path);
            else if (kind.kind === 'checkpoints') contents.checkpoint(line, entry.path);
            else contents.row(kind.table as string, line, entry.path);
          } catch (error) {
            if (!(error instanceof ArchiveRefused)) throw error;
            refusal = error;
          }
        }
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
  if (refusal !== undefined) throw refusal;
  const { staff } = contents.finish();
  return { manifest, staff, tarBytes: tarBytes + TAIL_MAX };
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

/** The lines of an NDJSON body (linesOf: linear time, bounded lines), in batches for one insert each. */
async function* batchesOf(body: AsyncIterable<Buffer>, where: string): AsyncGenerator<string[]> {
  let batch: string[] = [];
  let bytes = 0;
  for await (const line of linesOf(body, where)) {
    batch.push(line.text);
    bytes += line.bytes;
    if (batch.length >= INSERT_ROWS || bytes >= INSERT_BYTES) {
      yield batch;
      batch = [];
      bytes = 0;
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

/** A body that stops with the signal's reason once it is aborted. */
async function* stoppable(
  body: AsyncIterable<Buffer>,
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer> {
  for await (const chunk of body) {
    signal?.throwIfAborted();
    yield chunk;
  }
}

/** The staging folder's images moved into the media folder, each to its place (`<ab>/<key>`). */
async function publishStaged(staging: string, mediaDir: string, keys: readonly string[]): Promise<void> {
  for (const key of keys) {
    const folder = join(mediaDir, key.slice(0, 2));
    await mkdir(folder, { recursive: true });
    // Content-addressed: a file that appeared there meanwhile holds the same bytes.
    await rename(join(staging, key.slice(0, 2), key), join(folder, key));
  }
}

/**
 * Loads a verified archive (from verifyArchive) into the empty database `db` and its images into
 * `mediaDir`, in one transaction; replays every projector of `projectors` from the loaded log. Once
 * `signal` is aborted, the import stops at its next step (a batch of rows, a chunk of an image, a batch
 * of a replay) with the signal's reason, rolled back and its images removed.
 */
export async function importArchive(opts: {
  db: Kysely<Database>;
  file: string;
  verified: VerifiedArchive;
  mediaDir: string;
  projectors: readonly Projector<NewEvent>[];
  onProgress?: ArchiveProgress;
  signal?: AbortSignal;
}): Promise<ImportSummary> {
  const { projectors, signal } = opts;
  const { manifest } = opts.verified;
  const byPath = new Map(manifest.parts.map((p) => [p.path, p]));
  const staging = join(opts.mediaDir, `.import-${randomBytes(6).toString('hex')}`);
  const staged: string[] = [];
  let mediaPresent = 0;
  const replayed: Record<string, number> = {};
  const total = Object.entries(manifest.counts)
    .filter(([k]) => k !== 'media_bytes')
    .reduce((a, [, n]) => a + n, 0);
  const progress: ArchiveProgress = (stage, done, all) => {
    signal?.throwIfAborted();
    opts.onProgress?.(stage, done, all);
  };
  try {
    signal?.throwIfAborted();
    await opts.db.transaction().execute(async (trx) => {
      // Held to the commit: a server that starts on the target meanwhile waits, then finds it loaded.
      await sql`lock table ${sql.join(tablesOf(projectors).map((t) => sql.table(t)))} in access exclusive mode`.execute(
        trx,
      );
      const contents = await describeContents(trx, projectors);
      if (contents.length > 0) throw new TargetNotEmpty(contents);

      let done = 0;
      progress('load', 0, total);
      for await (const entry of readTar(opts.file, { maxBytes: opts.verified.tarBytes })) {
        if (entry.path === MANIFEST) continue;
        if (kindOf(entry.path)?.kind === 'media') {
          const key = entry.path.slice(entry.path.lastIndexOf('/') + 1);
          const there = await stat(join(opts.mediaDir, key.slice(0, 2), key)).catch(() => null);
          if (there?.isFile()) {
            for await (const _ of stoppable(entry.body(), signal)) void _;
            mediaPresent += 1;
          } else {
            // restoreMediaFile checks the bytes against the name before the file takes it.
            await restoreMediaFile(staging, key, stoppable(entry.body(), signal), entry.mtime ?? new Date());
            staged.push(key);
          }
          done += 1;
          progress('load', done, total);
          continue;
        }
        const part = byPath.get(entry.path);
        if (!part)
          throw new ArchiveRefused(
            `${entry.path} is not in the manifest: the archive changed since it was verified`,
          );
        for await (const lines of batchesOf(checked(entry.body(), part), entry.path)) {
          signal?.throwIfAborted();
          if (part.kind === 'events') await insertEvents(trx, lines);
          else if (part.kind === 'checkpoints') await insertCheckpoints(trx, lines);
          else await insertRows(trx, part.table as string, lines);
          done += lines.length;
          progress('load', done, total);
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
        signal?.throwIfAborted();
        replayed[p.name] = await replayAll(trx, p, ({ done: d, total: t }) =>
          progress(`replay ${p.name}`, d, t),
        );
        await trx.deleteFrom('checkpoints').where('name', '=', p.name).execute();
        if (p.mode === 'async' && end?.position != null) {
          await writeCheckpoint(trx, p.name, {
            transactionId: BigInt(end.transaction_id),
            position: BigInt(end.position),
          });
        }
      }
      // The last moment to stop: after this, the transaction commits.
      signal?.throwIfAborted();
    });
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
  // Committed: the images go into place, whatever comes meanwhile (the rows refer to them).
  await publishStaged(staging, opts.mediaDir, staged);
  await rm(staging, { recursive: true, force: true });
  return { counts: manifest.counts, mediaWritten: staged.length, mediaPresent, replayed };
}
