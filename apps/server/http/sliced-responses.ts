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
  // With `done`, not async: every answer passes here (a promise and a microtask turn each otherwise).
  app.addHook('onSend', (request, reply, payload, done) => {
    if (
      request.method === 'HEAD' ||
      (typeof payload === 'string' ? payload.length < SLICED_FROM : !Buffer.isBuffer(payload))
    ) {
      done(null, payload);
      return;
    }
    const bytes = typeof payload === 'string' ? Buffer.from(payload) : (payload as Buffer);
    if (bytes.length < SLICED_FROM) {
      done(null, payload);
      return;
    }
    reply.header('content-length', bytes.length);
    done(null, Readable.from(slices(bytes), { objectMode: false, highWaterMark: SLICE_BYTES }));
  });
}

/** `bytes` as views of at most SLICE_BYTES each (no copy). */
export function* slices(bytes: Buffer): Generator<Buffer> {
  for (let at = 0; at < bytes.length; at += SLICE_BYTES) yield bytes.subarray(at, at + SLICE_BYTES);
}
