import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { Header } from 'tar';

/*
 * A gzip'd tar, written and read as streams: entries go out one after another with the size in their
 * header (the tar package's Header encodes and decodes the 512-byte ustar blocks), and are read back one
 * at a time, each body as chunks, so neither side holds more than a chunk of it. Reading checks what a
 * truncated or damaged file would break: the gzip stream's end and CRC (zlib), each header's checksum,
 * each body's full length, and the two zero blocks that end a tar.
 */

const BLOCK = 512;
const ZEROS = Buffer.alloc(BLOCK * 2);
const ZEROS_64K = Buffer.alloc(64 * 1024);

/**
 * The zero bytes a reader takes after a tar's two end blocks: what GNU tar pads its last record with
 * (a blocking factor of up to 2048 blocks); more is not padding, and is refused as soon as it is seen.
 */
export const TAIL_MAX = 2048 * BLOCK;

/** The bytes of a tar's structure beyond its entries' bodies: a header and padding each, the end blocks. */
export function tarOverhead(entries: number): number {
  return entries * 2 * BLOCK + 2 * BLOCK + TAIL_MAX;
}

/** The archive cannot be read as a whole, well-formed gzip'd tar. */
export class ArchiveDamaged extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ArchiveDamaged';
  }
}

export interface TarWriter {
  /** One entry whose bytes are all here. */
  add(path: string, bytes: Buffer, mtime?: Date): Promise<void>;
  /** One entry streamed from `source`, which must yield exactly `size` bytes; `onChunk` sees each one. */
  addStream(
    path: string,
    size: number,
    source: AsyncIterable<Buffer>,
    mtime?: Date,
    onChunk?: (chunk: Buffer) => void,
  ): Promise<void>;
  /** Writes the end of the archive and waits until the file is written (not synced). */
  finish(): Promise<void>;
  /** Stops writing after a failure; the file is left for the caller to remove. */
  abort(): Promise<void>;
}

/** Opens `file` (created, never overwritten: `wx`) for a gzip'd tar. */
export function createTarWriter(file: string): TarWriter {
  const gzip = createGzip({ level: 6 });
  const out = createWriteStream(file, { flags: 'wx', mode: 0o600 });
  const done = pipeline(gzip, out);
  // A write error surfaces through `done`; a write waiting for 'drain' would never see it otherwise.
  let failed: unknown;
  done.catch((error: unknown) => {
    failed ??= error;
  });

  const write = async (chunk: Buffer): Promise<void> => {
    if (failed !== undefined) throw failed;
    if (!gzip.write(chunk)) await Promise.race([once(gzip, 'drain'), done]);
    if (failed !== undefined) throw failed;
  };
  const header = async (path: string, size: number, mtime: Date): Promise<void> => {
    const h = new Header({ path, mode: 0o644, size, mtime, type: 'File', uid: 0, gid: 0 });
    const block = Buffer.alloc(BLOCK);
    if (h.encode(block, 0))
      throw new Error(`tar: ${path} needs a pax header, which this writer does not make`);
    await write(block);
  };
  const pad = async (size: number): Promise<void> => {
    const rest = size % BLOCK;
    if (rest !== 0) await write(Buffer.alloc(BLOCK - rest));
  };

  return {
    async add(path, bytes, mtime = new Date()) {
      await header(path, bytes.length, mtime);
      await write(bytes);
      await pad(bytes.length);
    },
    async addStream(path, size, source, mtime = new Date(), onChunk) {
      await header(path, size, mtime);
      let written = 0;
      for await (const chunk of source) {
        written += chunk.length;
        if (written > size)
          throw new Error(`tar: ${path} grew while it was written (more than ${size} bytes)`);
        onChunk?.(chunk);
        await write(chunk);
      }
      if (written !== size)
        throw new Error(`tar: ${path} shrank while it was written (${written} of ${size} bytes)`);
      await pad(size);
    },
    async finish() {
      await write(ZEROS);
      gzip.end();
      await done;
    },
    async abort() {
      gzip.destroy();
      out.destroy();
      await done.catch(() => {});
    },
  };
}

/** One entry of an archive being read: its body must be read (or skipped) before the next entry. */
export type TarEntry = {
  path: string;
  size: number;
  mtime: Date | undefined;
  /** The body, in chunks; exactly `size` bytes, or ArchiveDamaged when the archive ends first. */
  body(): AsyncIterable<Buffer>;
};

/** Reads exact byte counts from a stream of chunks. */
function byteReader(source: AsyncIterator<Buffer>) {
  let buffered: Buffer[] = [];
  let length = 0;
  let ended = false;
  const fill = async (n: number): Promise<void> => {
    while (length < n && !ended) {
      const next = await source.next();
      if (next.done) ended = true;
      else {
        buffered.push(next.value);
        length += next.value.length;
      }
    }
  };
  const take = (n: number): Buffer => {
    const all = buffered.length === 1 ? (buffered[0] as Buffer) : Buffer.concat(buffered, length);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    buffered = rest.length > 0 ? [rest] : [];
    length = rest.length;
    return out;
  };
  return {
    /** Exactly `n` bytes, or fewer at the end of the stream. */
    async read(n: number): Promise<Buffer> {
      await fill(n);
      return take(Math.min(n, length));
    },
    /** Up to `max` bytes (at least one unless the stream ended): a chunk as it comes. */
    async some(max: number): Promise<Buffer> {
      await fill(1);
      return take(Math.min(max, length));
    },
    /**
     * What follows the end-of-archive blocks: only zero bytes, at most `max` of them (a tar writer may
     * pad its last record), or something else.
     */
    async rest(max: number): Promise<'zeros' | 'data' | 'too_long'> {
      let seen = 0;
      for (;;) {
        const chunk = await this.some(64 * 1024);
        if (chunk.length === 0) return 'zeros';
        seen += chunk.length;
        if (!chunk.equals(ZEROS_64K.subarray(0, chunk.length))) return 'data';
        if (seen > max) return 'too_long';
      }
    },
  };
}

/**
 * The gunzipped bytes of `file`; a truncated or corrupt gzip stream is an ArchiveDamaged, and so is one
 * that expands past `maxBytes`, as soon as it does.
 */
async function* gunzipped(
  file: string,
  onBytes?: (read: number) => void,
  maxBytes = Number.POSITIVE_INFINITY,
): AsyncGenerator<Buffer> {
  const source: Readable = createReadStream(file);
  if (onBytes) source.on('data', () => onBytes((source as ReturnType<typeof createReadStream>).bytesRead));
  const gunzip = createGunzip();
  source.on('error', (error) => gunzip.destroy(error));
  source.pipe(gunzip);
  let expanded = 0;
  try {
    for await (const chunk of gunzip) {
      expanded += (chunk as Buffer).length;
      if (expanded > maxBytes)
        throw new ArchiveDamaged(
          `the archive cannot be read: its gzip stream expands past the ${maxBytes} bytes its parts and manifest declare`,
        );
      yield chunk as Buffer;
    }
  } catch (error) {
    if (error instanceof ArchiveDamaged) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR') throw error;
    const why =
      code === 'Z_BUF_ERROR'
        ? 'it ends before its gzip stream does (truncated)'
        : `its gzip stream is damaged (${(error as Error).message})`;
    throw new ArchiveDamaged(`the archive cannot be read: ${why}`, { cause: error });
  } finally {
    source.destroy();
    gunzip.destroy();
  }
}

/**
 * The entries of the gzip'd tar `file`, in order. Each entry's body is read before asking for the next
 * one (an unread body is skipped). `onBytes` is told how many bytes of the file were read so far;
 * `maxBytes` bounds the tar's bytes (the gzip stream's, decompressed). Ends only at a well-formed end: a
 * file that stops short anywhere, or goes on past its end with more than TAIL_MAX zero bytes or with
 * anything else, throws ArchiveDamaged.
 */
export async function* readTar(
  file: string,
  opts: { onBytes?: (read: number) => void; maxBytes?: number } = {},
): AsyncGenerator<TarEntry> {
  const reader = byteReader(gunzipped(file, opts.onBytes, opts.maxBytes)[Symbol.asyncIterator]());
  for (;;) {
    const block = await reader.read(BLOCK);
    if (block.length === 0)
      throw new ArchiveDamaged('the archive cannot be read: its tar ends without its end blocks (truncated)');
    if (block.length < BLOCK)
      throw new ArchiveDamaged('the archive cannot be read: it ends inside a tar header (truncated)');
    if (block.every((b) => b === 0)) {
      const second = await reader.read(BLOCK);
      if (second.length < BLOCK || !second.every((b) => b === 0))
        throw new ArchiveDamaged('the archive cannot be read: its tar end is incomplete (truncated)');
      const rest = await reader.rest(TAIL_MAX);
      if (rest === 'data')
        throw new ArchiveDamaged('the archive cannot be read: something follows the end of its tar');
      if (rest === 'too_long')
        throw new ArchiveDamaged(
          `the archive cannot be read: more than ${TAIL_MAX} zero bytes follow the end of its tar (no tar pads that much)`,
        );
      return;
    }
    const header = new Header(block);
    if (!header.cksumValid)
      throw new ArchiveDamaged('the archive cannot be read: a tar header is damaged (bad checksum)');
    if (header.type !== 'File' || header.path === undefined || header.size === undefined)
      throw new ArchiveDamaged(
        `the archive cannot be read: unexpected tar entry ${header.path ?? '?'} (${header.type})`,
      );
    const size = header.size;
    const path = header.path;
    let consumed = false;
    let remaining = size;
    const body = async function* (): AsyncGenerator<Buffer> {
      if (consumed) throw new Error(`tar: the body of ${path} was read already`);
      consumed = true;
      while (remaining > 0) {
        const chunk = await reader.some(Math.min(remaining, 256 * 1024));
        if (chunk.length === 0)
          throw new ArchiveDamaged(`the archive cannot be read: it ends inside ${path} (truncated)`);
        remaining -= chunk.length;
        yield chunk;
      }
    };
    yield { path, size, mtime: header.mtime, body };
    // What its reader left of the body is skipped.
    while (remaining > 0) {
      const chunk = await reader.some(Math.min(remaining, 256 * 1024));
      if (chunk.length === 0)
        throw new ArchiveDamaged(`the archive cannot be read: it ends inside ${path} (truncated)`);
      remaining -= chunk.length;
    }
    const rest = size % BLOCK;
    if (rest !== 0) {
      const padding = await reader.read(BLOCK - rest);
      if (padding.length < BLOCK - rest)
        throw new ArchiveDamaged(`the archive cannot be read: it ends after ${path} (truncated)`);
    }
  }
}
