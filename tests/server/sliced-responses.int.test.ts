import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  installSlicedResponses,
  SLICE_BYTES,
  SLICED_FROM,
  slices,
} from '../../apps/server/http/sliced-responses.ts';

// Multi-byte characters (2, 3 and 4 bytes in UTF-8) so that slices cut through characters.
const large = `<p>${'ü日😀 words '.repeat(Math.ceil((SLICED_FROM * 2) / 12))}</p>`;
const small = 'x'.repeat(SLICED_FROM - 1);

describe('sliced responses', () => {
  let app: FastifyInstance;
  let base: string;
  const sentAs: Record<string, string> = {};

  beforeAll(async () => {
    app = Fastify();
    installSlicedResponses(app);
    // Registered after: sees what the slicing hook made of the payload.
    app.addHook('onSend', async (request, _reply, payload) => {
      sentAs[request.url] = payload instanceof Readable ? 'stream' : typeof payload;
      return payload;
    });
    app.get('/large', async (_request, reply) => reply.type('text/html; charset=utf-8').send(large));
    app.get('/large-json', async () => ({ body: large }));
    app.get('/small', async (_request, reply) => reply.type('text/plain').send(small));
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => app.close());

  it('sends a large body as a stream of slices with its exact Content-Length and the same bytes', async () => {
    const res = await fetch(`${base}/large`);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(sentAs['/large']).toBe('stream');
    expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(large)));
    expect(res.headers.get('transfer-encoding')).toBeNull();
    expect(bytes.equals(Buffer.from(large))).toBe(true);

    const json = await fetch(`${base}/large-json`);
    expect(sentAs['/large-json']).toBe('stream');
    expect(((await json.json()) as { body: string }).body).toBe(large);
  });

  it('sends a smaller body as it is', async () => {
    const res = await fetch(`${base}/small`);
    expect(await res.text()).toBe(small);
    expect(sentAs['/small']).toBe('string');
  });

  it('answers HEAD with the headers only', async () => {
    const res = await app.inject({ method: 'HEAD', url: '/large' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('');
  });

  it('cuts a body into views of at most SLICE_BYTES that add up to it', () => {
    const bytes = Buffer.from(large);
    const parts = [...slices(bytes)];
    expect(parts.every((p) => p.length <= SLICE_BYTES)).toBe(true);
    expect(parts.length).toBe(Math.ceil(bytes.length / SLICE_BYTES));
    expect(Buffer.concat(parts).equals(bytes)).toBe(true);
  });
});
