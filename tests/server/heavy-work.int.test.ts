import { connect } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installErrorHandling } from '../../apps/server/http/errors.ts';
import {
  createHeavyWork,
  HEAVY_BODY_BYTES,
  HEAVY_BUSY_DETAIL,
  installHeavyWork,
} from '../../apps/server/http/heavy-work.ts';

/*
 * Heavy requests (a body of HEAVY_BODY_BYTES or more) run one at a time per process, a bounded number
 * wait for their turn, the rest are a 503 with Retry-After; light requests never wait for them.
 */

const large = 'x'.repeat(HEAVY_BODY_BYTES);

describe('heavy requests one at a time', () => {
  let app: FastifyInstance;
  let base: string;
  const running = new Set<string>();
  let most = 0;
  const releases = new Map<string, () => void>();
  const started: string[] = [];
  /** The requests that reached the hook just before heavy work's own: each then asks for its turn. */
  const asking: string[] = [];

  beforeAll(async () => {
    app = Fastify();
    installErrorHandling(app);
    app.addHook('preValidation', async (request) => {
      asking.push((request.params as { name: string }).name);
    });
    installHeavyWork(app, createHeavyWork({ atOnce: 1, waiting: 1, waitMs: 60_000 }));
    app.addContentTypeParser(
      'text/plain',
      { parseAs: 'string', bodyLimit: 2 * HEAVY_BODY_BYTES },
      (_r, b, done) => done(null, b),
    );
    // Each request runs until the test releases it by name.
    app.post('/work/:name', async (request) => {
      const { name } = request.params as { name: string };
      running.add(name);
      most = Math.max(most, running.size);
      started.push(name);
      await new Promise<void>((resolve) => releases.set(name, resolve));
      running.delete(name);
      return { name };
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => app.close());

  const post = (name: string, body: string) =>
    fetch(`${base}/work/${name}`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body });
  const until = async (condition: () => boolean): Promise<void> => {
    while (!condition()) await new Promise((r) => setImmediate(r));
  };

  it('lets one heavy request run, keeps one waiting, refuses a third with 503 and Retry-After, and lets light ones through', async () => {
    const first = post('first', large);
    await until(() => started.includes('first'));
    const second = post('second', large);
    // The second waits for its turn: the third finds the queue full.
    const third = await (async () => {
      for (;;) {
        const res = await post('third', large);
        if (res.status === 503) return res;
        // Only possible if it came before the second queued: release it and try again.
        await until(() => releases.has('third'));
        releases.get('third')?.();
        releases.delete('third');
      }
    })();
    expect(third.headers.get('retry-after')).toBe('1');
    expect(((await third.json()) as { code: string; detail: string }).detail).toBe(HEAVY_BUSY_DETAIL);

    // A light request runs beside the heavy one.
    const light = post('light', 'small');
    await until(() => started.includes('light'));
    releases.get('light')?.();
    expect((await light).status).toBe(200);
    expect(started).not.toContain('second');

    releases.get('first')?.();
    expect((await first).status).toBe(200);
    await until(() => started.includes('second'));
    releases.get('second')?.();
    expect((await second).status).toBe(200);
    // Never two heavy ones at once (the light one may run beside one).
    expect(most).toBeLessThanOrEqual(2);
  });

  it('lets a request that holds its turn ask again (a heavy body, then a heavy page) without waiting for itself', async () => {
    const solo = Fastify();
    const heavy = createHeavyWork({ atOnce: 1, waiting: 0, waitMs: 60_000 });
    solo.get('/twice', async (request, reply) => {
      await heavy.admit(request, reply);
      await heavy.admit(request, reply);
      return { ok: true };
    });
    try {
      expect((await solo.inject({ method: 'GET', url: '/twice' })).json()).toEqual({ ok: true });
      // The turn was given back once: the next request gets it.
      expect((await solo.inject({ method: 'GET', url: '/twice' })).statusCode).toBe(200);
    } finally {
      await solo.close();
    }
  });

  it('keeps the turn of a request whose client left until its handler has answered, then gives it on', async () => {
    const socket = connect(Number(new URL(base).port), '127.0.0.1');
    socket.on('error', () => {});
    socket.write(
      `POST /work/gone HTTP/1.1\r\nhost: x\r\ncontent-type: text/plain\r\ncontent-length: ${large.length}\r\n\r\n${large}`,
    );
    await until(() => started.includes('gone'));
    socket.destroy();
    const next = post('next', large);
    // The client is gone but its work goes on: the next heavy request asks for its turn and waits.
    // (Given the turn, its handler would start within the same turn of the event loop.)
    await until(() => asking.includes('next'));
    await new Promise((r) => setImmediate(r));
    expect(started).not.toContain('next');
    releases.get('gone')?.();
    await until(() => started.includes('next'));
    releases.get('next')?.();
    expect((await next).status).toBe(200);
  });
});
