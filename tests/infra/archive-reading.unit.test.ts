import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linesOf } from '../../infra/archive/lines.ts';
import { readTar, TAIL_MAX } from '../../infra/archive/tar.ts';
import { tarOf } from '../support/archive.ts';

/*
 * How an import reads an archive (infra/archive/lines.ts, tar.ts): an NDJSON part's lines whatever
 * chunks they come in (a character cut by a chunk's end included), a line over the bound refused as
 * soon as it is, and a gzip stream that expands past what the tar declares refused as soon as it does.
 */

async function* chunked(bytes: Buffer, cuts: readonly number[]): AsyncGenerator<Buffer> {
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (cut <= at) continue;
    yield bytes.subarray(at, cut);
    at = cut;
  }
}

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** A small deterministic generator (mulberry32), so that a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('linesOf', () => {
  it('gives the same lines however the bytes are cut, multi-byte characters across cuts included', async () => {
    const words = ['plain', 'é', '€uro', '𝄞 clef', '"quoted"', '', 'ça va'];
    for (let seed = 1; seed <= 200; seed++) {
      const next = random(seed);
      const lines = Array.from({ length: 1 + Math.floor(next() * 8) }, () =>
        Array.from({ length: Math.floor(next() * 6) }, () => words[Math.floor(next() * words.length)]).join(
          ' ',
        ),
      );
      const bytes = Buffer.from(lines.map((l) => `${l}\n`).join(''), 'utf8');
      const cuts = Array.from({ length: Math.floor(next() * 10) }, () =>
        Math.floor(next() * bytes.length),
      ).sort((a, b) => a - b);
      const got = await all(linesOf(chunked(bytes, cuts), 'events/000001.ndjson'));
      expect(
        got.map((l) => l.text),
        `seed ${seed}`,
      ).toEqual(lines);
      expect(got.map((l) => l.n)).toEqual(lines.map((_, i) => i + 1));
      expect(got.map((l) => l.bytes)).toEqual(lines.map((l) => Buffer.byteLength(l)));
    }
  });

  it('refuses a line over the bound as soon as its bytes pass it, naming the part and the line', async () => {
    let given = 0;
    async function* endless(): AsyncGenerator<Buffer> {
      yield Buffer.from('{"a":1}\n{"b":"');
      for (;;) {
        given += 1;
        yield Buffer.alloc(1024, 0x61);
      }
    }
    await expect(all(linesOf(endless(), 'tables/credentials/000001.ndjson', 10_000))).rejects.toThrow(
      /^tables\/credentials\/000001\.ndjson line 2 is longer than 10000 bytes/,
    );
    expect(given).toBeLessThanOrEqual(10);
  });

  it('refuses a line that is not UTF-8, and a last line without its line feed', async () => {
    await expect(
      all(linesOf(chunked(Buffer.from([0x7b, 0xff, 0x7d, 0x0a]), []), 'events/000002.ndjson')),
    ).rejects.toThrow(/^events\/000002\.ndjson line 1 is not UTF-8 text/);
    await expect(all(linesOf(chunked(Buffer.from('{}\n{'), []), 'events/000001.ndjson'))).rejects.toThrow(
      /does not end with a whole line/,
    );
  });
});

describe('readTar', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-tar-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const tar = tarOf([{ path: 'events/000001.ndjson', bytes: Buffer.from('{}\n') }]);

  async function entries(file: string, maxBytes?: number): Promise<string[]> {
    const out: string[] = [];
    for await (const entry of readTar(file, maxBytes === undefined ? {} : { maxBytes })) {
      for await (const _ of entry.body()) void _;
      out.push(entry.path);
    }
    return out;
  }

  it("takes a record's padding after the tar's end, and refuses more zeros than that", async () => {
    const padded = join(dir, 'padded.tar.gz');
    await writeFile(padded, gzipSync(Buffer.concat([tar, Buffer.alloc(10240 - tar.length)])));
    expect(await entries(padded)).toEqual(['events/000001.ndjson']);
    const bomb = join(dir, 'bomb.tar.gz');
    await writeFile(bomb, gzipSync(Buffer.concat([tar, Buffer.alloc(TAIL_MAX + 64 * 1024 * 1024)])));
    await expect(entries(bomb)).rejects.toThrow(/zero bytes follow the end of its tar/);
  });

  it('stops a gzip stream as soon as it expands past the bytes it may hold', async () => {
    const file = join(dir, 'bound.tar.gz');
    await writeFile(file, gzipSync(tar));
    expect(await entries(file, tar.length)).toEqual(['events/000001.ndjson']);
    await expect(entries(file, tar.length - 512)).rejects.toThrow(/expands past the \d+ bytes/);
  });
});
