import type { FastifyRequest } from 'fastify';
import { stdSerializers } from 'pino';
import { REDACTED, redactSecrets, redactUrl, SECRET_NAME } from '../../../infra/redaction.ts';

/*
 * The logs' redaction: the `req` fields, headers, errors and messages of every line, through the
 * service's one redaction of keys, tokens and URLs (infra/redaction.ts), which the traces share.
 */
export { REDACTED, redactSecrets, redactUrl };

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

/** Headers that carry a credential whatever their name says: replaced whole. */
const SECRET_HEADER = /^(?:cookie|set-cookie)$/i;

/**
 * Headers as they may be logged (a line's `headers` field): a header named like a credential
 * (`authorization`, `x-api-key`, `cookie`, `webhook-signature`...) replaced whole, and in every other
 * one the service's keys and tokens (redactSecrets), whatever the header is called.
 */
export function redactHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    if (SECRET_HEADER.test(name) || SECRET_NAME.test(name)) out[name] = REDACTED;
    else if (Array.isArray(value)) out[name] = value.map((v) => redactSecrets(String(v)));
    else out[name] = redactSecrets(String(value));
  }
  return out;
}

/** pino's error fields, with keys and tokens (redactSecrets) out of the message and the stack. */
export function errorSerializer(error: Error): ReturnType<typeof stdSerializers.err> {
  const out = stdSerializers.err(error);
  if (typeof out.message === 'string') out.message = redactSecrets(out.message);
  if (typeof out.stack === 'string') out.stack = redactSecrets(out.stack);
  return out;
}

/**
 * What every pino logger of the service adds to its options: errors serialized without keys or tokens,
 * and a log line's text (its message and format arguments) passed through redactSecrets. Fields a line
 * adds itself are its own business: a URL goes through redactUrl before it is logged.
 */
export const LOG_REDACTION = {
  serializers: { err: errorSerializer, headers: redactHeaders },
  hooks: {
    logMethod(this: unknown, args: unknown[], method: (...args: unknown[]) => void): void {
      method.apply(
        this,
        args.map((arg) => (typeof arg === 'string' ? redactSecrets(arg) : arg)),
      );
    },
  },
} as const;
