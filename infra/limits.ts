import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

/*
 * The counters of CONTRACT "Limits" (requests, edits, pages): in Redis when a client is given, in this
 * process's memory otherwise. The HTTP side (the hooks, the RateLimit fields) is apps/server/http/limits.ts.
 */

/** The subset of a pino logger the limits use. */
export type LimitLogger = {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
};

/**
 * A quota: `quota` units per window. A window of N seconds starts at a subject's first unit and
 * lasts N seconds (fixed window); `utc-day` windows run from one UTC midnight to the next.
 */
export type Policy = { name: string; quota: number; window: number | 'utc-day' };

/** The outcome of counting one unit against a limit: the adapter states it (HTTP: the RateLimit fields). */
export type LimitDecision = {
  policy: Policy;
  allowed: boolean;
  /** Units left in the current window (0 when refused). */
  remaining: number;
  /** Whole seconds until the window resets. */
  resetSeconds: number;
};

/** CONTRACT "Limits": requests per minute per account (or per client address without a usable key). */
export function requestsPolicy(perMinute: number): Policy {
  return { name: 'requests', quota: perMinute, window: 60 };
}

/** CONTRACT "Limits": article edits per UTC day per account. */
export function editsPolicy(perDay: number): Policy {
  return { name: 'edits', quota: perDay, window: 'utc-day' };
}

/** Page views per minute per web session (per client address without one). */
export function pagesPolicy(perMinute: number): Policy {
  return { name: 'pages', quota: perMinute, window: 60 };
}

/**
 * Heavy pages per minute per account (per staff member, per client address without either): the
 * revision, restore and staff revision pages and every page request with a large body. Its quota is the
 * API's requests per minute: a page that moves megabytes costs what an API call does.
 */
export function heavyPagesPolicy(perMinute: number): Policy {
  return { name: 'heavy-pages', quota: perMinute, window: 60 };
}

/** The outcome of counting one unit against a policy. */
export type Decision = LimitDecision;

/** Counts units of one policy per subject (`acct:<id>`, `ip:<address>`), atomically. */
export type Counter = {
  policy: Policy;
  /** Counts one unit and says whether it fits the quota. Never rejects because of Redis. */
  consume(subject: string): Promise<Decision>;
  /** Stops using Redis (before its client is closed); later units are counted in memory. */
  close(): void;
};

export type CounterOptions = {
  /** Shared counting across processes; without it, this process counts alone. */
  redis?: Redis;
  logger: LimitLogger;
  /** Redis keys are `<keyPrefix>:<policy>:<subject>`. */
  keyPrefix?: string;
  /** How long a Redis call may take before this request is counted in memory instead. */
  redisTimeoutMs?: number;
  /** After a Redis failure, how long to count in memory before asking Redis again. */
  retryRedisAfterMs?: number;
  now?: () => Date;
};

const DEFAULT_KEY_PREFIX = 'cs:rl';
const DEFAULT_REDIS_TIMEOUT_MS = 250;
const DEFAULT_RETRY_REDIS_AFTER_MS = 1_000;
/** How many refused subjects a counter remembers (each until its window ends). */
const REFUSED_SUBJECTS = 10_000;

/** Window length in seconds, as `w` of RateLimit-Policy states it. */
export function windowSeconds(policy: Policy): number {
  return policy.window === 'utc-day' ? 86_400 : policy.window;
}

/**
 * The key and duration of the window `at` falls in. A UTC-day window is its own key
 * (`<subject>:<yyyy-mm-dd>`) that expires at the next UTC midnight, so it resets there.
 */
export function windowOf(
  policy: Policy,
  subject: string,
  at: Date,
): { key: string; durationSeconds: number } {
  if (policy.window !== 'utc-day') return { key: subject, durationSeconds: policy.window };
  const day = at.toISOString().slice(0, 10);
  const midnight = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1);
  return {
    key: `${subject}:${day}`,
    durationSeconds: Math.max(1, Math.ceil((midnight - at.getTime()) / 1000)),
  };
}

/**
 * A counter for one policy: in Redis when a client is given (one budget for every process), in
 * this process's memory otherwise. Fails open: when Redis errs, is not connected, or does not answer
 * within `redisTimeoutMs`, the unit is counted in memory (the same quota, per process), the outage
 * is logged once, and Redis is asked again after `retryRedisAfterMs`; its first answer ends the
 * outage (logged too).
 */
export function createCounter(policy: Policy, opts: CounterOptions): Counter {
  const prefix = `${opts.keyPrefix ?? DEFAULT_KEY_PREFIX}:${policy.name}`;
  const base = { points: policy.quota, duration: windowSeconds(policy), keyPrefix: prefix };
  const local = new RateLimiterMemory(base);
  let shared: RateLimiterRedis | null = opts.redis
    ? new RateLimiterRedis({ ...base, storeClient: opts.redis, rejectIfRedisNotReady: true })
    : null;
  const timeoutMs = opts.redisTimeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  const retryAfterMs = opts.retryRedisAfterMs ?? DEFAULT_RETRY_REDIS_AFTER_MS;
  const now = opts.now ?? (() => new Date());
  let outageSince: number | null = null;
  let askRedisAt = 0;
  // A subject refused by Redis stays refused until its window ends: later units of that window are
  // refused here, without a round trip (a flooding client costs Redis one call a window, not one a
  // request). Bounded: at most REFUSED_SUBJECTS subjects, the oldest forgotten first.
  const refusedUntil = new Map<string, number>();

  const decide = (allowed: boolean, remaining: number, msBeforeNext: number): Decision => ({
    policy,
    allowed,
    remaining: allowed ? remaining : 0,
    resetSeconds: Math.max(0, Math.ceil(msBeforeNext / 1000)),
  });

  /** The decision, and how many milliseconds are left of the window. */
  async function count(
    limiter: RateLimiterMemory | RateLimiterRedis,
    key: string,
    duration: number,
  ): Promise<{ decision: Decision; msBeforeNext: number }> {
    let res: RateLimiterRes;
    let allowed = true;
    try {
      res = await limiter.consume(key, 1, { customDuration: duration });
    } catch (outcome) {
      if (!(outcome instanceof RateLimiterRes)) throw outcome;
      res = outcome;
      allowed = false;
    }
    return {
      decision: decide(allowed, res.remainingPoints, res.msBeforeNext),
      msBeforeNext: res.msBeforeNext,
    };
  }

  return {
    policy,
    async consume(subject) {
      const at = now();
      const { key, durationSeconds } = windowOf(policy, subject, at);
      const until = refusedUntil.get(key);
      if (until !== undefined) {
        const left = until - at.getTime();
        if (left > 0) return decide(false, 0, left);
        refusedUntil.delete(key);
      }
      if (shared && Date.now() >= askRedisAt) {
        try {
          const { decision, msBeforeNext } = await withTimeout(
            count(shared, key, durationSeconds),
            timeoutMs,
          );
          if (!decision.allowed) {
            refusedUntil.set(key, at.getTime() + msBeforeNext);
            if (refusedUntil.size > REFUSED_SUBJECTS) {
              const oldest = refusedUntil.keys().next().value;
              if (oldest !== undefined) refusedUntil.delete(oldest);
            }
          }
          if (outageSince !== null) {
            opts.logger.info(
              { policy: policy.name, outage_ms: Date.now() - outageSince },
              'Redis answers again: limits are shared by every process again',
            );
            outageSince = null;
          }
          return decision;
        } catch (error) {
          if (outageSince === null) {
            outageSince = Date.now();
            opts.logger.warn(
              { policy: policy.name, err: error },
              'Redis unavailable: limits are counted in each process until it answers again (failing open)',
            );
          }
          askRedisAt = Date.now() + retryAfterMs;
        }
      }
      return (await count(local, key, durationSeconds)).decision;
    },
    close() {
      shared = null;
    },
  };
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  // A late answer (or failure) after the timeout is dropped, never left unhandled.
  work.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

type EditLimiter = { limit: { take(accountId: string): Promise<Decision> }; close(): void };

/**
 * The `edits` policy of CONTRACT "Limits": 200 article edits per UTC day per account (PUT, featured
 * image, restore, and the MCP tools that do the same), counted atomically across processes (Redis when
 * set). The application refuses the 201st with `edit_limit_reached`, before anything changes; each face
 * states the decision (HTTP: the RateLimit fields beside `requests`, and Retry-After until UTC midnight).
 */
export function createEditLimiter(opts: { perDay: number } & CounterOptions): EditLimiter {
  const { perDay, ...counterOptions } = opts;
  const edits = createCounter(editsPolicy(perDay), counterOptions);
  return {
    limit: { take: (accountId) => edits.consume(`acct:${accountId}`) },
    close: () => edits.close(),
  };
}

/** The heavy-page counter (heavyPagesPolicy): in Redis when a client is given, else in memory. */
export function createHeavyPageLimiter(opts: { perMinute: number } & Omit<CounterOptions, 'now'>): Counter {
  const { perMinute, ...counterOptions } = opts;
  return createCounter(heavyPagesPolicy(perMinute), counterOptions);
}

/** The page-view counter: in Redis when a client is given (every process counts one budget), else in memory. */
export function createPageLimiter(opts: { perMinute: number } & Omit<CounterOptions, 'now'>): Counter {
  const { perMinute, ...counterOptions } = opts;
  return createCounter(pagesPolicy(perMinute), counterOptions);
}
