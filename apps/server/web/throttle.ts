import { sql } from 'kysely';
import type { Db } from '../../../infra/db/schema.ts';

/*
 * Failed sign-ins, counted per email address (`email:<lowercased>`) and per client address
 * (`ip:<address>`) in `sign_in_failures`, so that every server process sees the same counts:
 *
 * - the first `freeFailures` failures cost nothing;
 * - after that each attempt must wait `baseDelayMs`, doubled per further failure (at most `maxDelayMs`)
 *   after the last failure; an attempt made sooner is refused unchecked, and counts as a failure;
 * - at `lockAfter` failures the key is locked for `lockMs`: every attempt is refused, right password
 *   or not, until the lock ends;
 * - failures older than `windowMs` (counted from the first) are forgotten; a success forgets the
 *   email's failures (not the address's: one good password must not reset an address's count).
 *
 * An unknown email is counted exactly like a known one: the answers reveal nothing about accounts.
 */

export type ThrottlePolicy = {
  freeFailures: number;
  baseDelayMs: number;
  maxDelayMs: number;
  lockAfter: number;
  lockMs: number;
  windowMs: number;
};

const MINUTE = 60_000;

export const EMAIL_POLICY: ThrottlePolicy = {
  freeFailures: 3,
  baseDelayMs: 1_000,
  maxDelayMs: 30_000,
  lockAfter: 10,
  lockMs: 15 * MINUTE,
  windowMs: 15 * MINUTE,
};

export const ADDRESS_POLICY: ThrottlePolicy = {
  freeFailures: 20,
  baseDelayMs: 1_000,
  maxDelayMs: 30_000,
  lockAfter: 100,
  lockMs: 15 * MINUTE,
  windowMs: 15 * MINUTE,
};

export type ThrottleKey = { key: string; policy: ThrottlePolicy };

export type ThrottleVerdict =
  | { allowed: true }
  | { allowed: false; reason: 'slowed' | 'locked'; retryAfterMs: number };

export type SignInThrottle = {
  check(keys: readonly ThrottleKey[]): Promise<ThrottleVerdict>;
  recordFailure(keys: readonly ThrottleKey[]): Promise<void>;
  forget(key: string): Promise<void>;
  deleteStale(): Promise<number>;
};

export function delayAfter(failures: number, policy: ThrottlePolicy): number {
  if (failures < policy.freeFailures) return 0;
  return Math.min(policy.baseDelayMs * 2 ** (failures - policy.freeFailures), policy.maxDelayMs);
}

export function createSignInThrottle(db: Db, now: () => Date = () => new Date()): SignInThrottle {
  return {
    async check(keys) {
      if (keys.length === 0) return { allowed: true };
      const at = now();
      const rows = await db
        .selectFrom('sign_in_failures')
        .selectAll()
        .where(
          'key',
          'in',
          keys.map((k) => k.key),
        )
        .execute();
      let worst: ThrottleVerdict = { allowed: true };
      for (const row of rows) {
        const policy = keys.find((k) => k.key === row.key)?.policy;
        if (!policy) continue;
        let verdict: ThrottleVerdict = { allowed: true };
        if (row.locked_until && row.locked_until > at) {
          verdict = {
            allowed: false,
            reason: 'locked',
            retryAfterMs: row.locked_until.getTime() - at.getTime(),
          };
        } else if (row.locked_until || row.first_failed_at.getTime() <= at.getTime() - policy.windowMs) {
          verdict = { allowed: true };
        } else {
          const until = row.last_failed_at.getTime() + delayAfter(row.failures, policy);
          if (until > at.getTime()) {
            verdict = { allowed: false, reason: 'slowed', retryAfterMs: until - at.getTime() };
          }
        }
        if (!verdict.allowed) {
          if (worst.allowed) worst = verdict;
          else if (verdict.reason === 'locked' && worst.reason !== 'locked') worst = verdict;
          else if (verdict.reason === worst.reason && verdict.retryAfterMs > worst.retryAfterMs)
            worst = verdict;
        }
      }
      return worst;
    },

    async recordFailure(keys) {
      const at = now();
      for (const { key, policy } of keys) {
        const windowStart = new Date(at.getTime() - policy.windowMs);
        const lockEnd = new Date(at.getTime() + policy.lockMs);
        // One statement per key, atomic under concurrent failures: a window that ended, or a lock
        // that ended, starts the count again.
        const restart = sql<boolean>`(sign_in_failures.first_failed_at <= ${windowStart} or (sign_in_failures.locked_until is not null and sign_in_failures.locked_until <= ${at}))`;
        const next = sql<number>`(case when ${restart} then 1 else sign_in_failures.failures + 1 end)`;
        await db
          .insertInto('sign_in_failures')
          .values({
            key,
            failures: 1,
            first_failed_at: at,
            last_failed_at: at,
            locked_until: policy.lockAfter <= 1 ? lockEnd : null,
          })
          .onConflict((oc) =>
            oc.column('key').doUpdateSet({
              failures: next,
              first_failed_at: sql`(case when ${restart} then ${at} else sign_in_failures.first_failed_at end)`,
              last_failed_at: at,
              locked_until: sql`(case when ${next} >= ${policy.lockAfter} then ${lockEnd} when ${restart} then null else sign_in_failures.locked_until end)`,
            }),
          )
          .execute();
      }
    },

    async forget(key) {
      await db.deleteFrom('sign_in_failures').where('key', '=', key).execute();
    },

    async deleteStale() {
      const at = now();
      const horizon = new Date(at.getTime() - Math.max(EMAIL_POLICY.windowMs, ADDRESS_POLICY.windowMs));
      const result = await db
        .deleteFrom('sign_in_failures')
        .where('last_failed_at', '<', horizon)
        .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', at)]))
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}
