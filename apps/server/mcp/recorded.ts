import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { isDatabaseUnavailable } from '../../../infra/db/unavailable.ts';
import { type Call, type Outcome, type Subject, unwrap } from '../../application/call.ts';
import { statusOf, UNAVAILABLE_DETAIL } from '../http/errors.ts';
import { mcpCall } from './auth.ts';
import type { McpRequest, McpServices } from './server.ts';
import { domainInfo, internalDetail } from './tool-errors.ts';

/*
 * What resource reads, prompts and completions share with tool calls: each runs one use case as the
 * connection's principal (origin `mcp`), is refused when the account is over its request limit, and is
 * recorded in the activity log (source `mcp`, the OAuth client as actor, its operation, the site and
 * article it concerned, the outcome as an HTTP status), refused calls included. A refusal is answered as
 * a JSON-RPC error carrying the same `{code, detail, errors?}` as a tool error: `-32602` for
 * `invalid_request` and `not_found` (a resource read's miss is the SDK's ResourceNotFoundError, whose
 * `data` is `{uri}` as the specification has it), `-32603` for `internal`, `-32000` for the others
 * (`rate_limited`, `unavailable`, ...).
 */

/** The request a server answers and what its handlers share. */
export type Served = { services: McpServices; request: McpRequest };

/** The application call of a request: its principal, through the `mcp` face. */
export function callOf(request: McpRequest): Call {
  return mcpCall(request.principal, request.requestId);
}

/** What a recorded handler gets: its call, and `settle`, which notes a use case's subject and gives its value or throws its refusal. */
export type Recording = { call: Call; settle<T>(outcome: Outcome<T>): T };

/** A JSON-RPC error's `data`: the code, detail and details a tool error carries. */
export type ErrorData = { code: string; detail: string; errors?: readonly Record<string, unknown>[] };

function protocolErrorOf(data: ErrorData, notFound: ((detail: string) => ProtocolError) | undefined) {
  if (data.code === 'not_found' && notFound) return notFound(data.detail);
  const code =
    data.code === 'invalid_request' || data.code === 'not_found'
      ? ProtocolErrorCode.InvalidParams
      : data.code === 'internal'
        ? ProtocolErrorCode.InternalError
        : -32000;
  return new ProtocolError(code, data.detail, data);
}

/** A handler's failure: its status for the record, and the JSON-RPC error to answer. */
function failureOf(
  { services, request }: Served,
  error: unknown,
  notFound: ((detail: string) => ProtocolError) | undefined,
): { status: number; code: string; error: ProtocolError } {
  const info = domainInfo(error);
  let data: ErrorData;
  if (info) data = info;
  else if (isDatabaseUnavailable(error)) {
    services.log.warn(
      { err: error, request_id: request.requestId },
      'the database is unavailable; MCP request answered unavailable',
    );
    data = { code: 'unavailable', detail: UNAVAILABLE_DETAIL };
  } else {
    services.log.error({ err: error, request_id: request.requestId }, 'MCP request failed');
    data = { code: 'internal', detail: internalDetail(request.requestId) };
  }
  const status = statusOf[data.code as keyof typeof statusOf] ?? 500;
  return { status, code: data.code, error: protocolErrorOf(data, notFound) };
}

/**
 * Runs one recorded request: refused at once when the activity log can take no more (not recorded then,
 * as a tool call) or the account is over its limit; its activity record written whatever the outcome.
 * `notFound` makes the JSON-RPC error of a `not_found` refusal (a resource read's).
 */
export async function recorded<T>(
  served: Served,
  operation: string,
  known: Partial<Subject>,
  work: (recording: Recording) => Promise<T>,
  notFound?: (detail: string) => ProtocolError,
): Promise<T> {
  const { services, request } = served;
  const started = performance.now();
  let subject: Subject = {
    siteId: known.siteId ?? null,
    articleId: known.articleId ?? null,
    revision: null,
  };
  const recording: Recording = {
    call: callOf(request),
    settle(outcome) {
      subject = {
        siteId: outcome.subject.siteId ?? subject.siteId,
        articleId: outcome.subject.articleId ?? subject.articleId,
        revision: null,
      };
      return unwrap(outcome);
    },
  };
  const full = services.application.activity.refusal();
  let status = 200;
  try {
    if (full) throw full;
    if (request.refusal) throw request.refusal;
    return await work(recording);
  } catch (error) {
    const failure = failureOf(served, error, notFound);
    status = failure.status;
    request.onRefusal?.(failure.code as Parameters<NonNullable<McpRequest['onRefusal']>>[0]);
    throw failure.error;
  } finally {
    if (!full)
      void services.application.activity.record({
        accountId: request.principal.accountId,
        source: 'mcp',
        actor: request.principal.actor,
        operation,
        subject,
        status,
        requestId: request.requestId,
        clientRequestId: request.clientRequestId,
        durationMs: Math.round(performance.now() - started),
      });
  }
}
