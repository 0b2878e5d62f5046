import type { Metadata } from 'sharp';
import { MAX_IMAGE_BYTES, MAX_IMAGE_MIB, MAX_IMAGE_SIDE } from '../../domain/article/events.ts';
import { DomainError } from '../../domain/errors.ts';

/*
 * What an uploaded or fetched featured image is, decided from its bytes alone (CONTRACT "Writes"): never
 * from a file name or a Content-Type header.
 *
 * 1. Size: more than 10 MiB is `image_too_large` before anything is parsed.
 * 2. Magic numbers: JPEG, PNG, GIF, WebP or AVIF, or `unsupported_image`. SVG, HTML and XML never
 *    reach sharp (libvips would happily load an SVG), whatever they are called.
 * 3. Our own bounds-checked walk of the container (PNG chunks, JPEG segments, GIF blocks, the RIFF
 *    header, ISO-BMFF boxes) reads the dimensions the file declares and refuses above 8000 pixels a side
 *    as `image_too_large`, so a tiny file declaring 100000 x 100000 is refused as too large whether or not
 *    a decoder could read the rest of it; the same walk refuses a file cut short (no PNG IEND, no JPEG
 *    EOI, an incomplete RIFF or box) as `unsupported_image`.
 * 4. sharp reads the metadata (headers only, no pixel is decoded) under `limitInputPixels`, and must agree
 *    with the sniffed format and the limits.
 */

export type ImageFormat = 'jpeg' | 'png' | 'webp' | 'gif' | 'avif';

type ImageInfo = {
  format: ImageFormat;
  /** The media type to serve the image with. */
  mime: string;
  /** The file extension the media store and the `/media/<sha256>.<ext>` URL use. */
  ext: string;
  /** Display width in pixels (EXIF orientation applied, as a browser shows it). */
  width: number;
  /** Display height in pixels (EXIF orientation applied). */
  height: number;
};

const IMAGE_TYPES: Readonly<Record<ImageFormat, { mime: string; ext: string }>> = {
  jpeg: { mime: 'image/jpeg', ext: 'jpg' },
  png: { mime: 'image/png', ext: 'png' },
  webp: { mime: 'image/webp', ext: 'webp' },
  gif: { mime: 'image/gif', ext: 'gif' },
  avif: { mime: 'image/avif', ext: 'avif' },
};

const ACCEPTED = 'Send a JPEG, PNG, WebP, GIF or AVIF image.';

function unsupported(detail: string): DomainError {
  return new DomainError('unsupported_image', `${detail} ${ACCEPTED}`);
}

function tooLarge(width: number, height: number): DomainError {
  return new DomainError(
    'image_too_large',
    `The image is ${width} x ${height} pixels; at most ${MAX_IMAGE_SIDE} x ${MAX_IMAGE_SIDE} are accepted.`,
  );
}

function ascii(bytes: Uint8Array, start: number, length: number): string {
  let out = '';
  for (let i = start; i < start + length && i < bytes.length; i++) out += String.fromCharCode(bytes[i] ?? 0);
  return out;
}

function startsWith(bytes: Uint8Array, prefix: readonly number[], at = 0): boolean {
  return prefix.every((b, i) => bytes[at + i] === b);
}

const JPEG_EOI = Buffer.from([0xff, 0xd9]);
const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] as const;
const AVIF_BRANDS = new Set(['avif', 'avis']);

/** The format announced by the file's magic number, or null. */
export function sniffImageFormat(bytes: Uint8Array): ImageFormat | null {
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return 'jpeg';
  if (startsWith(bytes, PNG_SIGNATURE)) return 'png';
  const head6 = ascii(bytes, 0, 6);
  if (head6 === 'GIF87a' || head6 === 'GIF89a') return 'gif';
  if (ascii(bytes, 0, 4) === 'RIFF' && ascii(bytes, 8, 4) === 'WEBP') return 'webp';
  if (bytes.length >= 16 && ascii(bytes, 4, 4) === 'ftyp') {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const size = view.getUint32(0);
    if (size < 16 || size > bytes.length) return null;
    if (AVIF_BRANDS.has(ascii(bytes, 8, 4))) return 'avif';
    for (let at = 16; at + 4 <= size; at += 4) if (AVIF_BRANDS.has(ascii(bytes, at, 4))) return 'avif';
  }
  return null;
}

/** A helpful reason for bytes that are no accepted image. */
function describeUnknown(bytes: Uint8Array): string {
  let text = ascii(bytes, 0, 512).replace(/^\u00ef\u00bb\u00bf/, '');
  text = text.trimStart().toLowerCase();
  if (text.includes('<svg')) return 'SVG images are not accepted.';
  if (text.startsWith('<!doctype html') || text.startsWith('<html')) return 'The file is HTML, not an image.';
  if (text.startsWith('<')) return 'The file is markup (SVG, HTML or XML), not an accepted image.';
  if (ascii(bytes, 4, 4) === 'ftyp') return 'Only the AVIF kind of HEIF image is accepted (not HEIC).';
  return 'The file is not an image in an accepted format.';
}

type Scan = { ok: true; width: number; height: number } | { ok: false; reason: 'truncated' | 'corrupt' };

const TRUNCATED: Scan = { ok: false, reason: 'truncated' };
const CORRUPT: Scan = { ok: false, reason: 'corrupt' };

function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** PNG: IHDR first (the declared size), then chunk by chunk to IEND. */
function scanPng(bytes: Uint8Array, tooBig: (w: number, h: number) => boolean): Scan {
  const view = viewOf(bytes);
  if (bytes.length < 8 + 8 + 13) return TRUNCATED;
  if (view.getUint32(8) !== 13 || ascii(bytes, 12, 4) !== 'IHDR') return CORRUPT;
  const width = view.getUint32(16);
  const height = view.getUint32(20);
  if (width === 0 || height === 0) return CORRUPT;
  if (tooBig(width, height)) return { ok: true, width, height };
  let at = 8;
  for (;;) {
    if (at + 8 > bytes.length) return TRUNCATED;
    const length = view.getUint32(at);
    if (length > 0x7fffffff) return CORRUPT;
    const end = at + 12 + length;
    if (end > bytes.length) return TRUNCATED;
    if (ascii(bytes, at + 4, 4) === 'IEND') return { ok: true, width, height };
    at = end;
  }
}

/** JPEG: segments up to the first frame header (SOFn: the declared size), then an EOI after the scan. */
function scanJpeg(bytes: Uint8Array, tooBig: (w: number, h: number) => boolean): Scan {
  const view = viewOf(bytes);
  let at = 2;
  let size: { width: number; height: number } | null = null;
  for (;;) {
    if (at + 2 > bytes.length) return TRUNCATED;
    if (bytes[at] !== 0xff) return CORRUPT;
    const marker = bytes[at + 1] ?? 0;
    if (marker === 0xff) {
      at += 1; // fill byte
      continue;
    }
    if (marker === 0xd8 || marker === 0xd9 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      return CORRUPT; // no standalone marker belongs before the first scan
    }
    if (at + 4 > bytes.length) return TRUNCATED;
    const length = view.getUint16(at + 2);
    if (length < 2) return CORRUPT;
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) {
      if (at + 9 > bytes.length) return TRUNCATED;
      const height = view.getUint16(at + 5);
      const width = view.getUint16(at + 7);
      if (width === 0 || height === 0) return CORRUPT;
      size = { width, height };
      if (tooBig(width, height)) return { ok: true, ...size };
    }
    const end = at + 2 + length;
    if (end > bytes.length) return TRUNCATED;
    if (marker === 0xda) {
      if (!size) return CORRUPT; // a scan before any frame header
      // Entropy-coded data stuffs every 0xFF with 0x00, so FF D9 after the first scan is the end marker.
      const eoi = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf(JPEG_EOI, end);
      return eoi === -1 ? TRUNCATED : { ok: true, ...size };
    }
    at = end;
  }
}

/** GIF: the logical screen, then every block (each frame's size checked too) up to the trailer. */
function scanGif(bytes: Uint8Array, tooBig: (w: number, h: number) => boolean): Scan {
  const view = viewOf(bytes);
  if (bytes.length < 13) return TRUNCATED;
  const width = view.getUint16(6, true);
  const height = view.getUint16(8, true);
  if (width === 0 || height === 0) return CORRUPT;
  if (tooBig(width, height)) return { ok: true, width, height };
  const packed = bytes[10] ?? 0;
  let at = 13 + (packed & 0x80 ? 3 * 2 ** ((packed & 0x07) + 1) : 0);
  const skipSubBlocks = (): boolean => {
    for (;;) {
      if (at >= bytes.length) return false;
      const n = bytes[at] ?? 0;
      at += 1 + n;
      if (n === 0) return true;
    }
  };
  for (;;) {
    if (at >= bytes.length) return TRUNCATED;
    const kind = bytes[at];
    if (kind === 0x3b) return { ok: true, width, height };
    if (kind === 0x21) {
      at += 2; // introducer and label
      if (!skipSubBlocks()) return TRUNCATED;
    } else if (kind === 0x2c) {
      if (at + 10 > bytes.length) return TRUNCATED;
      const frameWidth = view.getUint16(at + 5, true);
      const frameHeight = view.getUint16(at + 7, true);
      if (tooBig(frameWidth, frameHeight)) return { ok: true, width: frameWidth, height: frameHeight };
      const local = bytes[at + 9] ?? 0;
      at += 10 + (local & 0x80 ? 3 * 2 ** ((local & 0x07) + 1) : 0);
      at += 1; // LZW minimum code size
      if (!skipSubBlocks()) return TRUNCATED;
    } else {
      return CORRUPT;
    }
  }
}

/** WebP: the RIFF length must be present, and the first chunk (VP8X, VP8L or VP8) declares the size. */
function scanWebp(bytes: Uint8Array, tooBig: (w: number, h: number) => boolean): Scan {
  const view = viewOf(bytes);
  if (bytes.length < 30) return TRUNCATED;
  const riffSize = view.getUint32(4, true);
  if (riffSize < 22) return CORRUPT;
  const chunk = ascii(bytes, 12, 4);
  let size: { width: number; height: number };
  if (chunk === 'VP8X') {
    const w = (bytes[24] ?? 0) | ((bytes[25] ?? 0) << 8) | ((bytes[26] ?? 0) << 16);
    const h = (bytes[27] ?? 0) | ((bytes[28] ?? 0) << 8) | ((bytes[29] ?? 0) << 16);
    size = { width: w + 1, height: h + 1 };
  } else if (chunk === 'VP8L') {
    if (bytes[20] !== 0x2f) return CORRUPT;
    const bits = view.getUint32(21, true);
    size = { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  } else if (chunk === 'VP8 ') {
    if (!startsWith(bytes, [0x9d, 0x01, 0x2a], 23)) return CORRUPT;
    size = { width: view.getUint16(26, true) & 0x3fff, height: view.getUint16(28, true) & 0x3fff };
    if (size.width === 0 || size.height === 0) return CORRUPT;
  } else {
    return CORRUPT;
  }
  if (tooBig(size.width, size.height)) return { ok: true, ...size };
  if (8 + riffSize > bytes.length) return TRUNCATED;
  return { ok: true, ...size };
}

/**
 * AVIF (ISO-BMFF): the image spatial extents (`ispe`, mandatory for every HEIF image item) under
 * meta/iprp/ipco, the largest one declared being the size checked (read from what is there even when the
 * file is cut short); then every top-level box complete, and the coded data present (`mdat`, or `idat`
 * inside meta).
 */
function scanAvif(bytes: Uint8Array, tooBig: (w: number, h: number) => boolean): Scan {
  const view = viewOf(bytes);
  type Box = { type: string; start: number; end: number };
  /** The boxes between from and to (the last one clamped to `to` when it runs past), and whether one did. */
  const boxes = (from: number, to: number): { list: Box[]; cut: boolean } => {
    const list: Box[] = [];
    let at = from;
    while (at < to) {
      if (at + 8 > to) return { list, cut: true };
      let size = view.getUint32(at);
      let header = 8;
      if (size === 1) {
        if (at + 16 > to) return { list, cut: true };
        const big = view.getBigUint64(at + 8);
        size = big > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(big);
        header = 16;
      } else if (size === 0) {
        size = to - at;
      }
      if (size < header) return { list, cut: true };
      const type = ascii(bytes, at + 4, 4);
      if (at + size > to) {
        list.push({ type, start: at + header, end: to });
        return { list, cut: true };
      }
      list.push({ type, start: at + header, end: at + size });
      at += size;
    }
    return { list, cut: false };
  };
  const child = (box: Box | undefined, type: string, skip = 0): Box | undefined =>
    box ? boxes(box.start + skip, box.end).list.find((b) => b.type === type) : undefined;
  const top = boxes(0, bytes.length);
  const meta = top.list.find((b) => b.type === 'meta');
  if (!meta) return top.cut ? TRUNCATED : CORRUPT;
  const ipco = child(child(meta, 'iprp', 4), 'ipco'); // meta is a full box: version and flags first
  let width = 0;
  let height = 0;
  for (const p of ipco ? boxes(ipco.start, ipco.end).list : []) {
    if (p.type !== 'ispe' || p.end - p.start < 12) continue;
    width = Math.max(width, view.getUint32(p.start + 4));
    height = Math.max(height, view.getUint32(p.start + 8));
  }
  if (width === 0 || height === 0) return top.cut ? TRUNCATED : CORRUPT;
  if (tooBig(width, height)) return { ok: true, width, height };
  if (top.cut) return TRUNCATED;
  const hasData = top.list.some((b) => b.type === 'mdat') || child(meta, 'idat', 4) !== undefined;
  return hasData ? { ok: true, width, height } : TRUNCATED;
}

function scan(format: ImageFormat, bytes: Uint8Array): Scan {
  const tooBig = (w: number, h: number): boolean => w > MAX_IMAGE_SIDE || h > MAX_IMAGE_SIDE;
  switch (format) {
    case 'png':
      return scanPng(bytes, tooBig);
    case 'jpeg':
      return scanJpeg(bytes, tooBig);
    case 'gif':
      return scanGif(bytes, tooBig);
    case 'webp':
      return scanWebp(bytes, tooBig);
    case 'avif':
      return scanAvif(bytes, tooBig);
    default: {
      const unknown: never = format;
      throw new Error(`unknown format ${String(unknown)}`);
    }
  }
}

/** sharp's name for what it loaded, in our terms (AVIF is HEIF with AV1 compression). */
function sharpFormat(metadata: Metadata): ImageFormat | null {
  switch (metadata.format) {
    case 'jpeg':
    case 'png':
    case 'webp':
    case 'gif':
      return metadata.format;
    case 'heif':
      return metadata.compression === 'av1' ? 'avif' : null;
    default:
      return null;
  }
}

/**
 * Identifies an image from its bytes and checks it against the CONTRACT limits, reading headers only.
 * Throws `DomainError` `image_too_large` (more than 10 MiB, more than 8000 pixels a side, or a
 * decompression bomb) or `unsupported_image` (anything but JPEG, PNG, WebP, GIF or AVIF; SVG; a damaged
 * or truncated file).
 */
export async function inspectImage(bytes: Uint8Array): Promise<ImageInfo> {
  if (bytes.length > MAX_IMAGE_BYTES) {
    throw new DomainError(
      'image_too_large',
      `The image is ${bytes.length} bytes; at most ${MAX_IMAGE_BYTES} bytes (${MAX_IMAGE_MIB} MiB) are accepted.`,
    );
  }
  if (bytes.length === 0) throw unsupported('The file is empty.');
  const format = sniffImageFormat(bytes);
  if (!format) throw unsupported(describeUnknown(bytes));

  const declared = scan(format, bytes);
  if (!declared.ok) {
    throw unsupported(
      declared.reason === 'truncated'
        ? `The ${format.toUpperCase()} file is incomplete (cut short).`
        : `The ${format.toUpperCase()} file is damaged.`,
    );
  }
  if (declared.width > MAX_IMAGE_SIDE || declared.height > MAX_IMAGE_SIDE) {
    throw tooLarge(declared.width, declared.height);
  }

  // sharp (libvips) is loaded by the first image a process reads, not by its start.
  const { default: sharp } = await import('sharp');
  let metadata: Metadata;
  try {
    // Headers only: libvips opens the image lazily and metadata() decodes no pixel. The pixel limit is
    // checked by sharp on the declared size before anything else happens.
    metadata = await sharp(bytes, {
      limitInputPixels: MAX_IMAGE_SIDE * MAX_IMAGE_SIDE,
      failOn: 'error',
    }).metadata();
  } catch (error) {
    if (error instanceof Error && /pixel limit/i.test(error.message)) {
      throw new DomainError(
        'image_too_large',
        `The image has more than ${MAX_IMAGE_SIDE} x ${MAX_IMAGE_SIDE} pixels.`,
      );
    }
    throw unsupported(`The ${format.toUpperCase()} file could not be read.`);
  }
  if (sharpFormat(metadata) !== format) {
    throw unsupported(`The file starts like ${format.toUpperCase()} but is not a readable one.`);
  }
  const { width, height } = metadata;
  if (!(width > 0 && height > 0)) throw unsupported(`The ${format.toUpperCase()} file is damaged.`);
  if (width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE) throw tooLarge(width, height);
  const shown = metadata.autoOrient ?? { width, height };
  return { format, ...IMAGE_TYPES[format], width: shown.width, height: shown.height };
}
