import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { closeRedis, openRedis, reconnectDelay, waitForRedis } from '../../infra/redis.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

const REDIS_URL = TEST_REDIS_URL;

type Line = { level: string; msg: string };
function recordingLogger(): {
  logger: { info: Log; warn: Log; debug: Log };
  lines: Line[];
} {
  const lines: Line[] = [];
  const at =
    (level: string): Log =>
    (_obj, msg) =>
      lines.push({ level, msg });
  return { lines, logger: { info: at('info'), warn: at('warn'), debug: at('debug') } };
}
type Log = (obj: object, msg: string) => void;

/** A port nothing listens on (taken from the OS, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('openRedis', () => {
  it('reconnects with a capped exponential backoff', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 50].map(reconnectDelay)).toEqual([
      100, 200, 400, 800, 1600, 3200, 5000, 5000,
    ]);
  });

  it('connects to a running Redis, answers, and closes', async () => {
    const { logger, lines } = recordingLogger();
    const redis = openRedis(REDIS_URL, { logger, name: 'cs-test' });
    expect(await waitForRedis(redis, 5_000)).toBe(true);
    expect(await redis.ping()).toBe('PONG');
    expect(lines).toContainEqual({ level: 'info', msg: 'Redis connected' });
    await closeRedis(redis);
    expect(redis.status).toBe('end');
    await closeRedis(redis); // twice is harmless
  });

  it('against an unreachable Redis: commands fail at once, the outage is logged once, close does not wait', async () => {
    const { logger, lines } = recordingLogger();
    const redis = openRedis(`redis://127.0.0.1:${await closedPort()}`, { logger });
    // No offline queue: the command is refused now rather than held until Redis comes.
    await expect(redis.ping()).rejects.toThrow();
    expect(await waitForRedis(redis, 300)).toBe(false);
    // Let it fail to reconnect a few times: one warning, the rest at debug level.
    await new Promise<void>((resolve) => {
      const check = (): void => {
        if (lines.filter((l) => l.level === 'debug').length >= 2) {
          redis.off('error', check);
          resolve();
        }
      };
      redis.on('error', check);
      check();
    });
    expect(lines.filter((l) => l.level === 'warn')).toEqual([
      { level: 'warn', msg: 'Redis unreachable; reconnecting in the background' },
    ]);
    let attempts = 0;
    redis.on('reconnecting', () => attempts++);
    await closeRedis(redis);
    // Closed between two attempts, ioredis stays "reconnecting" but has cancelled the next attempt.
    expect(['end', 'reconnecting']).toContain(redis.status);
    await expect(redis.ping()).rejects.toThrow();
    expect(attempts).toBe(0);
  });
});
