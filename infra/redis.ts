import { Redis, type RedisOptions } from 'ioredis';
import { withoutPassword } from './url-password.ts';

/** The subset of a pino logger the Redis connection uses. */
type RedisLogger = {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
};

type OpenRedisOptions = {
  logger?: RedisLogger;
  /** Shown in `CLIENT LIST` and in the logs (`limits`, later `jobs`, ...). */
  name?: string;
  /**
   * Overrides of the request-path defaults below. BullMQ workers, which block on Redis and must not
   * give up on a command, will pass `{ maxRetriesPerRequest: null, enableOfflineQueue: true }`.
   */
  redisOptions?: RedisOptions;
};

/** Reconnection delay: 100 ms, doubling, at most 5 s; never gives up. */
export function reconnectDelay(attempt: number): number {
  return Math.min(100 * 2 ** Math.max(0, attempt - 1), 5_000);
}

/**
 * A Redis client for the request path: it connects at once and in the background, and a command
 * sent while Redis is unreachable fails at once instead of waiting in a queue
 * (`enableOfflineQueue: false`), so a caller can fall back instead of hanging. It reconnects forever
 * with a capped backoff. Connection errors are logged (the first of an outage as a warning, the
 * retries at debug level), never left as unhandled `error` events.
 *
 * Not lazy on purpose: with the offline queue off, a lazily connecting client would fail its first
 * command; this one is usually ready before the first request (`waitForRedis` to be sure).
 */
export function openRedis(url: string, options: OpenRedisOptions = {}): Redis {
  const { logger, name = 'content-service' } = options;
  const redis = new Redis(url, {
    connectionName: name,
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    retryStrategy: reconnectDelay,
    ...options.redisOptions,
  });
  const where = { redis: name, address: withoutPassword(url, 'redis://(unparseable)') };
  let connectedOnce = false;
  let outage = false;
  redis.on('error', (error: Error) => {
    if (outage) {
      logger?.debug({ ...where, err: error }, 'Redis still unreachable');
      return;
    }
    outage = true;
    logger?.warn({ ...where, err: error }, 'Redis unreachable; reconnecting in the background');
  });
  redis.on('ready', () => {
    logger?.info(where, connectedOnce ? 'Redis connection restored' : 'Redis connected');
    connectedOnce = true;
    outage = false;
  });
  return redis;
}

/**
 * Resolves true once the client is ready; false when its connection attempt fails or it is not ready
 * within `timeoutMs` (it goes on reconnecting in the background). Never rejects.
 */
export function waitForRedis(redis: Redis, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ready: boolean): void => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      redis.off('error', onError);
      resolve(ready);
    };
    const onReady = (): void => done(true);
    const onError = (): void => done(false);
    const timer = setTimeout(() => done(false), timeoutMs);
    redis.once('ready', onReady);
    redis.once('error', onError);
  });
}

/**
 * Closes the client: QUIT when connected (Redis gets at most `timeoutMs` to answer), otherwise or
 * then drops the socket and stops reconnecting. Resolves once the client is done (no socket, no
 * reconnection pending); never rejects, and never waits long on an unreachable Redis.
 */
export async function closeRedis(redis: Redis, timeoutMs = 1_000): Promise<void> {
  if (redis.status === 'end') return;
  const ended = new Promise<void>((resolve) => redis.once('end', () => resolve()));
  let timer: NodeJS.Timeout | undefined;
  const bounded = (work: Promise<unknown>): Promise<unknown> =>
    Promise.race([
      work,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
  if (redis.status === 'ready') {
    await bounded(redis.quit().catch(() => undefined));
  }
  // `status` may have changed while awaiting QUIT: read it afresh (TypeScript still narrows the check above).
  const status = redis.status as string;
  if (status === 'end') return;
  redis.disconnect(false);
  // Between two attempts there is no socket to close: disconnect() cancels the next attempt and
  // ioredis stays "reconnecting" without ever emitting "end". Otherwise wait for the socket to close.
  if (status !== 'reconnecting') await bounded(ended);
}
