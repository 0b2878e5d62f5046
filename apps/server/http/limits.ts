import { isIPv4, isIPv6 } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../../domain/errors.ts';
import {
  type CounterOptions,
  createCounter,
  type Decision,
  type Policy,
  requestsPolicy,
  windowSeconds,
} from '../../../infra/limits.ts';

/*
 * Limits over HTTP: the RateLimit fields of every answer, the client address a budget is keyed by, and
 * the `requests` limit as an onRequest hook. The counters themselves are infra/limits.ts.
 */

/** An onRequest hook that enforces request limits (between authentication and refusal, so floods of bad keys count too). */
export type LimitHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

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
