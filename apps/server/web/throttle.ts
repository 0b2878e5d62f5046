import type { Db } from '../../../infra/db/schema.ts';

/*
 * The sign-in throttle: failed sign-ins counted in `sign_in_failures` (so that every server process sees
 * the same counts), under three kinds of key (sign-in.ts chooses them):
 *
 * - `email:<lowercased>`: every attempt on an email address, from anywhere. It only ever SLOWS
 *   (EMAIL_POLICY: no lock), so nobody can lock a person out by typing wrong passwords for their email.
 *   The wait is bounded: at most `maxDelayMs` (30 s) after the last failure checked.
 * - `client:<lowercased email>|ip:<address>` (an email from one client address) or
 *   `client:<lowercased email>|device:<id>` (an email from a browser holding a device cookie for it:
 *   device.ts, set by an earlier successful sign-in with that email): slowed, then LOCKED after
 *   `lockAfter` failures (CLIENT_POLICY). Only the client that failed is locked.
 * - `ip:<address>`: every attempt from one client address, across emails (ADDRESS_POLICY): slowed,
 *   then locked after many failures.
 *
 * An attempt from a browser with a device cookie for the email is counted under its device key alone:
 * neither the email's count nor the address's touches it, so an attacker hammering the email from
 * elsewhere (or from the same network) never slows or locks the person on their known device. Without a
 * device cookie the person waits at most `maxDelayMs` after the attacker's last checked failure and is
 * never locked by it.
 *
 * For each key:
 * - the first `freeFailures` failures cost nothing;
 * - after that each attempt must wait `baseDelayMs`, doubled per further failure (at most `maxDelayMs`)
 *   after the last failure; an attempt made sooner is refused unchecked. It counts as a failure on the
 *   key that refused it when that key can lock (a client that does not wait locks itself sooner), never
 *   on the others, never on an email's key (else anyone could keep an email waiting for ever);
 * - at `lockAfter` failures (when the policy has it) the key is locked for `lockMs`: every attempt is
 *   refused, right password or not, until the lock ends; then the count starts again;
 * - failures older than `windowMs` (counted from the first) are forgotten.
 *
 * No race: `reserve` decides and counts the attempt as a failure in progress on every key in one
 * transaction holding the keys' rows locked, before the password is verified; so N concurrent attempts
 * verify no more passwords than N sequential ones would. A wrong password leaves the failure counted; a
 * right one takes the reservation back (`succeeded`): the keys the person proved are forgotten, the
 * address's count is decremented.
 *
 * An unknown email is counted exactly like a known one: the answers reveal nothing about accounts.
 */

export type ThrottlePolicy = {
  freeFailures: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Null: never locked, only slowed. */
  lockAfter: number | null;
  lockMs: number;
  windowMs: number;
};

const MINUTE = 60_000;

/** An email address from anywhere: slowed only. */
export const EMAIL_POLICY: ThrottlePolicy = {
  freeFailures: 3,
  baseDelayMs: 1_000,
  maxDelayMs: 30_000,
  lockAfter: null,
  lockMs: 0,
  windowMs: 15 * MINUTE,
};

/** An email address from one client (address or device cookie): slowed, then locked. */
export const CLIENT_POLICY: ThrottlePolicy = {
  freeFailures: 3,
  baseDelayMs: 1_000,
  maxDelayMs: 30_000,
  lockAfter: 10,
  lockMs: 15 * MINUTE,
  windowMs: 15 * MINUTE,
};

/** A client address, across emails. */
export const ADDRESS_POLICY: ThrottlePolicy = {
  freeFailures: 20,
  baseDelayMs: 1_000,
  maxDelayMs: 30_000,
  lockAfter: 100,
  lockMs: 15 * MINUTE,
  windowMs: 15 * MINUTE,
};

export type ThrottleKey = { key: string; policy: ThrottlePolicy };

export type ThrottleRefusal = { allowed: false; reason: 'slowed' | 'locked'; retryAfterMs: number };

/** An attempt counted as a failure in progress on `keys`, at `at`. */
export type Reservation = { allowed: true; at: Date; keys: readonly ThrottleKey[] };

export type ThrottleVerdict = Reservation | ThrottleRefusal;

export type SignInThrottle = {
  /**
   * Allowed: the attempt is counted as a failure on every key (the caller then verifies the password);
   * refused: counted only on the locking keys that refused it. One transaction, the keys' rows locked: concurrent attempts take turns.
   */
  reserve(keys: readonly ThrottleKey[]): Promise<ThrottleVerdict>;
  /** The reserved attempt succeeded: `forget` keys are deleted, the others' count is taken back. */
  succeeded(reservation: Reservation, forget: readonly string[]): Promise<void>;
};

export function delayAfter(failures: number, policy: ThrottlePolicy): number {
  if (failures < policy.freeFailures) return 0;
  return Math.min(policy.baseDelayMs * 2 ** (failures - policy.freeFailures), policy.maxDelayMs);
}

type Row = { failures: number; first_failed_at: Date; last_failed_at: Date; locked_until: Date | null };

/** What a key's row means at `at`: a refusal, or the count to go on from. */
function judge(
  row: Row,
  policy: ThrottlePolicy,
  at: number,
): { refusal: ThrottleRefusal | null; failures: number; firstFailedAt: number } {
  const lockedUntil = row.locked_until?.getTime();
  if (lockedUntil !== undefined && lockedUntil > at) {
    return {
      refusal: { allowed: false, reason: 'locked', retryAfterMs: lockedUntil - at },
      failures: row.failures,
      firstFailedAt: row.first_failed_at.getTime(),
    };
  }
  const restart =
    row.failures === 0 || lockedUntil !== undefined || row.first_failed_at.getTime() <= at - policy.windowMs;
  if (restart) return { refusal: null, failures: 0, firstFailedAt: at };
  const until = row.last_failed_at.getTime() + delayAfter(row.failures, policy);
  return {
    refusal: until > at ? { allowed: false, reason: 'slowed', retryAfterMs: until - at } : null,
    failures: row.failures,
    firstFailedAt: row.first_failed_at.getTime(),
  };
}

/** The refusal to show when several keys refuse: a lock before a wait, then the longest. */
function worse(a: ThrottleRefusal | null, b: ThrottleRefusal): ThrottleRefusal {
  if (a === null) return b;
  if (a.reason !== b.reason) return a.reason === 'locked' ? a : b;
  return b.retryAfterMs > a.retryAfterMs ? b : a;
}

export function createSignInThrottle(db: Db, now: () => Date = () => new Date()): SignInThrottle {
  return {
    async reserve(keys) {
      const at = now();
      if (keys.length === 0) return { allowed: true, at, keys };
      // Sorted, one row per key: concurrent attempts lock the rows in the same order (no deadlock).
      const byKey = new Map(keys.map((k) => [k.key, k]));
      const sorted = [...byKey.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const names = sorted.map((k) => k.key);
      return db.transaction().execute(async (trx): Promise<ThrottleVerdict> => {
        await trx
          .insertInto('sign_in_failures')
          .values(
            sorted.map((k) => ({
              key: k.key,
              failures: 0,
              first_failed_at: at,
              last_failed_at: at,
              locked_until: null,
            })),
          )
          .onConflict((oc) => oc.column('key').doNothing())
          .execute();
        const rows = await trx
          .selectFrom('sign_in_failures')
          .selectAll()
          .where('key', 'in', names)
          .orderBy('key')
          .forUpdate()
          .execute();
        const judged = rows.map((row) => {
          const policy = byKey.get(row.key)?.policy ?? EMAIL_POLICY;
          return { key: row.key, policy, ...judge(row, policy, at.getTime()) };
        });
        let refusal: ThrottleRefusal | null = null;
        for (const j of judged) if (j.refusal) refusal = worse(refusal, j.refusal);
        // Refused: counted only on the keys that can lock and refused it themselves (a client that does
        // not wait locks itself sooner); never on a key another key's refusal was for, never on an email.
        const counted = refusal
          ? judged.filter((j) => j.refusal?.reason === 'slowed' && j.policy.lockAfter !== null)
          : judged;
        for (const j of counted) {
          const failures = j.failures + 1;
          const lock = j.policy.lockAfter !== null && failures >= j.policy.lockAfter;
          await trx
            .updateTable('sign_in_failures')
            .set({
              failures,
              first_failed_at: new Date(j.firstFailedAt),
              last_failed_at: at,
              locked_until: lock ? new Date(at.getTime() + j.policy.lockMs) : null,
            })
            .where('key', '=', j.key)
            .execute();
        }
        return refusal ?? { allowed: true, at, keys: sorted };
      });
    },

    async succeeded(reservation, forget) {
      const dropped = new Set(forget);
      if (dropped.size > 0) {
        await db
          .deleteFrom('sign_in_failures')
          .where('key', 'in', [...dropped])
          .execute();
      }
      for (const { key, policy } of reservation.keys) {
        if (dropped.has(key)) continue;
        // This attempt's failure is taken back; a lock this very attempt set is lifted with it.
        const lockedByIt =
          policy.lockAfter === null ? null : new Date(reservation.at.getTime() + policy.lockMs);
        await db
          .updateTable('sign_in_failures')
          .set((eb) => ({
            failures: eb.fn('greatest', [eb('failures', '-', 1), eb.lit(0)]),
            locked_until:
              lockedByIt === null
                ? eb.ref('locked_until')
                : eb
                    .case()
                    .when('locked_until', '=', lockedByIt)
                    .then(null)
                    .else(eb.ref('locked_until'))
                    .end(),
          }))
          .where('key', '=', key)
          .execute();
      }
    },
  };
}
