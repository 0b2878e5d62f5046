import { BurstyRateLimiter, RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { addressKey } from '../http/limits.ts';

/*
 * How often the authorization server may fetch client ID metadata documents. A client_id that is an
 * https URL makes this service fetch that URL, for anyone who opens `/oauth/authorize` with it: without a
 * limit, the service is a fetcher at anyone's command. Fetches are limited per client address (the
 * address whose request caused the fetch) and for the whole process, each a steady rate plus a small
 * burst (rate-limiter-flexible's BurstyRateLimiter), counted in this process's memory: the cost guarded
 * is this process's outgoing connections, and the document cache they fill is per process too. A
 * document served from the cache (oidc-provider keeps a fetched one for its Cache-Control max-age, within
 * 1 to 5 minutes) costs nothing.
 */

/** One fetch every `everySeconds`, and up to `burst` more within any minute. */
export type FetchRate = { everySeconds: number; burst: number };

export type MetadataFetchLimits = {
  /** Per client address (IPv6 by its /64). */
  perAddress: FetchRate;
  /** For the whole process, every address together. */
  perProcess: FetchRate;
};

export const METADATA_FETCH_LIMITS: MetadataFetchLimits = {
  perAddress: { everySeconds: 6, burst: 10 },
  perProcess: { everySeconds: 1, burst: 30 },
};

type FetchDecision =
  | { allowed: true }
  | { allowed: false; scope: 'address' | 'process'; retryAfterSeconds: number };

type MetadataFetchLimiter = {
  /** Counts one fetch for this client address (and the process), or says how long to wait. */
  consume(ip: string | undefined): Promise<FetchDecision>;
};

function bursty(rate: FetchRate, prefix: string): BurstyRateLimiter {
  return new BurstyRateLimiter(
    new RateLimiterMemory({ keyPrefix: `${prefix}:steady`, points: 1, duration: rate.everySeconds }),
    new RateLimiterMemory({ keyPrefix: `${prefix}:burst`, points: rate.burst, duration: 60 }),
  );
}

export function createMetadataFetchLimiter(
  limits: MetadataFetchLimits = METADATA_FETCH_LIMITS,
): MetadataFetchLimiter {
  const perAddress = bursty(limits.perAddress, 'cimd-address');
  const perProcess = bursty(limits.perProcess, 'cimd-process');

  async function take(
    limiter: BurstyRateLimiter,
    key: string,
    scope: 'address' | 'process',
  ): Promise<FetchDecision> {
    try {
      await limiter.consume(key);
      return { allowed: true };
    } catch (outcome) {
      if (!(outcome instanceof RateLimiterRes)) throw outcome;
      return {
        allowed: false,
        scope,
        retryAfterSeconds: Math.max(1, Math.ceil(outcome.msBeforeNext / 1000)),
      };
    }
  }

  return {
    async consume(ip) {
      // An address over its own budget spends none of the process's: one address cannot use it all up.
      if (ip) {
        const own = await take(perAddress, addressKey(ip), 'address');
        if (!own.allowed) return own;
      }
      return take(perProcess, 'all', 'process');
    },
  };
}
