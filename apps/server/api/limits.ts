import { isIPv4, isIPv6 } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { DomainError } from '../../../domain/errors.ts';
import type { LimitDecision } from '../../application/call.ts';
import type { LimitHook } from './index.ts';

/** The subset of a pino logger the limits use. */
export type LimitLogger = {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
};

/**
 * A quota: `quota` units per window. A window of N seconds starts at a subject's first unit and
 * lasts N seconds (fixed window); `utc-day` windows run from one UTC midnight to the next.
 */
export type Policy = LimitDecision['policy'];

/** CONTRACT "Limits": requests per minute per account (or per client address without a usable key). */
export function requestsPolicy(perMinute: number): Policy {
  return { name: 'requests', quota: perMinute, window: 60 };
}

/** CONTRACT "Limits": article edits per UTC day per account. */
export function editsPolicy(perDay: number): Policy {
  return { name: 'edits', quota: perDay, window: 'utc-day' };
}

/** The outcome of counting one unit against a policy (the application's word for it). */
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
function windowSeconds(policy: Policy): number {
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

/** RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers): `"requests";q=60;w=60`, one item per policy. */
export function rateLimitPolicyField(policies: readonly Policy[]): string {
  return policies.map((p) => `"${p.name}";q=${p.quota};w=${windowSeconds(p)}`).join(', ');
}

/** RateLimit: `"requests";r=59;t=60`, one item per policy. */
export function rateLimitField(decisions: readonly Decision[]): string {
  return decisions.map((d) => `"${d.policy.name}";r=${d.remaining};t=${d.resetSeconds}`).join(', ');
}

const decided = new WeakMap<FastifyRequest, Decision[]>();

/**
 * Writes a decision into the response's RateLimit fields, beside the other policies already decided
 * for this request (the `edits` policy joins `requests` on writes), and `Retry-After` when refused.
 */
export function publishDecision(request: FastifyRequest, reply: FastifyReply, decision: Decision): void {
  const all = (decided.get(request) ?? []).filter((d) => d.policy.name !== decision.policy.name);
  all.push(decision);
  decided.set(request, all);
  reply.header('RateLimit-Policy', rateLimitPolicyField(all.map((d) => d.policy)));
  reply.header('RateLimit', rateLimitField(all));
  if (!decision.allowed) reply.header('Retry-After', String(Math.max(1, decision.resetSeconds)));
}

/**
 * The budget key of a client address: IPv4 as is (IPv4-mapped IPv6 too), IPv6 by its /64 prefix,
 * since one host commonly holds a whole /64.
 */
export function addressKey(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped?.[1]) return mapped[1];
  if (isIPv4(ip)) return ip;
  const address = ip.split('%')[0] ?? ip;
  if (!isIPv6(address)) return ip;
  const [head = '', tail = ''] = address.includes('::') ? address.split('::') : [address, ''];
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = tail === '' ? [] : tail.split(':');
  const width = (parts: string[]): number => parts.reduce((n, p) => n + (p.includes('.') ? 2 : 1), 0);
  const zeros = Array.from({ length: 8 - width(headParts) - width(tailParts) }, () => '0');
  const groups = [...headParts, ...zeros, ...tailParts].slice(0, 4);
  return `${groups.map((g) => Number.parseInt(g, 16).toString(16)).join(':')}::/64`;
}

/** Whose budget a request spends: its account with a usable key, else its client address. */
function subjectOf(request: FastifyRequest): string {
  const accountId = request.auth?.principal?.accountId;
  return accountId ? `acct:${accountId}` : `ip:${addressKey(request.ip)}`;
}

type RequestLimiter = {
  hook: LimitHook;
  /** Answers every paused refusal now (when the server starts closing). */
  release(): void;
  close(): Promise<void>;
};

/** At most this many refusals wait out their pause at once in a process; beyond, they are answered at once. */
export const MAX_PAUSED_REFUSALS = 1_000;

/**
 * Pauses of refused requests: each waits up to `ms` (never past its window's end), at most
 * `maxPaused` at a time; `release` ends every pause now (on shutdown).
 */
function createPauses(maxPaused: number) {
  const waiting = new Set<() => void>();
  return {
    /** Resolves with how long it paused: `ms`, or 0 when `maxPaused` are paused already. */
    pause(ms: number): Promise<number> {
      if (ms <= 0 || waiting.size >= maxPaused) return Promise.resolve(0);
      const started = performance.now();
      return new Promise((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          waiting.delete(done);
          resolve(performance.now() - started);
        };
        const timer = setTimeout(done, ms);
        waiting.add(done);
      });
    },
    release(): void {
      for (const done of [...waiting]) done();
    },
  };
}

/**
 * The `requests` policy of CONTRACT "Limits" as the `/api/v1` onRequest hook: every response
 * carries RateLimit-Policy and RateLimit; past the quota the request is refused with 429
 * `rate_limited` and Retry-After. A revoked, unknown or malformed key spends its client address's
 * budget, never an account's.
 *
 * A refusal is answered after a pause of `refusalPauseMs` (at most until the window ends, at most
 * MAX_PAUSED_REFUSALS at once): a client that sends again as soon as it is answered, without reading
 * Retry-After, makes one request a second per connection instead of as many as the server can refuse,
 * and leaves the process's time to the other accounts (docs/reliability.md, noisy-tenant).
 */
export function createRequestLimiter(
  opts: { perMinute: number; refusalPauseMs?: number } & Omit<CounterOptions, 'now'>,
): RequestLimiter {
  const { perMinute, refusalPauseMs = 0, ...counterOptions } = opts;
  const requests = createCounter(requestsPolicy(perMinute), counterOptions);
  const pauses = createPauses(MAX_PAUSED_REFUSALS);
  const hook: LimitHook = async (request, reply) => {
    const subject = subjectOf(request);
    let decision = await requests.consume(subject);
    if (!decision.allowed) {
      const paused = await pauses.pause(Math.min(refusalPauseMs, decision.resetSeconds * 1000));
      const left = Math.ceil((decision.resetSeconds * 1000 - paused) / 1000);
      decision = { ...decision, resetSeconds: Math.max(0, left) };
    }
    publishDecision(request, reply, decision);
    if (!decision.allowed) {
      const whose = subject.startsWith('acct:') ? 'this account' : 'this address without a valid API key';
      throw new DomainError(
        'rate_limited',
        `More than ${perMinute} requests in a minute for ${whose}; retry in ${Math.max(1, decision.resetSeconds)} s`,
      );
    }
  };
  return {
    hook,
    release: pauses.release,
    async close() {
      pauses.release();
      // The Redis client belongs to whoever opened it, who closes it (closeRedis) after this.
      requests.close();
    },
  };
}
