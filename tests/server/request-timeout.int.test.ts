import { connect } from 'node:net';
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientErrorHandler } from '../../apps/server/http/errors.ts';
import { requestArrivalOptions } from '../../apps/server/http/request-timeout.ts';

/*
 * The bound on a request's arrival (REQUEST_BODY_TIMEOUT_SECONDS, 1 s here) is on the request only:
 * an answer that takes longer than the bound to be written (a stream, a slow download) or to start (a
 * slow handler) is never cut. The server is fastify with the app's own options for it (apps/server/app.ts).
 */

/** Sends `request` whole on a new connection and reads until `done(text)` holds or the connection closes. */
function exchange(port: number, request: string, done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (done(text)) {
        socket.end();
        resolve(text);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

describe('the bound on a request arriving, never on its answer', () => {
  let app: FastifyInstance;
  let port: number;
  beforeAll(async () => {
    app = Fastify({ clientErrorHandler, ...requestArrivalOptions(1) });
    // An answer written over 3 s: a chunk every 250 ms.
    app.get('/stream', async (_request, reply) => {
      let n = 0;
      const body = new Readable({
        read() {
          setTimeout(() => this.push(n++ < 12 ? `chunk ${n}\n` : null), 250);
        },
      });
      return reply.type('text/plain').send(body);
    });
    // A body that arrives at once, answered after 2.5 s.
    app.post('/slow', async (request) => {
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      return { got: request.body, done: true };
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    port = typeof address === 'object' && address ? address.port : 0;
  });
  afterAll(async () => {
    await app.close();
  });

  it('an answer streamed over three times the bound arrives whole', { timeout: 30_000 }, async () => {
    const text = await exchange(port, 'GET /stream HTTP/1.1\r\nHost: a\r\n\r\n', (t) =>
      t.includes('\r\n0\r\n\r\n'),
    );
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toContain('chunk 12\n');
    expect(text).not.toContain('408');
  });

  it('a request that arrived in time is answered however long its handler takes', {
    timeout: 30_000,
  }, async () => {
    const body = '{"a":1}';
    const text = await exchange(
      port,
      `POST /slow HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      (t) => t.includes('"done":true'),
    );
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toContain('{"got":{"a":1},"done":true}');
  });

  it('a request trickled past the bound is answered 408 and closed', { timeout: 30_000 }, async () => {
    const text = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      const drip = setInterval(() => socket.writable && socket.write('a'), 200);
      socket.on('connect', () =>
        socket.write(
          'POST /slow HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n',
        ),
      );
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString('utf8');
      });
      socket.on('error', () => {});
      socket.on('close', () => {
        clearInterval(drip);
        resolve(received);
      });
    });
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text).toContain('"code":"invalid_request"');
  });
});
