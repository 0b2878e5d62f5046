import { describe, expect, it } from 'vitest';
import { API_KEY_PATTERN, hashApiKey, newApiKey, newId, uuidv7 } from '../../infra/ids.ts';

describe('ids and keys', () => {
  it('ids carry their prefix and sort by creation time', () => {
    const a = newId('art', 1_700_000_000_000);
    const b = newId('art', 1_700_000_000_001);
    expect(a).toMatch(/^art_[0-9a-z]{26}$/);
    expect(a < b).toBe(true);
    expect(newId('art')).not.toBe(newId('art'));
  });

  it('ids stay unique across many refills of the random pool', () => {
    const at = 1_700_000_000_000;
    const ids = new Set(Array.from({ length: 5_000 }, () => newId('act', at)));
    expect(ids.size).toBe(5_000);
  });

  it('an API key is random, prefixed, and only its SHA-256 is kept', () => {
    const k = newApiKey();
    expect(k.key).toMatch(API_KEY_PATTERN);
    expect(k.key.startsWith(k.prefix)).toBe(true);
    expect(k.hash).toBe(hashApiKey(k.key));
    expect(k.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(k.hash).not.toContain(k.key.slice(8));
    expect(newApiKey().key).not.toBe(k.key);
  });

  it('event ids are UUIDs of version 7 (RFC 9562) that sort by time', () => {
    const at = Date.UTC(2026, 10, 22, 4, 30);
    const id = uuidv7(at);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16)).toBe(at);
    expect(uuidv7(at) < uuidv7(at + 1)).toBe(true);
    expect(new Set(Array.from({ length: 2_000 }, () => uuidv7(at))).size).toBe(2_000);
  });
});
