import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';

/** A response body at least this long (characters or bytes) is sent in slices. */
export const SLICED_FROM = 256 * 1024;
/** The size of one slice. */
export const SLICE_BYTES = 64 * 1024;

/**
 * Large bodies (a 2 MiB article as JSON, its revision page) leave in slices of SLICE_BYTES, each
 * written once the socket has taken the one before. Written whole, such a body is one long task of
 * the server's thread (encoding and copying megabytes at once) that every other request waits behind;
 * in slices it is many short ones between which the others run. The body is encoded once, its
 * `Content-Length` stays exact, and the bytes are the same.
 */
export function installSlicedResponses(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.method === 'HEAD') return payload;
    if (typeof payload === 'string' ? payload.length < SLICED_FROM : !Buffer.isBuffer(payload))
      return payload;
    const bytes = typeof payload === 'string' ? Buffer.from(payload) : (payload as Buffer);
    if (bytes.length < SLICED_FROM) return payload;
    reply.header('content-length', bytes.length);
    return Readable.from(slices(bytes), { objectMode: false, highWaterMark: SLICE_BYTES });
  });
}

/** `bytes` as views of at most SLICE_BYTES each (no copy). */
export function* slices(bytes: Buffer): Generator<Buffer> {
  for (let at = 0; at < bytes.length; at += SLICE_BYTES) yield bytes.subarray(at, at + SLICE_BYTES);
}
