import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Counter, createCounter, requestsPolicy } from '../../infra/limits.ts';
import { closeRedis, openRedis, waitForRedis } from '../../infra/redis.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

const REDIS_URL = TEST_REDIS_URL;

type Line = { level: string; msg: string };
type Log = (obj: object, msg: string) => void;
function recordingLogger(): { logger: { info: Log; warn: Log; debug: Log }; lines: Line[] } {
  const lines: Line[] = [];
  const at =
    (level: string): Log =>
    (_obj, msg) =>
      lines.push({ level, msg });
  return { lines, logger: { info: at('info'), warn: at('warn'), debug: at('debug') } };
}

/**
 * A TCP proxy in front of the test Redis that a test can take down (connections cut, new ones
 * refused), bring back on the same port, or stall (bytes held, connections kept open: a Redis that
 * does not answer).
 */
function redisProxy(target: URL) {
  let server: Server | null = null;
  let port = 0;
  let stalled = false;
  const pairs = new Set<{ client: Socket; upstream: Socket; held: Buffer[] }>();
  const listen = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const s = createServer((client) => {
        const upstream = connect(Number(target.port || 6379), target.hostname);
        const pair = { client, upstream, held: [] as Buffer[] };
        pairs.add(pair);
        client.on('data', (chunk: Buffer) => (stalled ? pair.held.push(chunk) : upstream.write(chunk)));
        upstream.on('data', (chunk: Buffer) => client.write(chunk));
        const end = (): void => {
          pairs.delete(pair);
          client.destroy();
          upstream.destroy();
        };
        client.on('close', end).on('error', end);
        upstream.on('close', end).on('error', end);
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        const address = s.address();
        if (address !== null && typeof address !== 'string') port = address.port;
        server = s;
        resolve();
      });
    });
  return {
    url: (): string => `redis://127.0.0.1:${port}`,
    up: listen,
    async down(): Promise<void> {
      const s = server;
      server = null;
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
    stall(): void {
      stalled = true;
    },
    resume(): void {
      stalled = false;
      for (const pair of pairs) for (const chunk of pair.held.splice(0)) pair.upstream.write(chunk);
    },
  };
}

describe('limits shared through Redis', () => {
  const prefix = `cs:test:${randomBytes(4).toString('hex')}`;
  const proxy = redisProxy(new URL(REDIS_URL));
  const clients: Redis[] = [];
  let direct: Redis;
  const open = async (url: string, logger = recordingLogger().logger): Promise<Redis> => {
    const redis = openRedis(url, { logger });
    clients.push(redis);
    await waitForRedis(redis, 5_000);
    return redis;
  };

  beforeAll(async () => {
    await proxy.up();
    direct = await open(REDIS_URL);
  });
  afterAll(async () => {
    const keys = await direct.keys(`${prefix}:*`);
    if (keys.length > 0) await direct.del(...keys);
    for (const redis of clients) await closeRedis(redis);
    await proxy.down();
  });

  const consumeAll = async (counter: Counter, subject: string, n: number): Promise<boolean[]> => {
    const out: boolean[] = [];
    for (let i = 0; i < n; i++) out.push((await counter.consume(subject)).allowed);
    return out;
  };

  it('two processes (two clients, two counters) share one budget per subject', async () => {
    const logger = recordingLogger().logger;
    const one = createCounter(requestsPolicy(5), { redis: await open(REDIS_URL), keyPrefix: prefix, logger });
    const two = createCounter(requestsPolicy(5), { redis: await open(REDIS_URL), keyPrefix: prefix, logger });
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) seen.push((await (i % 2 === 0 ? one : two).consume('acct:shared')).remaining);
    expect(seen).toEqual([4, 3, 2, 1, 0]);
    expect((await one.consume('acct:shared')).allowed).toBe(false);
    expect((await two.consume('acct:shared')).allowed).toBe(false);
    expect((await two.consume('acct:other')).remaining).toBe(4);
    expect(Number(await direct.get(`${prefix}:requests:acct:shared`))).toBe(7);
    expect(await direct.pttl(`${prefix}:requests:acct:shared`)).toBeGreaterThan(0);
  });

  it('once Redis refuses a subject, its counter refuses it until the window ends without asking Redis again', async () => {
    const logger = recordingLogger().logger;
    const redis = await open(REDIS_URL);
    const policy = { name: 'requests', quota: 2, window: 2 } as const;
    const one = createCounter(policy, { redis, keyPrefix: prefix, logger });
    const two = createCounter(policy, { redis, keyPrefix: prefix, logger });
    expect(await consumeAll(one, 'acct:flood', 3)).toEqual([true, true, false]);
    expect(await consumeAll(one, 'acct:flood', 50)).toEqual(Array(50).fill(false));
    const refusedAgain = await one.consume('acct:flood');
    expect(refusedAgain).toMatchObject({ allowed: false, remaining: 0 });
    expect(refusedAgain.resetSeconds).toBeGreaterThanOrEqual(1);
    expect(refusedAgain.resetSeconds).toBeLessThanOrEqual(2);
    // One refusal reached Redis; the other process still asks it (and is refused by it).
    expect(Number(await direct.get(`${prefix}:requests:acct:flood`))).toBe(3);
    expect((await two.consume('acct:flood')).allowed).toBe(false);
    expect(Number(await direct.get(`${prefix}:requests:acct:flood`))).toBe(4);
    // Another subject is not held by it.
    expect((await one.consume('acct:calm')).allowed).toBe(true);
    // The window ends: the subject is counted in Redis again, from a fresh window.
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    expect(await one.consume('acct:flood')).toMatchObject({ allowed: true, remaining: 1 });
  });

  it('when Redis goes away it counts in memory (failing open, logged once), and goes back to Redis when it returns', async () => {
    const { logger, lines } = recordingLogger();
    const redis = await open(proxy.url(), logger);
    const counter = createCounter(requestsPolicy(3), {
      redis,
      keyPrefix: prefix,
      logger,
      retryRedisAfterMs: 0,
    });
    expect(await counter.consume('acct:outage')).toMatchObject({ allowed: true, remaining: 2 });

    await proxy.down();
    // Every request is answered; the quota still holds, counted in this process from zero.
    expect(await consumeAll(counter, 'acct:outage', 4)).toEqual([true, true, true, false]);
    const warnings = lines.filter((l) => l.level === 'warn' && l.msg.startsWith('Redis unavailable'));
    expect(warnings).toHaveLength(1);

    await proxy.up();
    expect(await waitForRedis(redis, 10_000)).toBe(true);
    // Redis still holds the one request counted before the outage.
    expect(await counter.consume('acct:outage')).toMatchObject({ allowed: true, remaining: 1 });
    expect(Number(await direct.get(`${prefix}:requests:acct:outage`))).toBe(2);
    expect(lines.map((l) => l.msg)).toContain(
      'Redis answers again: limits are shared by every process again',
    );
  });

  it('when Redis does not answer, a request waits at most the timeout and is counted in memory', async () => {
    const { logger, lines } = recordingLogger();
    const redis = await open(proxy.url(), logger);
    const counter = createCounter(requestsPolicy(3), {
      redis,
      keyPrefix: prefix,
      logger,
      redisTimeoutMs: 50,
      retryRedisAfterMs: 60_000,
    });
    expect(await counter.consume('acct:slow')).toMatchObject({ allowed: true, remaining: 2 });
    proxy.stall();
    try {
      // Counted in memory: this process has seen none of acct:slow's requests yet.
      expect(await counter.consume('acct:slow')).toMatchObject({ allowed: true, remaining: 2 });
      expect(lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([
        'Redis unavailable: limits are counted in each process until it answers again (failing open)',
      ]);
      // Within retryRedisAfterMs, Redis is not asked again: memory straight away.
      expect(await counter.consume('acct:slow')).toMatchObject({ allowed: true, remaining: 1 });
    } finally {
      proxy.resume();
    }
  });
});
