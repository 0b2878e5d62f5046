import type { FastifyRequest } from 'fastify';

/**
 * Query parameters whose value may be a credential: keys, tokens, secrets, passwords, authorization
 * codes, signatures, sessions. Matched on the decoded name, anywhere in it (`api_key`, `access_token`,
 * `X-Amz-Signature`, `client_secret`, `code`); a false positive only hides a value from the log.
 */
const SECRET_NAME = /key|token|secret|passw|auth|code|sig|session|credential|assertion/i;
export const REDACTED = '[redacted]';

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replaceAll('+', ' '));
  } catch {
    return raw;
  }
}

/** The URL as it may be logged: the value of every secret-like query parameter replaced. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const parts = url
    .slice(q + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      const name = eq < 0 ? part : part.slice(0, eq);
      return eq >= 0 && SECRET_NAME.test(decodedName(name)) ? `${name}=${REDACTED}` : part;
    });
  return `${url.slice(0, q + 1)}${parts.join('&')}`;
}

/** The `req` of every log line (fastify's default fields), with the URL redacted. */
export function requestSerializer(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: redactUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
