import type { Redis } from 'ioredis';

/*
 * Where each account's last write stands in the primary's write-ahead log, for read-your-writes on
 * the read replicas (replicas.ts): a read of an account goes to a replica that has replayed at least
 * that far. Kept in this process, and with Redis shared by every process of the deployment, for a few
 * minutes: by then every replica that is not skipped for its lag has replayed it long ago.
 */

/** How long an account's last write position is kept (its reads' constraint lasts at most this long). */
export const POSITION_TTL_MS = 300_000;

/** A WAL position as PostgreSQL writes it (`16/B374D848`: two hex numbers, the high and low 32 bits), as a number. */
export function parseLsn(text: string): bigint {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!match) throw new Error(`not a WAL position: ${JSON.stringify(text)}`);
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}

/** A WAL position in PostgreSQL's own notation (`16/B374D848`). */
export function formatLsn(lsn: bigint): string {
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`;
}

/** Each account's last write position. */
export type WritePositions = {
  /** The account's last write position recorded within the TTL; undefined when none is. */
  get(accountId: string): Promise<bigint | undefined>;
  /** Records `lsn` as the account's last write position, unless a later one is recorded already. */
  record(accountId: string, lsn: bigint): Promise<void>;
};

/** Sweep the expired positions when the map has grown past this many accounts. */
const SWEEP_AT = 10_000;

/** The positions of the writes this process made, kept in memory for `ttlMs`. */
export function memoryPositions(opts: { ttlMs?: number; now?: () => number } = {}): WritePositions {
  const ttlMs = opts.ttlMs ?? POSITION_TTL_MS;
  const now = opts.now ?? Date.now;
  const positions = new Map<string, { lsn: bigint; until: number }>();
  return {
    async get(accountId) {
      const kept = positions.get(accountId);
      if (kept === undefined) return undefined;
      if (kept.until <= now()) {
        positions.delete(accountId);
        return undefined;
      }
      return kept.lsn;
    },
    async record(accountId, lsn) {
      const at = now();
      const kept = positions.get(accountId);
      const until = at + ttlMs;
      positions.set(accountId, { lsn: kept && kept.until > at && kept.lsn > lsn ? kept.lsn : lsn, until });
      if (positions.size > SWEEP_AT) {
        for (const [id, { until: end }] of positions) if (end <= at) positions.delete(id);
      }
    },
  };
}

/**
 * Sets the key to the position given unless it holds a later one; either way the key lives `ttl` ms
 * more. Positions are fixed-width hex, so that the string order is the numeric one.
 */
const RECORD_SCRIPT = `
local kept = redis.call('GET', KEYS[1])
if (not kept) or kept < ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1`;

/** A position as it is kept in Redis: 16 hex digits. */
const keptForm = (lsn: bigint): string => lsn.toString(16).padStart(16, '0');

type Log = { warn(obj: object, msg: string): void };

/**
 * The positions shared by every process through Redis (a key per account, `prefix:accountId`, with the
 * TTL), and this process's own in memory besides: while Redis does not answer, this process's reads
 * still see its own writes (a write made by another process may then be read from a replica behind it,
 * for as long as Redis is away; logged once per outage).
 */
export function redisPositions(
  redis: Pick<Redis, 'get' | 'eval'>,
  opts: { prefix: string; ttlMs?: number; logger?: Log },
): WritePositions {
  const ttlMs = opts.ttlMs ?? POSITION_TTL_MS;
  const own = memoryPositions({ ttlMs });
  let away = false;
  const failed = (error: unknown): void => {
    if (!away)
      opts.logger?.warn({ err: error }, 'Redis did not answer: write positions are per process for now');
    away = true;
  };
  const key = (accountId: string): string => `${opts.prefix}:${accountId}`;
  return {
    async get(accountId) {
      const mine = await own.get(accountId);
      let shared: bigint | undefined;
      try {
        const kept = await redis.get(key(accountId));
        away = false;
        shared = kept === null ? undefined : BigInt(`0x${kept}`);
      } catch (error) {
        failed(error);
      }
      if (mine === undefined) return shared;
      return shared !== undefined && shared > mine ? shared : mine;
    },
    async record(accountId, lsn) {
      await own.record(accountId, lsn);
      try {
        await redis.eval(RECORD_SCRIPT, 1, key(accountId), keptForm(lsn), String(ttlMs));
        away = false;
      } catch (error) {
        failed(error);
      }
    },
  };
}
