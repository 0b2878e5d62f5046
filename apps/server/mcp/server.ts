import {
  type CacheHint,
  type CallToolResult,
  ProtocolError,
  ProtocolErrorCode,
  Server,
  type Tool,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { DomainError, type ErrorCode } from '../../../domain/errors.ts';
import { isId } from '../../../domain/input.ts';
import { isDatabaseUnavailable } from '../../../infra/db/unavailable.ts';
import { type Call, type LimitDecision, type Subject, unwrap } from '../../application/call.ts';
import { parameterError } from '../../application/contract.ts';
import type { Application } from '../../application/index.ts';
import type { RequestPrincipal } from '../http/auth.ts';
import { registerCompletions } from './completions.ts';
import { registerPrompts } from './prompts.ts';
import { registerResources } from './resources.ts';
import { registerSessionSubscriptions } from './subscriptions.ts';
import {
  argumentErrors,
  domainInfo,
  internalFailure,
  protectedLinksRefusal,
  refusal,
  type ToolFailure,
  unavailableFailure,
  withStructuredError,
} from './tool-errors.ts';
import { type McpTool, mcpTools, type ToolContext } from './tools.ts';

/*
 * One MCP server per HTTP request, for either protocol era: a 2026-07-28 request (no handshake, the
 * per-request `_meta` envelope) or a 2025-era one (stateless Streamable HTTP after `initialize`). It is
 * the SDK's low-level `Server` with two handlers rather than `McpServer`: the tool set depends on the grant (a read-only grant does not
 * see the write tools), arguments are validated here so that a bad one is an `invalid_request` tool
 * error naming each parameter (and recorded in the activity log like every other call), and the JSON
 * Schemas are computed once at start instead of on every tools/list.
 */

const SERVER_INFO = { name: 'content-service', title: 'Content Service', version: '1.0.0' };

/** The account's limits as this server is configured: what the instructions and tool texts state. */
export type McpLimits = { requestsPerMinute: number; editsPerDay: number };

function instructionsFor(limits: McpLimits): string {
  return (
    'Content Service: the websites of one account, their articles, backlinks and monthly statistics, and ' +
    'article edits. Start with list_sites to get site ids, then list_articles, list_backlinks or get_stats for ' +
    'a site. Lists are paginated: when next_page is not null, call the same tool with page: next_page. Dates ' +
    'are UTC calendar dates YYYY-MM-DD. Before editing an article call get_article and keep every element ' +
    `carrying data-service-protected exactly as it is. Limits: ${limits.requestsPerMinute} requests per ` +
    `minute and ${limits.editsPerDay} article edits per UTC day for the whole account.`
  );
}

/** What the tools, resources, prompts and completions share across requests. */
export type McpServices = {
  application: Application;
  log: {
    error(obj: object, msg: string): void;
    warn(obj: object, msg: string): void;
    info(obj: object, msg: string): void;
  };
};

/** The protocol era a server instance serves: `modern` is 2026-07-28, `legacy` the 2025 handshake era. */
export type McpEra = 'legacy' | 'modern';

/**
 * Cache hints of the 2026-07-28 revision, for the only results it makes cacheable here. server/discover
 * (versions, capabilities, instructions) is the same for every caller: public. tools/list depends on the
 * caller's grant (a read-only grant does not see the write tools): private, never shared across callers.
 * Tool call results carry no hint: the revision does not make them cacheable, and every one depends on the
 * caller's account. 2025-era answers never carry hints.
 */
export const CACHE_HINTS = {
  'server/discover': { ttlMs: 60 * 60 * 1000, cacheScope: 'public' },
  'tools/list': { ttlMs: 5 * 60 * 1000, cacheScope: 'private' },
  // The same templates and prompts for every caller.
  'resources/templates/list': { ttlMs: 60 * 60 * 1000, cacheScope: 'public' },
  'prompts/list': { ttlMs: 60 * 60 * 1000, cacheScope: 'public' },
  // The caller's account's sites and content, which change at any time: not to be kept.
  'resources/list': { ttlMs: 0, cacheScope: 'private' },
  'resources/read': { ttlMs: 0, cacheScope: 'private' },
} as const satisfies Record<string, CacheHint>;

/** The HTTP request a server answers: who calls, its id, and its per-request limits. */
export type McpRequest = {
  principal: RequestPrincipal;
  requestId: string;
  /** The client's own X-Request-Id, if a valid one: for the activity record only. */
  clientRequestId: string | null;
  /** States an edit-limit decision in the response's RateLimit fields. */
  publishEdits: (decision: LimitDecision) => void;
  /** Set when the request is over the account's rate limit: a tool call then answers with this refusal. */
  refusal: DomainError | null;
  /** Told the code of a tool call's error result (the refusals counter). */
  onRefusal?: (code: ErrorCode) => void;
  /**
   * The 2025-era session the request carries (`Mcp-Session-Id`), found to be the caller's; null or absent
   * without one. What resources/subscribe and resources/unsubscribe act on.
   */
  session?: string | null;
};

type ListedTool = { tool: McpTool; definition: Tool };

/** What every request's server states and offers: its instructions and the tools' definitions. */
export type McpCatalogue = { instructions: string; listed: readonly ListedTool[] };

/**
 * The instructions and the tool definitions, computed once: what initialize and tools/list answer
 * (minus the write tools for a read grant), with the limits as configured.
 */
export function catalogue(limits: McpLimits, tools: readonly McpTool[] = mcpTools): McpCatalogue {
  const edits = `Counts as one of the account’s ${limits.editsPerDay} article edits per UTC day.`;
  const listed = tools.map((tool) => ({
    tool,
    definition: {
      name: tool.name,
      title: tool.title,
      description: tool.countsAsEdit ? `${tool.description} ${edits}` : tool.description,
      inputSchema: toolJsonSchema(tool.input, 'input') as Tool['inputSchema'],
      outputSchema: toolJsonSchema(tool.output, 'output') as Tool['outputSchema'],
      annotations: { title: tool.title, ...tool.annotations },
    },
  }));
  return { instructions: instructionsFor(limits), listed };
}

/** A string argument that names a site or an article, for the activity record of a call refused before it ran. */
function idArgument(args: Record<string, unknown> | undefined, name: string): string | null {
  const value = args?.[name];
  return isId(value) ? value : null;
}

/**
 * The server of one request. `era` decides one thing the tools do differently: on the 2026-07-28 era a
 * failed call also carries its code and detail in `structuredContent` (the specification and the SDK's
 * 2.x client no longer check an error result against the output schema); on the 2025 era they travel in
 * `_meta` only, as 1.x clients would reject them there.
 */
export function createMcpServer(
  services: McpServices,
  { instructions, listed }: McpCatalogue,
  request: McpRequest,
  era: McpEra,
): Server {
  const { principal } = request;
  const visible = listed.filter(({ tool }) => tool.scope === 'read' || principal.scope === 'write');
  const byName = new Map(listed.map((entry) => [entry.tool.name, entry]));
  const server = new Server(SERVER_INFO, {
    capabilities: {
      tools: { listChanged: false },
      // Subscriptions: the 2026-07-28 revision's subscriptions/listen; the 2025 era's resources/subscribe
      // within a session (subscriptions.ts).
      resources: { listChanged: false, subscribe: true },
      prompts: { listChanged: false },
      completions: {},
    },
    instructions,
    cacheHints: CACHE_HINTS,
  });

  const served = { services, request };
  registerResources(server, served);
  registerPrompts(server, served);
  registerCompletions(server, served);
  if (era === 'legacy') registerSessionSubscriptions(server, served);

  server.setRequestHandler('tools/list', async () => ({
    tools: visible.map(({ definition }) => definition),
  }));

  server.setRequestHandler('tools/call', async (toolCall): Promise<CallToolResult> => {
    const entry = byName.get(toolCall.params.name);
    if (!entry) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${toolCall.params.name}`);
    }
    const { tool } = entry;
    const args = toolCall.params.arguments;
    const started = performance.now();
    const call: Call = {
      principal: {
        accountId: principal.accountId,
        actor: principal.actor,
        scope: principal.scope,
        origin: 'mcp',
        requestId: request.requestId,
      },
    };
    let subject: Subject = {
      siteId: idArgument(args, 'site_id'),
      articleId: idArgument(args, 'article_id'),
      revision: null,
    };
    const ctx: ToolContext = {
      call,
      application: services.application,
      settle(outcome) {
        subject = {
          siteId: outcome.subject.siteId ?? subject.siteId,
          articleId: outcome.subject.articleId ?? subject.articleId,
          revision: outcome.subject.revision,
        };
        if (outcome.edits) request.publishEdits(outcome.edits);
        return unwrap(outcome);
      },
    };
    // The activity log cannot take more records (the database away long enough to fill its spool):
    // the call is refused before it runs, as the database being away, and not recorded.
    const full = services.application.activity.refusal();
    let status = 200;
    let result: CallToolResult;
    try {
      if (full) throw full;
      if (request.refusal) throw request.refusal;
      if (tool.scope === 'write' && principal.scope !== 'write') {
        throw new DomainError(
          'insufficient_scope',
          `${tool.name} changes articles, and this connection was allowed to read only`,
        );
      }
      const parsed = tool.input.safeParse(args ?? {});
      if (!parsed.success) {
        throw parameterError(
          `The arguments of ${tool.name} are invalid`,
          argumentErrors(parsed.error.issues),
        );
      }
      const out = await tool.call(ctx, parsed.data);
      result = { content: [{ type: 'text', text: out.text }], structuredContent: out.structured };
    } catch (error) {
      const failure = await failureOf(services, call, subject.articleId, error, request.requestId);
      status = failure.status;
      request.onRefusal?.(failure.code);
      result = era === 'modern' ? withStructuredError(failure.result) : failure.result;
    }
    if (!full)
      void services.application.activity.record({
        accountId: principal.accountId,
        source: 'mcp',
        actor: principal.actor,
        operation: tool.operation ?? tool.name,
        subject,
        status,
        requestId: request.requestId,
        clientRequestId: request.clientRequestId,
        durationMs: Math.round(performance.now() - started),
      });
    return server.projectCallToolResult(result, entry.definition.outputSchema);
  });

  return server;
}

async function failureOf(
  services: McpServices,
  call: Call,
  articleId: string | null,
  error: unknown,
  requestId: string,
): Promise<ToolFailure> {
  const info = domainInfo(error);
  if (!info && isDatabaseUnavailable(error)) {
    // Not the call's fault nor a bug: the database is away for a moment. Its words stay in the log.
    services.log.warn(
      { err: error, request_id: requestId },
      'the database is unavailable; MCP tool call answered unavailable',
    );
    return unavailableFailure();
  }
  if (!info) {
    services.log.error({ err: error, request_id: requestId }, 'MCP tool call failed');
    return internalFailure(requestId);
  }
  // A refusal whose reason is kept from the caller (an image URL's host and address): logged here only.
  if (error instanceof Error && error.cause !== undefined) {
    services.log.info(
      { code: info.code, cause: String(error.cause), request_id: requestId },
      'tool call refused',
    );
  }
  if (info.code !== 'protected_links_modified') return refusal(info);
  // The refusal names the blocks; the model gets the exact markup to put back from the current body.
  const current = articleId ? await services.application.articles.get(call, articleId) : undefined;
  return protectedLinksRefusal(info, current?.ok ? current.value.body : null);
}

type JsonSchema = Record<string, unknown>;

/**
 * A zod schema as the JSON Schema a tool advertises: the root is an object schema (as MCP requires),
 * shared components are written inline instead of as `$ref`s (simpler for models and for clients
 * whose validators do not resolve references), without the OpenAPI-only `example` and without the
 * long patterns zod adds beside `format: date`/`date-time` (nor its safe-integer bounds). No `$schema`: the keywords used mean the
 * same in draft-07 and 2020-12 (MCP's default dialect). A nullable field is always `anyOf: [{…}, {type: "null"}]`, never
 * a `type` array (see {@link typeArrayAsAnyOf}).
 */
export function toolJsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const generated = z.toJSONSchema(schema, { io, unrepresentable: 'throw' }) as JsonSchema;
  const defs = (generated.$defs ?? {}) as Record<string, JsonSchema>;
  const clean = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(clean);
    if (node === null || typeof node !== 'object') return node;
    let object = node as JsonSchema;
    const ref = object.$ref;
    if (typeof ref === 'string' && ref.startsWith('#/$defs/')) {
      const { $ref: _ref, ...rest } = object;
      object = { ...defs[ref.slice('#/$defs/'.length)], ...rest };
    }
    const out: JsonSchema = {};
    for (const [key, value] of Object.entries(object)) {
      if (key === '$schema' || key === '$defs' || key === 'example') continue;
      if (key === 'pattern' && (object.format === 'date' || object.format === 'date-time')) continue;
      // zod's integer bounds say nothing a model needs.
      if (key === 'maximum' && value === Number.MAX_SAFE_INTEGER) continue;
      if (key === 'minimum' && value === Number.MIN_SAFE_INTEGER) continue;
      out[key] =
        key === 'properties' && value !== null && typeof value === 'object'
          ? Object.fromEntries(Object.entries(value).map(([name, property]) => [name, clean(property)]))
          : clean(value);
    }
    return typeArrayAsAnyOf(out);
  };
  const result = clean(generated) as JsonSchema;
  if (result.type !== 'object') throw new Error('a tool schema must be an object schema');
  return result;
}

/** Keywords that describe a schema rather than constrain its value: they stay beside the `anyOf`. */
const ANNOTATIONS = new Set([
  'title',
  'description',
  'default',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
]);

/**
 * A `type` array (`["string", "null"]`, which zod 4 writes for a nullable whose inner schema is a bare type)
 * as the equivalent `anyOf` of one single-type branch each, the null branch last: `{type: "string"}` then
 * `{type: "null"}`. Strict tool-schema dialects (Gemini's OpenAPI-3.0 `Schema`, gateways that require a scalar
 * `type`, FastMCP's tool-search labels) reject or degrade a `type` array; every one of them reads this form. The
 * node's constraints go into each non-null branch (a keyword for another type does not apply there), its
 * annotations stay on the node.
 */
function typeArrayAsAnyOf(node: JsonSchema): JsonSchema {
  const types = node.type;
  if (!Array.isArray(types)) return node;
  const annotations: JsonSchema = {};
  const constraints: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key !== 'type') (ANNOTATIONS.has(key) ? annotations : constraints)[key] = value;
  }
  const branches = types
    .filter((type) => type !== 'null')
    .map((type): JsonSchema => ({ type, ...constraints }));
  if (types.includes('null')) branches.push({ type: 'null' });
  return branches.length === 1 ? { ...annotations, ...branches[0] } : { ...annotations, anyOf: branches };
}
