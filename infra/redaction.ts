/*
 * What the service may write down of a URL or a text it did not make: the logs (apps/server/http/
 * log-redaction.ts) and the traces (infra/telemetry/sdk.ts) both hide the service's keys and tokens
 * through these functions, so that a value hidden from one is hidden from the other.
 */

/**
 * Query parameters whose value may be a credential: keys, tokens, secrets, passwords, authorization
 * codes, signatures, sessions. Matched on the decoded name, anywhere in it (`api_key`, `access_token`,
 * `X-Amz-Signature`, `client_secret`, `code`); a false positive only hides a value from the log.
 */
export const SECRET_NAME = /key|token|secret|passw|auth|code|sig|session|credential|assertion/i;
export const REDACTED = '[redacted]';

/*
 * The secrets the service issues, by their shape, wherever they appear (a query value under any name, a
 * path segment, an error message), plain or percent-encoded:
 *
 * - API keys `cs_live_` + base32 (infra/ids.ts), and any text after that prefix;
 * - webhook signing secrets `whsec_` + base64 (apps/application/webhooks.ts);
 * - every other random value: oidc-provider's access and refresh tokens, authorization codes,
 *   interaction and session ids (nanoid, 43 characters) and client secrets (base64url, 86); web
 *   sessions, CSRF cookies and tokens, device MACs (base64url, 43). Each is a run of 32 or more
 *   base64url characters holding both capital and small letters. The service's own ids (`art_...`,
 *   `req_...`: small letters and digits), UUIDs, hex hashes and slugs are single-case and stay readable.
 */
const PREFIXED_SECRET = /cs(?:_|%5f)live(?:_|%5f)[0-9a-z]*|whsec(?:_|%5f)(?:[A-Za-z0-9+/=]|%[0-9a-f]{2})*/gi;
// Tried only where a run begins (the lookbehind): a run shorter than 32 is then passed over once, not
// tried again from each of its characters. What matches is the same: a longer run is matched whole from
// its beginning either way.
const RANDOM_RUN = /(?<![A-Za-z0-9_-]|%5f|%2d)(?:[A-Za-z0-9_-]|%5f|%2d){32,}/gi;
const MIN_RANDOM_LENGTH = 32;

function looksRandom(run: string): boolean {
  const plain = run.replace(/%5f/gi, '_').replace(/%2d/gi, '-');
  return plain.length >= MIN_RANDOM_LENGTH && /[A-Z]/.test(plain) && /[a-z]/.test(plain);
}

/** `text` with every value shaped like one of the service's keys or tokens replaced by REDACTED. */
export function redactSecrets(text: string): string {
  // A prefixed secret has an underscore, plain or percent-encoded; a random run is 32 characters at
  // least. A shorter text without either (a log line's message) cannot hold one.
  if (text.length < MIN_RANDOM_LENGTH && !text.includes('_') && !text.includes('%')) return text;
  return text
    .replace(PREFIXED_SECRET, REDACTED)
    .replace(RANDOM_RUN, (run) => (looksRandom(run) ? REDACTED : run));
}

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replaceAll('+', ' '));
  } catch {
    return raw;
  }
}

/**
 * The URL as it may be logged: the value of every secret-like query parameter replaced, and every
 * value shaped like one of the service's keys or tokens (redactSecrets), in the path or the query.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return redactSecrets(url);
  const parts = url
    .slice(q + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      const name = eq < 0 ? part : part.slice(0, eq);
      return eq >= 0 && SECRET_NAME.test(decodedName(name)) ? `${name}=${REDACTED}` : part;
    });
  return redactSecrets(`${url.slice(0, q + 1)}${parts.join('&')}`);
}
