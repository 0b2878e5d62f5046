import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../infra/config.ts';
import { lagOf, primaryReads, replicaName } from '../../infra/db/replicas.ts';
import type { Db } from '../../infra/db/schema.ts';
import { formatLsn, memoryPositions, parseLsn, redisPositions } from '../../infra/db/write-positions.ts';

describe('WAL positions', () => {
  it("reads PostgreSQL's X/Y notation as the 64-bit number it stands for", () => {
    expect(parseLsn('0/0')).toBe(0n);
    expect(parseLsn('0/16B3748')).toBe(0x16b3748n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) | 0xb374d848n);
    expect(parseLsn('FFFFFFFF/FFFFFFFF')).toBe(2n ** 64n - 1n);
    expect(() => parseLsn('16B374D848')).toThrow(/not a WAL position/);
    expect(() => parseLsn('1/2/3')).toThrow(/not a WAL position/);
  });

  it('compares positions as numbers, not as text', () => {
    // As text, '0/9000000' > '0/10000000' and '9/0' > '10/0'.
    expect(parseLsn('0/10000000') > parseLsn('0/9000000')).toBe(true);
    expect(parseLsn('10/0') > parseLsn('9/FFFFFFFF')).toBe(true);
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).toBe(true);
  });

  it('writes a position back in the notation it was read in', () => {
    for (const text of ['0/0', '0/16B3748', '16/B374D848', 'FFFFFFFF/FFFFFFFF']) {
      expect(formatLsn(parseLsn(text))).toBe(text);
    }
  });
});

describe('write positions in memory', () => {
  it("keeps an account's latest position, never an earlier one, for the TTL", async () => {
    let now = 1_000;
    const positions = memoryPositions({ ttlMs: 100, now: () => now });
    expect(await positions.get('acc_1')).toBeUndefined();
    await positions.record('acc_1', 50n);
    await positions.record('acc_1', 40n);
    expect(await positions.get('acc_1')).toBe(50n);
    await positions.record('acc_1', 60n);
    expect(await positions.get('acc_1')).toBe(60n);
    expect(await positions.get('acc_2')).toBeUndefined();
    now += 100;
    expect(await positions.get('acc_1')).toBeUndefined();
    // An expired position does not hold back a later, smaller record.
    await positions.record('acc_1', 10n);
    expect(await positions.get('acc_1')).toBe(10n);
  });
});

describe('write positions through Redis', () => {
  it("falls back to this process's own positions while Redis does not answer", async () => {
    const down = {
      get: () => Promise.reject(new Error('Connection is closed.')),
      eval: () => Promise.reject(new Error('Connection is closed.')),
    };
    const warnings: string[] = [];
    const positions = redisPositions(down as never, {
      prefix: 'p',
      logger: { warn: (_o, m) => warnings.push(m) },
    });
    await positions.record('acc_1', 7n);
    expect(await positions.get('acc_1')).toBe(7n);
    expect(await positions.get('acc_2')).toBeUndefined();
    expect(warnings).toHaveLength(1);
  });

  it('takes the later of the shared position and its own', async () => {
    const kept = new Map<string, string>([['p:acc_1', 90n.toString(16).padStart(16, '0')]]);
    const redis = {
      get: async (key: string) => kept.get(key) ?? null,
      eval: async () => 1,
    };
    const positions = redisPositions(redis as never, { prefix: 'p' });
    expect(await positions.get('acc_1')).toBe(90n);
    await positions.record('acc_1', 100n);
    expect(await positions.get('acc_1')).toBe(100n);
  });
});

describe('replica lag', () => {
  const reading = { recovery: true, receive: '0/3000100', replay: '0/3000100', behind: 120 };

  it('is 0 for a replica that has replayed all it received, however long ago its last transaction', () => {
    expect(lagOf(reading)).toBe(0);
    expect(lagOf({ ...reading, receive: null })).toBe(0);
  });

  it('is the age of the last replayed transaction while WAL waits to be replayed', () => {
    expect(lagOf({ ...reading, receive: '0/3000200', behind: 2.5 })).toBe(2.5);
    expect(lagOf({ ...reading, receive: '1/0', behind: null })).toBe(Number.POSITIVE_INFINITY);
  });

  it('is none for a server that is not in recovery (a primary, or a promoted replica)', () => {
    expect(lagOf({ ...reading, recovery: false })).toBeNull();
    expect(lagOf({ ...reading, replay: null })).toBeNull();
  });
});

describe('read replicas', () => {
  it('are named host:port, without their credentials', () => {
    expect(replicaName('postgres://app:secret@replica-1.internal:6432/cs')).toBe('replica-1.internal:6432');
    expect(replicaName('postgresql://replica-2/cs')).toBe('replica-2:5432');
  });

  it('without replicas, every read runs on the primary', async () => {
    const primary = {} as Db;
    const reads = primaryReads(primary);
    expect(await reads.read('acc_1', async (db) => db === primary)).toBe(true);
    await reads.wrote('acc_1');
  });

  it('are configured with DATABASE_REPLICA_URLS beside DATABASE_URL, lagging at most 5 s by default', () => {
    const c = loadConfig({
      DATABASE_URL: 'postgres://primary/cs',
      DATABASE_REPLICA_URLS: 'postgres://replica-1/cs, postgresql://u:p@replica-2:6432/cs',
    });
    expect(c.DATABASE_REPLICA_URLS).toEqual([
      'postgres://replica-1/cs',
      'postgresql://u:p@replica-2:6432/cs',
    ]);
    expect(c.REPLICA_MAX_LAG_SECONDS).toBe(5);
    expect(loadConfig({}).DATABASE_REPLICA_URLS).toBeUndefined();
    expect(
      loadConfig({
        DATABASE_URL: 'postgres://p/cs',
        DATABASE_REPLICA_URLS: 'postgres://r/cs',
        REPLICA_MAX_LAG_SECONDS: '30',
      }).REPLICA_MAX_LAG_SECONDS,
    ).toBe(30);
  });

  it('refuses replicas without DATABASE_URL, and what is not a postgres URL, naming the variable', () => {
    expect(() => loadConfig({ DATABASE_REPLICA_URLS: 'postgres://r/cs' })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_REPLICA_URLS: 'postgres://r/cs' })).toThrow(
      /DATABASE_REPLICA_URLS .*DATABASE_URL/,
    );
    expect(() =>
      loadConfig({
        DATABASE_URL: 'postgres://p/cs',
        DATABASE_REPLICA_URLS: 'postgres://r/cs,mysql://u:pw@x/cs',
      }),
    ).toThrow(/DATABASE_REPLICA_URLS=.*expected comma-separated postgres/);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://p/cs', REPLICA_MAX_LAG_SECONDS: '-1' })).toThrow(
      /REPLICA_MAX_LAG_SECONDS/,
    );
  });
});
