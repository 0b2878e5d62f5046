import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMetadataFetchLimiter, METADATA_FETCH_LIMITS } from '../../apps/server/oauth/fetch-limits.ts';

describe('client metadata document fetch limits', () => {
  const small = {
    perAddress: { everySeconds: 1, burst: 2 },
    perProcess: { everySeconds: 1, burst: 4 },
  };
  // The clock stands still unless a test moves it: a slow machine cannot refill a budget mid-test.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('allows an address a burst, then refuses it with the wait; other addresses are not refused for it', async () => {
    const limiter = createMetadataFetchLimiter(small);
    for (let i = 0; i < 3; i++) expect(await limiter.consume('203.0.113.7')).toEqual({ allowed: true });
    expect(await limiter.consume('203.0.113.7')).toEqual({
      allowed: false,
      scope: 'address',
      retryAfterSeconds: 1,
    });
    expect(await limiter.consume('203.0.113.8')).toEqual({ allowed: true });
  });

  it('counts an IPv6 /64 as one address', async () => {
    const limiter = createMetadataFetchLimiter(small);
    for (const ip of ['2001:db8:1:2::1', '2001:db8:1:2::2', '2001:db8:1:2:ffff::9']) {
      expect(await limiter.consume(ip)).toEqual({ allowed: true });
    }
    expect(await limiter.consume('2001:db8:1:2::3')).toMatchObject({ allowed: false, scope: 'address' });
    expect(await limiter.consume('2001:db8:1:3::1')).toEqual({ allowed: true });
  });

  it('refuses every address once the process has fetched its burst; a refused address spends none of it', async () => {
    const limiter = createMetadataFetchLimiter(small);
    for (let i = 0; i < 3; i++) await limiter.consume('198.51.100.1');
    // Refused for its own address: the process's budget is untouched by these.
    for (let i = 0; i < 5; i++) expect((await limiter.consume('198.51.100.1')).allowed).toBe(false);
    expect(await limiter.consume('198.51.100.2')).toEqual({ allowed: true });
    expect(await limiter.consume('198.51.100.3')).toEqual({ allowed: true });
    expect(await limiter.consume('198.51.100.4')).toEqual({
      allowed: false,
      scope: 'process',
      retryAfterSeconds: 1,
    });
    // A fetch with no client address (outside a request) counts against the process only.
    expect(await limiter.consume(undefined)).toMatchObject({ allowed: false, scope: 'process' });
  });

  it('allows the steady rate again after the wait', async () => {
    const limiter = createMetadataFetchLimiter(small);
    for (let i = 0; i < 3; i++) await limiter.consume('192.0.2.1');
    expect((await limiter.consume('192.0.2.1')).allowed).toBe(false);
    vi.advanceTimersByTime(1_100);
    expect(await limiter.consume('192.0.2.1')).toEqual({ allowed: true });
    expect((await limiter.consume('192.0.2.1')).allowed).toBe(false);
  });

  it('by default: per address one every 6 s plus 10 a minute, per process one a second plus 30 a minute', () => {
    expect(METADATA_FETCH_LIMITS).toEqual({
      perAddress: { everySeconds: 6, burst: 10 },
      perProcess: { everySeconds: 1, burst: 30 },
    });
  });
});
