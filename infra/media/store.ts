import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
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

/** The media type of each extension the store holds. */
export const MEDIA_TYPES: Readonly<Record<string, string>> = {
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

export interface MediaStore {
  /** Stores the bytes (idempotent: the same bytes give the same key, stored once). */
  put(bytes: Uint8Array, ext: string, mime: string): Promise<StoredMedia>;
  /** The object under `key`, or null when the key is malformed or unknown. */
  get(key: string): Promise<MediaObject | null>;
}

/** The URL path of a stored key. */
export function mediaUrl(key: string): string {
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
      if (existing?.isFile() && existing.size === bytes.length) return stored;

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
