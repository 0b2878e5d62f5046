import { randomBytes, randomInt } from 'node:crypto';
import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { newWebhookSecret } from '../../apps/application/webhooks.ts';
import {
  LOG_REDACTION,
  REDACTED,
  redactHeaders,
  redactSecrets,
  redactUrl,
} from '../../apps/server/http/log-redaction.ts';
import { newApiKey } from '../../infra/ids.ts';

const URL_ALPHABET = 'useandom-26T198340PX75pxJACKVERYMINDBUSHWOLF_GQZbfghjklqvwyzrict';
function nanoid(size: number): string {
  return Array.from({ length: size }, () => URL_ALPHABET[randomInt(URL_ALPHABET.length)]).join('');
}

/** The values the service issues, in their real shapes (infra/ids.ts, webhooks.ts, oidc-provider, sessions). */
const issued = {
  apiKey: newApiKey().key,
  keyPrefix: newApiKey().prefix,
  webhookSecret: newWebhookSecret(),
  // oidc-provider's opaque access and refresh tokens, codes, uids: nanoid, 43 of its URL alphabet.
  accessToken: nanoid(43),
  // oidc-provider's client secrets: 64 random bytes, base64url.
  clientSecret: randomBytes(64).toString('base64url'),
  // A web session, CSRF cookie or CSRF token: 32 random bytes, base64url.
  session: randomBytes(32).toString('base64url'),
} as const;

describe('redactUrl', () => {
  it.each([
    ['/api/v1/sites?api_key=cs_live_x&page=2', `/api/v1/sites?api_key=${REDACTED}&page=2`],
    ['/api/v1/sites?access_token=abc', `/api/v1/sites?access_token=${REDACTED}`],
    ['/x?token=a&apikey=b&key=c', `/x?token=${REDACTED}&apikey=${REDACTED}&key=${REDACTED}`],
    ['/oauth/callback?code=xyz&state=s', `/oauth/callback?code=${REDACTED}&state=s`],
    [
      '/x?client_secret=s&password=p&Authorization=Bearer%20k',
      `/x?client_secret=${REDACTED}&password=${REDACTED}&Authorization=${REDACTED}`,
    ],
    ['/x?X-Amz-Signature=abc&x=1', `/x?X-Amz-Signature=${REDACTED}&x=1`],
    ['/x?api%5Fkey=abc', `/x?api%5Fkey=${REDACTED}`],
  ])('%s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });

  it('leaves URLs without secrets as they are', () => {
    for (const url of [
      '/api/v1/sites',
      '/api/v1/sites?page=2&per_page=5',
      '/x?from=2026-01-01&flag',
      '/x?%zz=1',
      // Ids, dates, UUIDs, hashes and slugs are not secrets: single-case or short, they stay.
      '/api/v1/articles/art_01jx3k5m7n9p1r3t5v7x9z1b3d?site=site_01jx3k5m7n9p1r3t5v7x9z1b3d',
      '/x?id=0192e4a1-7b3c-7def-8a12-3456789abcde&h=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
      '/x/how-to-write-articles-that-people-read-twice',
      '/x?at=2026-11-26T13:00:00.000Z',
    ]) {
      expect(redactUrl(url)).toBe(url);
    }
  });

  describe("redacts the service's keys and tokens by their shape, whatever the parameter is called", () => {
    it.each(Object.entries(issued))('%s', (_name, secret) => {
      for (const url of [
        `/x?q=${secret}`,
        `/x?q=${encodeURIComponent(secret)}&page=2`,
        `/x?page=2&nothing_secret_here=${encodeURIComponent(secret)}`,
        `/x/${encodeURIComponent(secret)}/more?page=2`,
        `/x?q=Bearer%20${encodeURIComponent(secret)}`,
        `/x?q=${encodeURIComponent(secret).replaceAll('_', '%5F')}`,
      ]) {
        const logged = redactUrl(url);
        expect(logged).not.toContain(secret);
        expect(logged).not.toContain(encodeURIComponent(secret));
        expect(logged).toContain(REDACTED);
        // A fragment of a secret is no better: no 12 characters of it survive.
        for (let i = 0; i + 12 <= secret.length; i += 6)
          expect(logged).not.toContain(secret.slice(i, i + 12));
      }
    });

    it('keeps what is around the secret', () => {
      expect(redactUrl(`/oauth/interaction/${issued.accessToken}?page=2`)).toBe(
        `/oauth/interaction/${REDACTED}?page=2`,
      );
      expect(redactUrl(`/x?q=${issued.apiKey}&page=2`)).toBe(`/x?q=${REDACTED}&page=2`);
    });
  });
});

describe('redactSecrets', () => {
  it("hides the service's keys and tokens anywhere in a text (an error message, a stack)", () => {
    const text = `Route GET:/x?a=${issued.apiKey} not found; secret ${issued.webhookSecret}, token "${issued.accessToken}".`;
    const redacted = redactSecrets(text);
    for (const secret of [issued.apiKey, issued.webhookSecret, issued.accessToken]) {
      expect(redacted).not.toContain(secret);
    }
    expect(redacted).toBe(`Route GET:/x?a=${REDACTED} not found; secret ${REDACTED}, token "${REDACTED}".`);
  });

  it('leaves text without secrets as it is', () => {
    const text = 'request completed req_01jx3k5m7n9p1r3t5v7x9z1b3d in 12 ms (art_01jx3k5m7n9p1r3t5v7x9z1b3d)';
    expect(redactSecrets(text)).toBe(text);
  });

  it('finds a random run only from its beginning, and finds the same runs as trying every character (property)', () => {
    // Trying every character as the start of a run: what redactSecrets is to match, more slowly.
    const everyStart = /(?:[A-Za-z0-9_-]|%5f|%2d){32,}/gi;
    const looksRandom = (run: string): boolean => {
      const plain = run.replace(/%5f/gi, '_').replace(/%2d/gi, '-');
      return plain.length >= 32 && /[A-Z]/.test(plain) && /[a-z]/.test(plain);
    };
    const reference = (text: string): string =>
      text.replace(everyStart, (run) => (looksRandom(run) ? REDACTED : run));
    // Runs around the length of 32, with percent-encoded underscores and dashes and what breaks a run.
    const piece = fc.constantFrom(
      'a',
      'B',
      '7',
      '_',
      '-',
      '%5f',
      '%5F',
      '%2d',
      '%',
      '5',
      'f',
      '/',
      ' ',
      'x'.repeat(8),
      'Ab'.repeat(8),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        const text = pieces.join('');
        // No prefixed secret in these texts: only the random runs differ, if anything does.
        expect(redactSecrets(text)).toBe(reference(text));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('redactSecrets on short texts', () => {
  it('gives what both patterns give, whether or not the text is short enough to pass over (property)', () => {
    const reference = (text: string): string =>
      text
        .replace(
          /cs(?:_|%5f)live(?:_|%5f)[0-9a-z]*|whsec(?:_|%5f)(?:[A-Za-z0-9+/=]|%[0-9a-f]{2})*/gi,
          REDACTED,
        )
        .replace(/(?:[A-Za-z0-9_-]|%5f|%2d){32,}/gi, (run) => {
          const plain = run.replace(/%5f/gi, '_').replace(/%2d/gi, '-');
          return plain.length >= 32 && /[A-Z]/.test(plain) && /[a-z]/.test(plain) ? REDACTED : run;
        });
    const piece = fc.constantFrom(
      'cs',
      'whsec',
      'live',
      '_',
      '%5f',
      '%5F',
      '%',
      'Ab',
      'x'.repeat(8),
      'Q7',
      ' ',
      '-',
      'request completed',
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const text = pieces.join('');
        expect(redactSecrets(text)).toBe(reference(text));
      }),
      { numRuns: 3000 },
    );
    expect(redactSecrets('cs_live_abc')).toBe(REDACTED);
    expect(redactSecrets('request completed')).toBe('request completed');
  });
});

describe('redactHeaders', () => {
  it('replaces credential headers whole and the service keys and tokens in any other header', () => {
    expect(
      redactHeaders({
        authorization: `Bearer ${issued.apiKey}`,
        'x-api-key': issued.apiKey,
        cookie: 'cs_session=abc',
        'webhook-signature': 'v1,abc',
        'x-forwarded-for': '203.0.113.7',
        'x-anything': `token ${issued.session}`,
        via: [`1.1 ${issued.accessToken}`, '1.1 proxy'],
      }),
    ).toEqual({
      authorization: REDACTED,
      'x-api-key': REDACTED,
      cookie: REDACTED,
      'webhook-signature': REDACTED,
      'x-forwarded-for': '203.0.113.7',
      'x-anything': `token ${REDACTED}`,
      via: [`1.1 ${REDACTED}`, '1.1 proxy'],
    });
  });
});

describe('LOG_REDACTION (the options of every pino logger of the service)', () => {
  it('keeps keys and tokens out of messages, format arguments, errors and headers', () => {
    const lines: string[] = [];
    const log = pino({ level: 'info', ...LOG_REDACTION }, { write: (line: string) => void lines.push(line) });
    log.info(`Route GET:/x/${issued.session} not found`);
    log.info('called with %s', issued.apiKey);
    log.error({ err: new Error(`could not fetch /hook?t=${issued.webhookSecret}`) }, 'failed');
    log.warn({ headers: { 'x-key-of-mine': issued.apiKey, 'x-other': issued.accessToken } }, 'odd request');
    const logged = lines.join('\n');
    for (const secret of Object.values(issued)) expect(logged).not.toContain(secret);
    expect(logged).toContain(`Route GET:/x/${REDACTED} not found`);
    expect(lines).toHaveLength(4);
  });
});
