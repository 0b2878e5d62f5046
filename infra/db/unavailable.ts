/*
 * Telling "the database is away for now" from every other failure: a restart, a failover, a
 * connection cut or refused. Such a failure is no fault of the request and no bug; the faces answer
 * it with 503 and Retry-After instead of a 500 (docs/operations.md, "PostgreSQL restarts").
 */

/**
 * SQLSTATEs that mean the server or the connection is going or gone: class 08 (connection exception),
 * 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up, shutting down,
 * recovering), and class 53 (insufficient resources: 53100 disk_full, 53200 out_of_memory, 53300
 * too_many_connections): the server cannot take the statement now, and can once space or memory return.
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[123]|53...)$/;

/** Socket errors of a connection to the database (Node's errno codes). */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** node-postgres's and pg-pool's own words for a connection that broke or never came. */
const DRIVER_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'timeout exceeded when trying to connect',
  'Client was closed and is not queryable',
];

/** How deep `cause` chains are followed (an error wrapped by the application layer). */
const MAX_DEPTH = 4;

/**
 * Whether `error` (or what caused it) says the database cannot be reached right now, as opposed to a
 * statement it refused (a constraint, a syntax error) or a bug.
 */
export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > MAX_DEPTH) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || SOCKET_CODES.has(code))) return true;
  if (DRIVER_MESSAGES.some((m) => error.message.includes(m))) return true;
  if (error instanceof AggregateError && error.errors.some((e) => isDatabaseUnavailable(e, depth + 1)))
    return true;
  return isDatabaseUnavailable(error.cause, depth + 1);
}
