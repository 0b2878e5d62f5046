import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installErrorHandling } from '../../apps/server/http/errors.ts';
import { mediaRoutes } from '../../apps/server/media-routes.ts';
import { createDirectoryMediaStore, MEDIA_KEY, type MediaStore } from '../../infra/media/store.ts';

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

let dir: string;
let store: MediaStore;
let png: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'media-store-'));
  store = createDirectoryMediaStore(dir);
  png = await sharp({ create: { width: 5, height: 4, channels: 3, background: '#0a0' } })
    .png()
    .toBuffer();
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the directory media store', () => {
  it('stores bytes under their SHA-256 and returns the /media URL', async () => {
    const stored = await store.put(png, 'png', 'image/png');
    const sha = sha256(png);
    expect(stored).toEqual({ key: `${sha}.png`, url: `/media/${sha}.png` });
    expect(MEDIA_KEY.test(stored.key)).toBe(true);
    expect(await readFile(path.join(dir, sha.slice(0, 2), `${sha}.png`))).toEqual(png);

    const object = await store.get(stored.key);
    expect(object).not.toBeNull();
    expect(object?.mime).toBe('image/png');
    expect(object?.size).toBe(png.length);
    expect(object?.sha256).toBe(sha);
    expect(await readAll(object?.stream as Readable)).toEqual(png);
  });

  it('is idempotent: the same bytes, stored twice or concurrently, are one file', async () => {
    const bytes = Buffer.concat([png, Buffer.from('x')]);
    const results = await Promise.all(Array.from({ length: 8 }, () => store.put(bytes, 'png', 'image/png')));
    expect(new Set(results.map((r) => r.key)).size).toBe(1);
    const folder = path.join(dir, sha256(bytes).slice(0, 2));
    const files = await readdir(folder);
    expect(files.filter((f) => f.startsWith(sha256(bytes)))).toHaveLength(1);
    expect(files.filter((f) => f.startsWith('.tmp-'))).toEqual([]);
    expect(await store.put(bytes, 'png', 'image/png')).toEqual(results[0]);
  });

  it('writes atomically: a temporary file renamed into place, none left behind', async () => {
    const bytes = Buffer.alloc(256 * 1024, 7);
    const { key } = await store.put(bytes, 'jpg', 'image/jpeg');
    const folder = path.join(dir, key.slice(0, 2));
    expect((await readdir(folder)).some((f) => f.startsWith('.tmp-'))).toBe(false);
    expect(await readAll((await store.get(key))?.stream as Readable)).toEqual(bytes);
  });

  it('answers null for unknown keys and for anything that is not a key', async () => {
    expect(await store.get(`${'0'.repeat(64)}.png`)).toBeNull();
    const { key } = await store.put(png, 'png', 'image/png');
    for (const bad of [
      key.replace('.png', '.gif'), // the hash exists, not with that extension
      key.toUpperCase(),
      `../${key}`,
      `${key.slice(0, 2)}/${key}`,
      `${key}/`,
      `${key.slice(0, 64)}.svg`,
      `${key.slice(0, 64)}.png.html`,
      '../../etc/passwd',
      '',
    ]) {
      expect(await store.get(bad), bad).toBeNull();
    }
  });

  it('refuses to store a type it does not serve', async () => {
    await expect(store.put(png, 'svg', 'image/svg+xml')).rejects.toThrow(/unsupported type/);
    await expect(store.put(png, 'png', 'text/html')).rejects.toThrow(/unsupported type/);
  });
});

describe('listing and removing (for the media collector)', () => {
  it('lists stored images and leftovers of interrupted writes, and removes only what is old enough', async () => {
    const own = await mkdtemp(path.join(tmpdir(), 'media-store-gc-'));
    try {
      const gc = createDirectoryMediaStore(own);
      const { key } = await gc.put(png, 'png', 'image/png');
      const folder = path.join(own, key.slice(0, 2));
      const leftover = `.tmp-${key}-0123456789ab`;
      await writeFile(path.join(folder, leftover), 'partial');
      await writeFile(path.join(folder, 'notes.txt'), 'not the store’s');
      const longAgo = new Date('2020-01-01T00:00:00Z');
      await utimes(path.join(folder, leftover), longAgo, longAgo);
      await utimes(path.join(folder, key), longAgo, longAgo);

      const listed = [];
      for await (const entry of gc.list()) listed.push(entry);
      expect(listed.map((e) => [e.key, e.stored, e.storedAt.getTime()]).sort()).toEqual(
        [
          [key, true, longAgo.getTime()],
          [leftover, false, longAgo.getTime()],
        ].sort(),
      );

      // Storing the same bytes again renews the file: then it is too young to remove.
      await gc.put(png, 'png', 'image/png');
      expect(await gc.remove(key, new Date(Date.now() - 60_000))).toBe(false);
      expect(await readdir(folder)).toContain(key);
      await utimes(path.join(folder, key), longAgo, longAgo);
      expect(await gc.remove(key, new Date('2021-01-01T00:00:00Z'))).toBe(true);
      expect(await gc.remove(key, new Date())).toBe(false); // gone already: another collector's turn
      expect(await gc.remove(leftover, new Date('2021-01-01T00:00:00Z'))).toBe(true);
      // Nothing but keys and leftovers is ever removed.
      for (const name of ['notes.txt', '../notes.txt', `${key.slice(0, 2)}/notes.txt`, '.tmp-x']) {
        expect(await gc.remove(name, new Date())).toBe(false);
      }
      expect((await readdir(folder)).sort()).toEqual(['notes.txt']);
      // Stored again after removal, it is written anew.
      await gc.put(png, 'png', 'image/png');
      expect(await readFile(path.join(folder, key))).toEqual(png);
    } finally {
      await rm(own, { recursive: true, force: true });
    }
  });
});

describe('GET /media/:name', () => {
  let app: FastifyInstance;
  let key: string;

  beforeAll(async () => {
    app = Fastify({ logger: false });
    app.setValidatorCompiler(validatorCompiler);
    app.setSerializerCompiler(serializerCompiler);
    installErrorHandling(app);
    await app.register(mediaRoutes, { store });
    await app.ready();
    ({ key } = await store.put(png, 'png', 'image/png'));
  });

  afterAll(async () => {
    await app.close();
  });

  it('serves the bytes with their type, immutable caching, nosniff and an ETag', async () => {
    const response = await app.inject({ method: 'GET', url: `/media/${key}` });
    expect(response.statusCode).toBe(200);
    expect(response.rawPayload).toEqual(png);
    expect(response.headers['content-type']).toBe('image/png');
    expect(response.headers['content-length']).toBe(String(png.length));
    expect(response.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(response.headers['x-content-type-options']).toBe('nosniff');
    expect(response.headers.etag).toBe(`"${key.slice(0, 64)}"`);
  });

  it('answers 304 to If-None-Match with the ETag', async () => {
    const etag = `"${key.slice(0, 64)}"`;
    const response = await app.inject({
      method: 'GET',
      url: `/media/${key}`,
      headers: { 'if-none-match': `"other", ${etag}` },
    });
    expect(response.statusCode).toBe(304);
    expect(response.rawPayload.length).toBe(0);
    expect(response.headers.etag).toBe(etag);
  });

  it('answers HEAD with the headers and no body', async () => {
    const response = await app.inject({ method: 'HEAD', url: `/media/${key}` });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('image/png');
    expect(response.rawPayload.length).toBe(0);
  });

  it('answers problem+json 404 for unknown names, bad names and traversal attempts', async () => {
    // A file that exists in the store's folder but is not a key is never served.
    await writeFile(path.join(dir, 'secret.txt'), 'TOP-SECRET-CONTENT');
    for (const name of [
      `${'f'.repeat(64)}.png`,
      `${key.slice(0, 64)}.webp`,
      key.toUpperCase(),
      'secret.txt',
      '..%2fsecret.txt',
      '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
      `${key.slice(0, 2)}%2f${key}`,
      `${key}%00.png`,
      `${key.slice(0, 64)}.svg`,
    ]) {
      const response = await app.inject({ method: 'GET', url: `/media/${name}` });
      expect(response.statusCode, name).toBe(404);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(response.json()).toMatchObject({ status: 404, code: 'not_found' });
      expect(response.body).not.toContain('TOP-SECRET-CONTENT');
    }
    const traversal = await app.inject({ method: 'GET', url: '/media/../secret.txt' });
    expect(traversal.statusCode).toBe(404);
    expect(traversal.body).not.toContain('TOP-SECRET-CONTENT');
  });
});
