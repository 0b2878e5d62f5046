/*
 * How long a request may take to arrive (REQUEST_BODY_TIMEOUT_SECONDS): one bound, from a request's
 * first byte to its last, for the API, MCP, OAuth and the pages alike, since they share one Node HTTP
 * server. A client that trickles its headers or its body (a byte every few seconds) would otherwise
 * hold a connection, and a request in the app, for as long as it likes.
 *
 * Node's HTTP server does the bounding (`requestTimeout`, `headersTimeout`): every
 * `connectionsCheckingInterval` it looks at the connections whose request has not arrived in full,
 * and those past the bound get `clientError` ERR_HTTP_REQUEST_TIMEOUT, which `clientErrorHandler`
 * (errors.ts) answers with a 408 problem and the connection closed. Once a request has arrived it is
 * out of the check: the answer may take as long as it takes (an MCP stream, a slow download), and an
 * idle keep-alive connection is `keepAliveTimeout`'s business. A connection's first request counts
 * from the connection itself, so a connection that sends nothing is closed after the same bound.
 */

/** The check runs at most this often apart: a request is answered 408 at most a second after its bound. */
const MAX_CHECK_EVERY_MS = 1_000;

/** The fastify options that bound a request's arrival to `seconds`. */
export function requestArrivalOptions(seconds: number): {
  requestTimeout: number;
  http: { headersTimeout: number; connectionsCheckingInterval: number };
} {
  const ms = seconds * 1000;
  return {
    requestTimeout: ms,
    // Headers within the same bound (Node refuses a headers timeout longer than the request's).
    http: { headersTimeout: ms, connectionsCheckingInterval: Math.min(MAX_CHECK_EVERY_MS, ms / 4) },
  };
}
