/*
 * Which redirect URIs a client may register (by dynamic registration or in a client ID metadata
 * document), and what kind of client it is. oidc-provider's own checks still run after these.
 *
 * - https redirect URIs, on any host;
 * - http only on a loopback host: `localhost`, `127.0.0.1` or `[::1]`, on any port (RFC 8252 section 7.3;
 *   the port may differ at authorization time for native clients). A name that merely starts with
 *   "localhost" (`localhost.evil.example`) is not loopback;
 * - nothing else (no other schemes).
 *
 * A client that states no `application_type` and whose redirect URIs are all http loopback is a native
 * client (RFC 8252), as the MCP client-registration guidance expects; otherwise it is a web client.
 */

const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]']);

function parse(uri: string): URL | null {
  return URL.parse(uri);
}

/** An `http:` URI whose host is exactly a loopback name or address. */
export function isHttpLoopback(uri: string): boolean {
  const url = parse(uri);
  return url !== null && url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname);
}

/** Why these redirect URIs are refused, or null when they are acceptable. */
export function redirectUriProblem(uris: unknown): string | null {
  if (!Array.isArray(uris) || uris.length === 0) return 'redirect_uris must contain at least one URI';
  for (const uri of uris) {
    if (typeof uri !== 'string') return 'redirect_uris must only contain strings';
    const url = parse(uri);
    if (!url) return `redirect URI ${uri} is not a valid absolute URI`;
    if (url.protocol === 'https:') continue;
    if (url.protocol === 'http:') {
      if (LOOPBACK_HOSTS.has(url.hostname)) continue;
      return `redirect URI ${uri} uses http on a host that is not loopback: http is only allowed on localhost, 127.0.0.1 or [::1]; use https`;
    }
    return `redirect URI ${uri} must use https (or http on localhost, 127.0.0.1 or [::1])`;
  }
  return null;
}

/** The stated application type, or the one inferred from the redirect URIs when none is stated. */
export function applicationTypeOf(applicationType: unknown, redirectUris: unknown): unknown {
  if (applicationType !== undefined) return applicationType;
  const uris = Array.isArray(redirectUris) ? redirectUris : [];
  const allLoopback = uris.length > 0 && uris.every((uri) => typeof uri === 'string' && isHttpLoopback(uri));
  return allLoopback ? 'native' : 'web';
}

/** The host an assistant's codes are sent to, as the consent page shows it (the first redirect URI's). */
export function redirectHostOf(redirectUris: readonly string[]): string {
  const first = redirectUris[0];
  const url = first ? parse(first) : null;
  return url ? url.host : 'unknown';
}
