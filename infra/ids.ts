import { hash, randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

function base32(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += CROCKFORD[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += CROCKFORD[(buffer << (5 - bits)) & 31];
  return out;
}

/**
 * Random bytes for ids, drawn from the CSPRNG a few kilobytes at a time (as `crypto.randomUUID`
 * does): an id per request and per activity record would otherwise ask OpenSSL for 10 bytes each.
 */
const POOL_BYTES = 4096;
let pool = randomBytes(POOL_BYTES);
let poolOffset = 0;

function randomFromPool(n: number): Uint8Array {
  if (poolOffset + n > POOL_BYTES) {
    pool = randomBytes(POOL_BYTES);
    poolOffset = 0;
  }
  const bytes = pool.subarray(poolOffset, poolOffset + n);
  poolOffset += n;
  return bytes;
}

/** An opaque id that sorts by creation time: `<prefix>_` + 48 bits of milliseconds + 80 random bits. */
export function newId(prefix: string, now: number = Date.now()): string {
  return `${prefix}_${base32(timeFirst(now))}`;
}

/** What `newId(prefix)` makes, and nothing else: the prefix, `_` and 26 lowercase Crockford base32 characters. */
export function newIdPattern(prefix: string): RegExp {
  return new RegExp(`^${prefix}_[${CROCKFORD}]{26}$`);
}

/** 16 bytes: 48 bits of Unix milliseconds (big-endian), then 80 random bits. */
function timeFirst(now: number): Uint8Array {
  const bytes = new Uint8Array(16);
  let t = now;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = t % 256;
    t = Math.floor(t / 256);
  }
  bytes.set(randomFromPool(10), 6);
  return bytes;
}

/**
 * A UUID of version 7 (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits. Event ids are
 * these: ids appended later sort later, so the unique index on them grows at its end instead of
 * touching a random page of a large index on every append (which, past the size of the buffer cache,
 * means a page read per event).
 */
export function uuidv7(now: number = Date.now()): string {
  const bytes = timeFirst(now);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x70;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A new API key: shown once; only its SHA-256 is stored. The prefix identifies it in lists. */
export function newApiKey(): { key: string; prefix: string; hash: string } {
  const secret = base32(randomBytes(30));
  const key = `cs_live_${secret}`;
  return { key, prefix: key.slice(0, 14), hash: hashApiKey(key) };
}

export const API_KEY_PATTERN = /^cs_live_[0-9a-z]{48}$/;

export function hashApiKey(key: string): string {
  // The one-shot hash: every request hashes its key to find what the process knows of it.
  return hash('sha256', key, 'hex');
}

/** Whether a stored secret is an API key's hash as hashApiKey makes it: SHA-256, 64 lowercase hex digits. */
export function isApiKeyHash(secret: string): boolean {
  return /^[0-9a-f]{64}$/.test(secret);
}

/** A readable random password for demo accounts. */
export function newPassword(): string {
  return base32(randomBytes(15));
}
