import Fastify, { type FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { installErrorHandling } from '../../apps/server/http/errors.ts';
import {
  addressKey,
  createRequestLimiter,
  MAX_PAUSED_REFUSALS,
  rateLimitField,
  rateLimitPolicyField,
} from '../../apps/server/http/limits.ts';
import { ConfigError, loadConfig } from '../../infra/config.ts';
import { createCounter, type Decision, editsPolicy, requestsPolicy, windowOf } from '../../infra/limits.ts';
import { PATIENCE } from '../support/wait.ts';

type Logged = { level: 'info' | 'warn'; msg: string; obj: object };
function recordingLogger(): { logger: { info: Log; warn: Log }; lines: Logged[] } {
  const lines: Logged[] = [];
  return {
    lines,
    logger: {
      info: (obj, msg) => lines.push({ level: 'info', msg, obj }),
      warn: (obj, msg) => lines.push({ level: 'warn', msg, obj }),
    },
  };
}
type Log = (obj: object, msg: string) => void;

/**
 * A stand-in for /api/v1: `x-test-account` plays a valid key of that account, `x-test-revoked` a
 * revoked key of that account (it names the account but authenticates no one), nothing a missing key.
 */
async function appWith(
  perMinute: number,
  limiter = createRequestLimiter({ perMinute, logger: recordingLogger().logger }),
): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  installErrorHandling(app);
  app.decorateRequest('auth', null as never);
  app.addHook('onRequest', async (request) => {
    const account = request.headers['x-test-account'];
    const revoked = request.headers['x-test-revoked'];
    const actor = { type: 'api_key' as const, id: 'key_1', name: 'Test' };
    request.auth =
      typeof account === 'string'
        ? {
            principal: { accountId: account, scope: 'read', actor },
            accountId: account,
            actor,
            failure: null,
          }
        : {
            principal: null,
            accountId: typeof revoked === 'string' ? revoked : null,
            actor: null,
            failure: null,
          };
  });
  app.addHook('onRequest', limiter.hook);
  app.get('/things', async () => ({ ok: true }));
  app.addHook('onClose', () => limiter.close());
  return app;
}

describe('RateLimit header fields (draft-ietf-httpapi-ratelimit-headers, structured fields)', () => {
  const requests = requestsPolicy(60);
  const edits = editsPolicy(200);
  const decision = (policy = requests, remaining = 59, resetSeconds = 60): Decision => ({
    policy,
    allowed: true,
    remaining,
    resetSeconds,
  });

  it('states the requests policy and what is left of it', () => {
    expect(rateLimitPolicyField([requests])).toBe('"requests";q=60;w=60');
    expect(rateLimitField([decision()])).toBe('"requests";r=59;t=60');
  });

  it('lists the edits policy beside it, per UTC day', () => {
    expect(rateLimitPolicyField([requests, edits])).toBe('"requests";q=60;w=60, "edits";q=200;w=86400');
    expect(rateLimitField([decision(), decision(edits, 150, 3600)])).toBe(
      '"requests";r=59;t=60, "edits";r=150;t=3600',
    );
  });
});

describe('windows', () => {
  it('a UTC-day window is keyed by the date and ends at the next UTC midnight', () => {
    expect(windowOf(editsPolicy(200), 'acct:a', new Date('2026-11-22T23:59:30.000Z'))).toEqual({
      key: 'acct:a:2026-11-22',
      durationSeconds: 30,
    });
    expect(windowOf(editsPolicy(200), 'acct:a', new Date('2026-11-23T00:00:00.000Z'))).toEqual({
      key: 'acct:a:2026-11-23',
      durationSeconds: 86_400,
    });
  });

  it('a minute window is keyed by the subject alone', () => {
    expect(windowOf(requestsPolicy(60), 'ip:203.0.113.7', new Date())).toEqual({
      key: 'ip:203.0.113.7',
      durationSeconds: 60,
    });
  });

  it('counts edits per UTC day: the quota is back the next day', async () => {
    let now = new Date('2026-11-22T23:59:00.000Z');
    const edits = createCounter(editsPolicy(2), { logger: recordingLogger().logger, now: () => now });
    expect(await edits.consume('acct:a')).toMatchObject({ allowed: true, remaining: 1, resetSeconds: 60 });
    expect(await edits.consume('acct:a')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await edits.consume('acct:a')).toMatchObject({ allowed: false, remaining: 0 });
    expect(await edits.consume('acct:b')).toMatchObject({ allowed: true, remaining: 1 });
    now = new Date('2026-11-23T00:00:01.000Z');
    expect(await edits.consume('acct:a')).toMatchObject({
      allowed: true,
      remaining: 1,
      resetSeconds: 86_399,
    });
  });
});

describe('client addresses', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002::9', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::203.0.113.7', '0:0:0:0::/64'],
    ['not an address', 'not an address'],
  ])('%s spends the budget of %s', (ip, key) => {
    expect(addressKey(ip)).toBe(key);
  });
});

describe('the request limiter in memory (no REDIS_URL)', () => {
  const apps: FastifyInstance[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
  });
  const make = async (perMinute: number): Promise<FastifyInstance> => {
    const app = await appWith(perMinute);
    apps.push(app);
    return app;
  };

  it('lets an account make its quota of requests, each saying what is left, then refuses with 429', async () => {
    const app = await make(5);
    const headers = { 'x-test-account': 'acc_1' };
    for (let left = 4; left >= 0; left--) {
      const ok = await app.inject({ url: '/things', headers });
      expect(ok.statusCode).toBe(200);
      expect(ok.headers['ratelimit-policy']).toBe('"requests";q=5;w=60');
      expect(ok.headers.ratelimit).toMatch(new RegExp(`^"requests";r=${left};t=([1-9]|[1-5][0-9]|60)$`));
      expect(ok.headers['retry-after']).toBeUndefined();
    }
    const refused = await app.inject({ url: '/things', headers });
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['content-type']).toContain('application/problem+json');
    expect(refused.json()).toMatchObject({ status: 429, code: 'rate_limited' });
    expect(refused.json().detail).toMatch(/this account/);
    const retryAfter = Number(refused.headers['retry-after']);
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true);
    expect(refused.headers.ratelimit).toBe(`"requests";r=0;t=${retryAfter}`);
    expect(refused.headers['ratelimit-policy']).toBe('"requests";q=5;w=60');

    const other = await app.inject({ url: '/things', headers: { 'x-test-account': 'acc_2' } });
    expect(other.statusCode).toBe(200);
    expect(other.headers.ratelimit).toMatch(/^"requests";r=4;/);
  });

  it('limits requests without a usable key per client address, a revoked key included', async () => {
    const app = await make(3);
    const from = (remoteAddress: string, headers: Record<string, string> = {}) =>
      app.inject({ url: '/things', remoteAddress, headers });
    expect((await from('198.51.100.1')).statusCode).toBe(200);
    expect((await from('198.51.100.1', { 'x-test-revoked': 'acc_9' })).statusCode).toBe(200);
    expect((await from('::ffff:198.51.100.1')).statusCode).toBe(200);
    const refused = await from('198.51.100.1', { 'x-test-revoked': 'acc_9' });
    expect(refused.statusCode).toBe(429);
    expect(refused.json().detail).toMatch(/this address/);
    // Another address, and the account the revoked key named, keep their budgets.
    expect((await from('198.51.100.2')).headers.ratelimit).toMatch(/^"requests";r=2;/);
    expect((await from('198.51.100.1', { 'x-test-account': 'acc_9' })).headers.ratelimit).toMatch(
      /^"requests";r=2;/,
    );
  });

  it('spends one budget per IPv6 /64', async () => {
    const app = await make(2);
    const from = (remoteAddress: string) => app.inject({ url: '/things', remoteAddress });
    expect((await from('2001:db8:1:2::1')).statusCode).toBe(200);
    expect((await from('2001:db8:1:2::2')).statusCode).toBe(200);
    expect((await from('2001:db8:1:2:ffff::3')).statusCode).toBe(429);
    expect((await from('2001:db8:1:3::1')).statusCode).toBe(200);
  });
});

describe('the pause before a refusal', () => {
  const paused = (refusalPauseMs: number) =>
    createRequestLimiter({ perMinute: 1, refusalPauseMs, logger: recordingLogger().logger });
  const account = { 'x-test-account': 'acc_1' };

  it('answers a refused request after the pause, with Retry-After counted from the answer', async () => {
    const app = await appWith(1, paused(300));
    try {
      expect((await app.inject({ url: '/things', headers: account })).statusCode).toBe(200);
      const started = performance.now();
      const refused = await app.inject({ url: '/things', headers: account });
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
      expect(refused.statusCode).toBe(429);
      const retryAfter = Number(refused.headers['retry-after']);
      // The window's 60 s began with the first request; the pause is spent.
      expect(retryAfter).toBeGreaterThanOrEqual(59);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(refused.headers.ratelimit).toBe(`"requests";r=0;t=${retryAfter}`);
    } finally {
      await app.close();
    }
  });

  /** The limiter's hook, counting the requests that reached it. */
  function counting(limiter: ReturnType<typeof paused>): { limiter: typeof limiter; arrived: () => number } {
    let arrived = 0;
    return {
      limiter: {
        ...limiter,
        hook: (request, reply) => {
          arrived++;
          return limiter.hook(request, reply);
        },
      },
      arrived: () => arrived,
    };
  }

  /**
   * Once `n` requests reached the hook, the next turn of the event loop finds each paused or
   * answered: the in-memory count and the pause take no timer, only promise steps.
   */
  async function untilArrived(arrived: () => number, n: number): Promise<void> {
    await vi.waitFor(() => expect(arrived()).toBe(n), PATIENCE);
    await new Promise((resolve) => setImmediate(resolve));
  }

  it('does not pause an account within its budget while another is paused', async () => {
    const limiter = paused(60_000);
    const { limiter: hooked, arrived } = counting(limiter);
    const app = await appWith(1, hooked);
    try {
      expect((await app.inject({ url: '/things', headers: account })).statusCode).toBe(200);
      let refusedAnswered = false;
      const refused = app.inject({ url: '/things', headers: account }).then((r) => {
        refusedAnswered = true;
        return r.statusCode;
      });
      await untilArrived(arrived, 2);
      expect((await app.inject({ url: '/things', headers: { 'x-test-account': 'acc_2' } })).statusCode).toBe(
        200,
      );
      expect(refusedAnswered).toBe(false);
      limiter.release();
      expect(await refused).toBe(429);
    } finally {
      await app.close();
    }
  });

  it(`pauses at most ${MAX_PAUSED_REFUSALS} refusals at once, and answers them all when released`, async () => {
    const limiter = paused(60_000);
    const { limiter: hooked, arrived } = counting(limiter);
    const app = await appWith(1, hooked);
    try {
      expect((await app.inject({ url: '/things', headers: account })).statusCode).toBe(200);
      let answered = 0;
      const held = Array.from({ length: MAX_PAUSED_REFUSALS }, () =>
        app.inject({ url: '/things', headers: account }).then((r) => {
          answered++;
          return r.statusCode;
        }),
      );
      await untilArrived(arrived, MAX_PAUSED_REFUSALS + 1);
      expect(answered).toBe(0);
      // One more than the bound is answered at once.
      const beyond = await app.inject({ url: '/things', headers: account });
      expect(beyond.statusCode).toBe(429);
      expect(answered).toBe(0);
      limiter.release();
      expect(new Set(await Promise.all(held))).toEqual(new Set([429]));
    } finally {
      await app.close();
    }
  });
});

describe('a counter whose Redis is not connected', () => {
  // Never connected: status "wait". No network is touched.
  const redis = new Redis({ lazyConnect: true, enableOfflineQueue: false });
  afterAll(() => redis.disconnect());

  it('counts in memory instead (failing open), and says so once', async () => {
    const { logger, lines } = recordingLogger();
    const counter = createCounter(requestsPolicy(2), { redis, logger, retryRedisAfterMs: 0 });
    expect(await counter.consume('acct:a')).toMatchObject({ allowed: true, remaining: 1 });
    expect(await counter.consume('acct:a')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await counter.consume('acct:a')).toMatchObject({ allowed: false, remaining: 0 });
    expect(lines.map((l) => `${l.level} ${l.msg}`)).toEqual([
      'warn Redis unavailable: limits are counted in each process until it answers again (failing open)',
    ]);
  });
});

describe('configuration of the limits', () => {
  it('has the CONTRACT quotas and a key prefix by default', () => {
    expect(loadConfig({})).toMatchObject({
      RATE_LIMIT_PER_MINUTE: 60,
      EDIT_LIMIT_PER_DAY: 200,
      RATE_LIMIT_KEY_PREFIX: 'cs:rl',
    });
    expect(loadConfig({ RATE_LIMIT_KEY_PREFIX: 'cs:staging:rl' }).RATE_LIMIT_KEY_PREFIX).toBe(
      'cs:staging:rl',
    );
  });

  it('refuses a key prefix with spaces or wildcards, naming the variable', () => {
    expect(() => loadConfig({ RATE_LIMIT_KEY_PREFIX: 'a b*' })).toThrow(ConfigError);
    expect(() => loadConfig({ RATE_LIMIT_KEY_PREFIX: 'a b*' })).toThrow(
      /^Invalid configuration: RATE_LIMIT_KEY_PREFIX=/,
    );
  });
});
