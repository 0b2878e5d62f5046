import { crc32, deflateSync } from 'node:zlib';
import sharp, { type Sharp } from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_IMAGE_BYTES } from '../../domain/article/events.ts';
import { DomainError, type ErrorCode } from '../../domain/errors.ts';
import { type ImageFormat, inspectImage, sniffImageFormat } from '../../infra/media/image.ts';

async function refusal(bytes: Uint8Array): Promise<DomainError> {
  try {
    const info = await inspectImage(bytes);
    throw new Error(`accepted: ${JSON.stringify(info)}`);
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    return error;
  }
}

async function expectRefused(bytes: Uint8Array, code: ErrorCode, detail?: RegExp): Promise<void> {
  const error = await refusal(bytes);
  expect(error.code).toBe(code);
  if (detail) expect(error.message).toMatch(detail);
}

function pngChunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([head, body, crc]);
}

const PNG_SIGNATURE = Buffer.from('89504e470d0a1a0a', 'hex');

/** A PNG header declaring width x height, with (optionally) a little data and an end. */
function pngDeclaring(width: number, height: number, complete: boolean): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // truecolour
  const parts = [PNG_SIGNATURE, pngChunk('IHDR', ihdr)];
  if (complete) {
    parts.push(pngChunk('IDAT', deflateSync(Buffer.alloc(4096))), pngChunk('IEND', Buffer.alloc(0)));
  }
  return Buffer.concat(parts);
}

function solid(width: number, height: number): Sharp {
  return sharp({ create: { width, height, channels: 3, background: { r: 200, g: 40, b: 90 } } });
}

const formats: ImageFormat[] = ['jpeg', 'png', 'webp', 'gif', 'avif'];
const fixtures = {} as Record<ImageFormat, Buffer>;

beforeAll(async () => {
  for (const format of formats) fixtures[format] = await solid(12, 7).toFormat(format).toBuffer();
});

describe('inspectImage: the accepted formats, detected from the bytes', () => {
  it.each([
    ['jpeg', 'image/jpeg', 'jpg'],
    ['png', 'image/png', 'png'],
    ['webp', 'image/webp', 'webp'],
    ['gif', 'image/gif', 'gif'],
    ['avif', 'image/avif', 'avif'],
  ] as const)('accepts %s and reports its type and size', async (format, mime, ext) => {
    const bytes = fixtures[format];
    expect(sniffImageFormat(bytes)).toBe(format);
    expect(await inspectImage(bytes)).toEqual({ format, mime, ext, width: 12, height: 7 });
  });

  it('accepts the usual variants of each format (progressive, interlaced, palette, lossless, alpha, metadata)', async () => {
    const noisy = (channels: 3 | 4): Sharp =>
      sharp({
        create: {
          width: 320,
          height: 200,
          channels,
          background: { r: 10, g: 120, b: 200, alpha: 0.5 },
          noise: { type: 'gaussian', mean: 128, sigma: 40 },
        },
      });
    const variants: [ImageFormat, Buffer][] = [
      ['jpeg', await noisy(3).jpeg({ progressive: true }).toBuffer()],
      [
        'jpeg',
        await noisy(3)
          .jpeg()
          .withMetadata()
          .withExif({ IFD0: { Copyright: 'test' } })
          .toBuffer(),
      ],
      ['png', await noisy(4).png({ progressive: true }).toBuffer()],
      ['png', await noisy(3).png({ palette: true }).toBuffer()],
      ['webp', await noisy(3).webp({ lossless: true }).toBuffer()],
      ['webp', await noisy(4).webp().toBuffer()],
      ['gif', await noisy(3).gif().toBuffer()],
      ['avif', await noisy(4).avif({ effort: 0 }).toBuffer()],
    ];
    for (const [format, bytes] of variants) {
      expect(await inspectImage(bytes), format).toMatchObject({ format, width: 320, height: 200 });
    }
    // Bytes after the end marker (some cameras and tools append them) do not make a file truncated.
    const trailing = Buffer.concat([fixtures.jpeg, Buffer.from('trailer')]);
    expect(await inspectImage(trailing)).toMatchObject({ format: 'jpeg' });
    expect(await inspectImage(Buffer.concat([fixtures.png, Buffer.alloc(8)]))).toMatchObject({
      format: 'png',
    });
  });

  it('accepts an animated GIF and an animated WebP (the size of one frame)', async () => {
    const frames = [await solid(10, 30).png().toBuffer(), await solid(10, 30).negate().png().toBuffer()];
    for (const format of ['gif', 'webp'] as const) {
      const animated = await sharp(frames, { join: { animated: true } })
        .toFormat(format)
        .toBuffer();
      expect((await sharp(animated).metadata()).pages, format).toBe(2);
      expect(await inspectImage(animated)).toMatchObject({ format, width: 10, height: 30 });
    }
  });

  it('reports the size as displayed: EXIF orientation applied', async () => {
    const rotated = await solid(30, 20).jpeg().withMetadata({ orientation: 6 }).toBuffer();
    expect(await inspectImage(rotated)).toMatchObject({ format: 'jpeg', width: 20, height: 30 });
  });

  it('accepts exactly 8000 pixels a side', async () => {
    const wide = await solid(8000, 1).png().toBuffer();
    expect(await inspectImage(wide)).toMatchObject({ width: 8000, height: 1 });
  });

  it('accepts a Uint8Array that is a view into a larger buffer', async () => {
    const png = fixtures.png;
    const larger = new Uint8Array(png.length + 20);
    larger.set(png, 10);
    expect(await inspectImage(larger.subarray(10, 10 + png.length))).toMatchObject({ format: 'png' });
  });
});

describe('inspectImage: what is refused as unsupported_image (415)', () => {
  const svg =
    '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>';

  it('refuses SVG, however it is dressed up (declaration, BOM, whitespace)', async () => {
    for (const text of [
      svg,
      `<?xml version="1.0" encoding="UTF-8"?>\n${svg}`,
      `\ufeff  \n${svg}`,
      `<!-- made by hand -->${svg}`,
    ]) {
      await expectRefused(Buffer.from(text, 'utf8'), 'unsupported_image', /SVG|markup/);
    }
  });

  it('refuses HTML whatever it would be called (a .png name or image/png header is never consulted)', async () => {
    await expectRefused(
      Buffer.from('<!DOCTYPE html><html><body>hi</body></html>'),
      'unsupported_image',
      /HTML/,
    );
    await expectRefused(Buffer.from('<html><img src=x onerror=alert(1)></html>'), 'unsupported_image');
  });

  it('refuses HTML or SVG behind a PNG or JPEG signature', async () => {
    const html = Buffer.from('<!DOCTYPE html><html><script>alert(1)</script></html>');
    await expectRefused(Buffer.concat([PNG_SIGNATURE, html]), 'unsupported_image');
    await expectRefused(
      Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.from(svg)]),
      'unsupported_image',
    );
  });

  it('refuses other image formats (TIFF, HEIC, raw bytes) and an empty file', async () => {
    await expectRefused(await solid(4, 4).tiff().toBuffer(), 'unsupported_image');
    const heic = Buffer.alloc(64);
    heic.writeUInt32BE(24, 0);
    heic.write('ftypheic', 4, 'latin1');
    heic.write('mif1heic', 16, 'latin1');
    await expectRefused(heic, 'unsupported_image', /HEIC/);
    await expectRefused(Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), 'unsupported_image');
    await expectRefused(new Uint8Array(0), 'unsupported_image', /empty/);
  });

  it('refuses a file whose signature is one format and whose content is another', async () => {
    const png = fixtures.png;
    const lying = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff]), png.subarray(3)]);
    await expectRefused(lying, 'unsupported_image');
  });

  it.each(formats)('refuses every truncated %s (each prefix of a real file)', async (format) => {
    const bytes = fixtures[format];
    for (let length = 0; length < bytes.length; length++) {
      const error = await refusal(bytes.subarray(0, length));
      expect(error.code, `${format} cut to ${length} of ${bytes.length} bytes`).toBe('unsupported_image');
    }
  });

  it('names no internal detail (no libvips message) in the refusal', async () => {
    const error = await refusal(fixtures.jpeg.subarray(0, 40));
    expect(error.message).not.toMatch(/vips|sharp|corrupt header/i);
  });
});

describe('inspectImage: what is refused as image_too_large (413)', () => {
  it('refuses more than 10 MiB before reading it', async () => {
    const big = Buffer.alloc(MAX_IMAGE_BYTES + 1);
    fixtures.png.copy(big);
    await expectRefused(big, 'image_too_large', /10 MiB/);
  });

  it('refuses 8001 pixels on either side', async () => {
    await expectRefused(await solid(8001, 1).png().toBuffer(), 'image_too_large', /8001 x 1/);
    await expectRefused(await solid(1, 8001).jpeg().toBuffer(), 'image_too_large', /1 x 8001/);
  });

  it('refuses a tiny PNG declaring 100000 x 100000 as too large, without decoding it', async () => {
    for (const bomb of [pngDeclaring(100_000, 100_000, false), pngDeclaring(100_000, 100_000, true)]) {
      expect(bomb.length).toBeLessThan(200);
      const started = performance.now();
      await expectRefused(bomb, 'image_too_large', /100000 x 100000/);
      expect(performance.now() - started).toBeLessThan(1_000);
    }
  });

  it('refuses a JPEG, GIF, WebP and AVIF whose header declares a huge size', async () => {
    const jpeg = Buffer.from(fixtures.jpeg);
    const sof = jpeg.indexOf(Buffer.from([0xff, 0xc0]));
    jpeg.writeUInt16BE(65_000, sof + 5);
    jpeg.writeUInt16BE(65_000, sof + 7);
    await expectRefused(jpeg, 'image_too_large');

    const gif = Buffer.from(fixtures.gif);
    gif.writeUInt16LE(65_000, 6);
    gif.writeUInt16LE(65_000, 8);
    await expectRefused(gif, 'image_too_large');

    // A WebP extended header (VP8X) declaring a 16384 x 16384 canvas, and nothing else.
    const webp = Buffer.alloc(30);
    webp.write('RIFF', 0, 'latin1');
    webp.writeUInt32LE(22, 4);
    webp.write('WEBPVP8X', 8, 'latin1');
    webp.writeUInt32LE(10, 16);
    webp.writeUIntLE(16_383, 24, 3);
    webp.writeUIntLE(16_383, 27, 3);
    await expectRefused(webp, 'image_too_large', /16384 x 16384/);

    const avif = Buffer.from(fixtures.avif);
    const ispe = avif.indexOf(Buffer.from('ispe', 'latin1'));
    expect(ispe).toBeGreaterThan(0);
    avif.writeUInt32BE(100_000, ispe + 8);
    avif.writeUInt32BE(100_000, ispe + 12);
    await expectRefused(avif, 'image_too_large');
    await expectRefused(avif.subarray(0, ispe + 16), 'image_too_large');
  });

  it('refuses a bomb that a plain metadata read would not even recognise as one', async () => {
    // libvips cannot open this header-only PNG ("corrupt header"), which on its own would be a 415:
    // the declared size is checked first, so it is the 413 it deserves.
    const headerOnly = pngDeclaring(100_000, 100_000, false);
    await expect(sharp(headerOnly).metadata()).rejects.toThrow();
    await expectRefused(headerOnly, 'image_too_large');
  });
});
