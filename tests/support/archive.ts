import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Header } from 'tar';

/*
 * Export archives taken apart and put together again by hand, as someone editing one would: the raw
 * tar's entries, a tar of given entries, and `sealed`, which recomputes the manifest (each NDJSON
 * part's rows, bytes and SHA-256, and the counts) so that only what the rows say is wrong.
 */

export type Entry = { path: string; bytes: Buffer };
export type Row = Record<string, unknown>;

/** The raw tar's entries: name, where its header is, where its body is, its size. */
export function tarEntries(tar: Buffer): Array<{ path: string; header: number; body: number; size: number }> {
  const out: Array<{ path: string; header: number; body: number; size: number }> = [];
  for (let off = 0; off + 512 <= tar.length; ) {
    const h = new Header(tar, off);
    if (h.nullBlock || h.path === undefined) break;
    const size = h.size ?? 0;
    out.push({ path: h.path, header: off, body: off + 512, size });
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}

/** A tar's header for an entry of `size` bytes. */
export function tarHeader(path: string, size: number): Buffer {
  const block = Buffer.alloc(512);
  new Header({ path, size, mode: 0o644, mtime: new Date(), type: 'File' }).encode(block, 0);
  return block;
}

/** A tar of these entries (name, bytes), ended properly. */
export function tarOf(entries: readonly Entry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    blocks.push(
      tarHeader(e.path, e.bytes.length),
      e.bytes,
      Buffer.alloc((512 - (e.bytes.length % 512)) % 512),
    );
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** A gzip'd archive's entries as (name, bytes). */
export function archiveEntries(archive: Buffer): Entry[] {
  const tar = gunzipSync(archive);
  return tarEntries(tar).map((e) => ({
    path: e.path,
    bytes: Buffer.from(tar.subarray(e.body, e.body + e.size)),
  }));
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
const linesIn = (bytes: Buffer): number => bytes.toString('latin1').split('\n').length - 1;

type ManifestPart = {
  path: string;
  kind: string;
  table?: string;
  rows: number;
  bytes: number;
  sha256: string;
};

/** The manifest entry of an NDJSON part at `path`. */
function partOf(path: string, bytes: Buffer): ManifestPart {
  const table = /^tables\/([a-z_]+)\//.exec(path)?.[1];
  const kind = path.startsWith('events/')
    ? 'events'
    : path.startsWith('checkpoints/')
      ? 'checkpoints'
      : 'table';
  return {
    path,
    kind,
    ...(table ? { table } : {}),
    rows: linesIn(bytes),
    bytes: bytes.length,
    sha256: sha256(bytes),
  };
}

/**
 * The gzip'd archive of `entries` with its manifest made to agree with them: every part's rows, bytes
 * and checksum, the counts of events, checkpoints, each table and the images.
 */
export function sealed(entries: readonly Entry[]): Buffer {
  const manifestEntry = entries.find((e) => e.path === 'manifest.json');
  if (!manifestEntry) throw new Error('no manifest.json among the entries');
  const manifest = JSON.parse(manifestEntry.bytes.toString('utf8')) as {
    counts: Record<string, number>;
    parts: ManifestPart[];
  };
  const parts = entries.filter((e) => e.path !== 'manifest.json' && !e.path.startsWith('media/'));
  manifest.parts = parts.map((e) => partOf(e.path, e.bytes));
  for (const key of Object.keys(manifest.counts)) manifest.counts[key] = 0;
  for (const p of manifest.parts) {
    const key = p.kind === 'table' ? (p.table as string) : p.kind;
    manifest.counts[key] = (manifest.counts[key] ?? 0) + p.rows;
  }
  const media = entries.filter((e) => e.path.startsWith('media/'));
  manifest.counts.media = media.length;
  manifest.counts.media_bytes = media.reduce((n, e) => n + e.bytes.length, 0);
  const rest = entries.filter((e) => e.path !== 'manifest.json');
  return gzipSync(tarOf([...rest, { path: 'manifest.json', bytes: Buffer.from(JSON.stringify(manifest)) }]));
}

/** The rows of an NDJSON part. */
export function rowsOf(entries: readonly Entry[], path: string): Row[] {
  const entry = entries.find((e) => e.path === path);
  if (!entry) return [];
  return entry.bytes
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Row);
}

/** The entries with the part at `path` holding `rows` (added before the manifest when it was not there). */
export function withRows(entries: readonly Entry[], path: string, rows: readonly Row[]): Entry[] {
  const bytes = Buffer.from(rows.map((r) => `${JSON.stringify(r)}\n`).join(''), 'utf8');
  if (entries.some((e) => e.path === path))
    return entries.map((e) => (e.path === path ? { path, bytes } : e));
  const at = entries.findIndex((e) => e.path === 'manifest.json');
  return [...entries.slice(0, at), { path, bytes }, ...entries.slice(at)];
}

/** Changes the rows of the part at `path`. */
export function editRows(entries: readonly Entry[], path: string, edit: (rows: Row[]) => Row[]): Entry[] {
  return withRows(entries, path, edit(rowsOf(entries, path)));
}

/** An event as an export writes it, on `stream` at `version`, at `position`. */
export function eventRow(
  event: { type: string; data: unknown; metadata?: unknown },
  place: { stream: string; version: number; position: number },
): Row {
  const at = new Date().toISOString();
  return {
    data: event.data,
    type: event.type,
    version: place.version,
    event_id: crypto.randomUUID(),
    metadata: event.metadata ?? { at },
    position: place.position,
    stream_id: place.stream,
    recorded_at: at,
  };
}

/**
 * The entries with `events` appended to the log, each on its stream at the stream's next version and at
 * the log's next position, and the streams table brought along: what a hand-edited archive would hold.
 */
export function appendEvents(
  entries: readonly Entry[],
  events: ReadonlyArray<{ type: string; data: unknown; stream: string }>,
): Entry[] {
  const eventParts = entries.filter((e) => e.path.startsWith('events/')).map((e) => e.path);
  const last = eventParts[eventParts.length - 1] ?? 'events/000001.ndjson';
  const all = eventParts.flatMap((p) => rowsOf(entries, p));
  let position = Math.max(0, ...all.map((r) => r.position as number));
  const streams = rowsOf(entries, 'tables/streams/000001.ndjson');
  const rows = rowsOf(entries, last);
  for (const e of events) {
    const row = streams.find((s) => s.stream_id === e.stream);
    const version = ((row?.version as number | undefined) ?? 0) + 1;
    position += 1;
    rows.push(eventRow(e, { stream: e.stream, version, position }));
    const at = new Date().toISOString();
    if (row) Object.assign(row, { version, updated_at: at });
    else streams.push({ version, stream_id: e.stream, updated_at: at, stream_type: e.stream.split('-')[0] });
  }
  return withRows(withRows(entries, last, rows), 'tables/streams/000001.ndjson', streams);
}
