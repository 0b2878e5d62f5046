import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';

/*
 * Featured images, stored content-addressed: the key is the SHA-256 of the bytes and the extension of
 * their format, so the same image stored twice is one file, a key never changes meaning, and what is
 * served under a key can be cached forever. The store knows nothing of articles: an article's
 * `featured_image.url` is the reference.
 */

/** `<sha256 hex>.<ext>`: the only keys a store accepts (and the only names `/media/` serves). */
export const MEDIA_KEY = /^[0-9a-f]{64}\.(jpg|png|webp|gif|avif)$/;

/** The folders of a directory store: the first two hex digits of the hash. */
const SHARD = /^[0-9a-f]{2}$/;
/**
 * What an interrupted write (`.tmp-`) or collection (`.gc-`) leaves in a folder: `.<what>-<key>-<random>`.
 * The first group is the folder it belongs in.
 */
const LEFTOVER = /^\.(?:tmp|gc)-([0-9a-f]{2})[0-9a-f]{62}\.(?:jpg|png|webp|gif|avif)-[0-9a-f]{12}$/;

/** The media type of each extension the store holds. */
const MEDIA_TYPES: Readonly<Record<string, string>> = {
  jpg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  gif: 'image/gif',
  avif: 'image/avif',
};

export type StoredMedia = {
  /** `<sha256>.<ext>`. */
  key: string;
  /** Where the service serves it: `/media/<sha256>.<ext>` (relative to PUBLIC_URL). */
  url: string;
};

export type MediaObject = {
  /** The bytes; the caller reads (or destroys) the stream. */
  stream: Readable;
  mime: string;
  size: number;
  /** The SHA-256 of the bytes (hex): a strong entity tag. */
  sha256: string;
};

/** One file of the store, as the collector sees it. */
export type MediaEntry = {
  /** `<sha256>.<ext>` for a stored image; the file name for a leftover. */
  key: string;
  /** False for a `.tmp-*` or `.gc-*` file an interrupted write or collection left behind (referenced by nothing). */
  stored: boolean;
  size: number;
  /** When it was last stored: a put of bytes already there counts as storing them again. */
  storedAt: Date;
};

export interface MediaStore {
  /**
   * Stores the bytes (idempotent: the same bytes give the same key, stored once). Storing bytes that
   * are there already renews their `storedAt`, so that the collector leaves them alone while the
   * write that stored them is in flight.
   */
  put(bytes: Uint8Array, ext: string, mime: string): Promise<StoredMedia>;
  /** The object under `key`, or null when the key is malformed or unknown. */
  get(key: string): Promise<MediaObject | null>;
  /** Every file, one folder at a time (no order promised). */
  list(): AsyncIterable<MediaEntry>;
  /**
   * Deletes the file under `key` unless it was stored at or after `storedBefore` (a put since it was
   * listed renews it). Safe against a concurrent put of the same bytes, and against another
   * collector: true when this call removed it.
   */
  remove(key: string, storedBefore: Date): Promise<boolean>;
}

/** The URL path of a stored key. */
function mediaUrl(key: string): string {
  return `/media/${key}`;
}

function checkType(ext: string, mime: string): void {
  if (MEDIA_TYPES[ext] === undefined || MEDIA_TYPES[ext] !== mime) {
    throw new Error(`media store: unsupported type ${ext} (${mime})`);
  }
}

/**
 * A media store in a directory (by default `<DATA_DIR>/media`, `MEDIA_DIR`): `<dir>/<ab>/<sha256>.<ext>`,
 * where `<ab>` is the hash's first two hex digits (256 folders, so none grows huge). A write goes to a
 * temporary file in the same folder, is flushed to disk, then renamed into place: a reader sees the
 * whole file or none, and a crash leaves at worst a `.tmp-*` file (safe to delete).
 */
export function createDirectoryMediaStore(dir: string): MediaStore {
  const root = path.resolve(dir);
  const fileOf = (key: string): string => path.join(root, key.slice(0, 2), key);

  return {
    async put(bytes, ext, mime) {
      checkType(ext, mime);
      const sha = createHash('sha256').update(bytes).digest('hex');
      const key = `${sha}.${ext}`;
      const file = fileOf(key);
      const stored = { key, url: mediaUrl(key) };
      const existing = await stat(file).catch(() => null);
      if (existing?.isFile() && existing.size === bytes.length) {
        // Renewed, so the collector keeps it; gone meanwhile (collected), it is written again below.
        const now = new Date();
        const renewed = await utimes(file, now, now).then(
          () => true,
          (error: NodeJS.ErrnoException) => {
            if (error.code === 'ENOENT') return false;
            throw error;
          },
        );
        if (renewed) return stored;
      }

      const folder = path.dirname(file);
      await mkdir(folder, { recursive: true });
      const temp = path.join(folder, `.tmp-${key}-${randomBytes(6).toString('hex')}`);
      try {
        const handle = await open(temp, 'wx', 0o644);
        try {
          await handle.writeFile(bytes);
          await handle.sync();
        } finally {
          await handle.close();
        }
        // Same content, same name: a concurrent put of the same bytes renames an identical file.
        await rename(temp, file);
      } catch (error) {
        await rm(temp, { force: true });
        throw error;
      }
      // Make the rename itself durable (best effort: not every platform can fsync a directory).
      const folderHandle = await open(folder, 'r').catch(() => null);
      if (folderHandle) {
        await folderHandle.sync().catch(() => {});
        await folderHandle.close();
      }
      return stored;
    },

    async *list() {
      const folders = await readdir(root, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return [];
        throw error;
      });
      for (const folder of folders) {
        if (!folder.isDirectory() || !SHARD.test(folder.name)) continue;
        const names = await readdir(path.join(root, folder.name)).catch(() => [] as string[]);
        for (const name of names) {
          const stored = MEDIA_KEY.test(name) && name.startsWith(folder.name);
          if (!stored && LEFTOVER.exec(name)?.[1] !== folder.name) continue;
          const info = await stat(path.join(root, folder.name, name)).catch(() => null);
          if (!info?.isFile()) continue;
          yield { key: name, stored, size: info.size, storedAt: info.mtime };
        }
      }
    },

    async remove(key, storedBefore) {
      const leftover = LEFTOVER.exec(key);
      if (leftover?.[1]) {
        // Nothing refers to a leftover and no write renews one: old enough is enough.
        const file = path.join(root, leftover[1], key);
        const info = await stat(file).catch(() => null);
        if (!info || info.mtime >= storedBefore) return false;
        await rm(file, { force: true });
        return true;
      }
      if (!MEDIA_KEY.test(key)) return false;
      const folder = path.join(root, key.slice(0, 2));
      const file = path.join(folder, key);
      // Moved aside first, then judged: a put that renewed the file before the move shows in its time
      // (and the file goes back); a put after the move finds no file and writes it anew.
      const aside = path.join(folder, `.gc-${key}-${randomBytes(6).toString('hex')}`);
      try {
        await rename(file, aside);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw error;
      }
      const info = await stat(aside);
      if (info.mtime >= storedBefore) {
        // Same name, same bytes: putting it back over a copy written meanwhile changes nothing.
        await rename(aside, file);
        return false;
      }
      await rm(aside, { force: true });
      return true;
    },

    async get(key) {
      if (!MEDIA_KEY.test(key)) return null;
      const mime = MEDIA_TYPES[key.slice(key.lastIndexOf('.') + 1)];
      if (!mime) return null;
      // One open file: its size and its stream describe the same file even if it is replaced meanwhile.
      const handle = await open(fileOf(key), 'r').catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT' || error.code === 'ENOTDIR' || error.code === 'EISDIR') return null;
        throw error;
      });
      if (!handle) return null;
      try {
        const info = await handle.stat();
        if (!info.isFile()) {
          await handle.close();
          return null;
        }
        return {
          stream: handle.createReadStream({ autoClose: true }),
          mime,
          size: info.size,
          sha256: key.slice(0, 64),
        };
      } catch (error) {
        await handle.close();
        throw error;
      }
    },
  };
}

/**
 * Puts a stored image back into the directory store `dir` under its `key`, streamed from `source`, with
 * `storedAt` as its time (what the collector reads): an import's. The bytes go to a temporary file that
 * is flushed, checked against the key's SHA-256 and renamed into place, as a put's do. A file already
 * there under the key (the same bytes, by its name) is left as it is: `written` false.
 */
export async function restoreMediaFile(
  dir: string,
  key: string,
  source: AsyncIterable<Uint8Array>,
  storedAt: Date,
): Promise<{ written: boolean; file: string }> {
  if (!MEDIA_KEY.test(key)) throw new Error(`media store: not a media key: ${key}`);
  const folder = path.join(path.resolve(dir), key.slice(0, 2));
  const file = path.join(folder, key);
  const existing = await stat(file).catch(() => null);
  if (existing?.isFile()) {
    for await (const _ of source) void _;
    return { written: false, file };
  }
  await mkdir(folder, { recursive: true });
  const temp = path.join(folder, `.tmp-${key}-${randomBytes(6).toString('hex')}`);
  try {
    const hash = createHash('sha256');
    const handle = await open(temp, 'wx', 0o644);
    try {
      for await (const chunk of source) {
        hash.update(chunk);
        await handle.write(chunk);
      }
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (hash.digest('hex') !== key.slice(0, 64))
      throw new Error(`media store: the bytes given for ${key} are not the ones its name says`);
    await utimes(temp, storedAt, storedAt);
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  return { written: true, file };
}
