import type { FastifyPluginAsync } from 'fastify';
import {
  EDIT_LIMIT_PER_DAY,
  PER_PAGE_DEFAULT,
  PER_PAGE_MAX,
  REQUESTS_PER_MINUTE,
} from '../../../domain/vocabulary.ts';
import { STATUS_CODES } from '../../../infra/http-status.ts';
import { type Html, html, raw } from '../http/html.ts';
import { installPageHeaders, type WebKit } from './kit.ts';

/*
 * The API reference at `/docs`: the service's own page, rendered on the server from the OpenAPI
 * document the server generates from its routes (apps/server/openapi.ts, `/api/v1/openapi.json`), in
 * the site's layout (its header and navigation when signed in, "Skip to content", light and dark, a
 * phone's width). An introduction (base URL, API keys, problem+json errors, pages of lists, limits),
 * the operations by tag with a filter (a GET form, `?q=`, answered by the server: the pages run no
 * script), and per operation its method and path, summary and description, parameters, request
 * body and responses, each schema with its `$ref`s resolved, as nested lists. Public, like the
 * document. The document does not change while the process runs: the reference is rendered once, by
 * its first reader (`referenceOnce`), and a request only picks the operations its filter keeps.
 */

/** Where the reference is served. */
export const DOCS_PATH = '/docs';
/** Where the machine-readable document is (openapi.ts). */
const DOCUMENT_PATH = '/api/v1/openapi.json';
/** A longer filter is cut to this many characters. */
export const FILTER_MAX = 200;

type Json = Record<string, unknown>;

/** The parts of an OpenAPI 3.1 document the reference reads. */
export type OpenApiDocument = {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: readonly { url: string }[];
  tags?: readonly { name: string; description?: string }[];
  paths?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  components?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
};

/** One operation as rendered: its entry in the navigation, its section, and the text the filter reads. */
export type RenderedOperation = {
  /** The anchor of its section (`op-list_sites`). */
  id: string;
  tag: string;
  method: string;
  path: string;
  summary: string;
  /** Lower-case: method, path, operation id, tag, summary, description and parameter names. */
  haystack: string;
  navItem: Html;
  section: Html;
};

/** The whole reference as rendered once: the introduction and every operation, grouped by tag. */
export type RenderedReference = {
  title: string;
  version: string;
  intro: Html;
  groups: readonly { tag: string; description: string; operations: readonly RenderedOperation[] }[];
  /** How many operations the document has. */
  total: number;
};

const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'options', 'head', 'trace'] as const;
/** JSON Schema's largest safe integers: zod writes them as the bounds of any integer. */
const SAFE_INTEGER = 9007199254740991;

// --- Text ------------------------------------------------------------------------------------------

/**
 * A description's Markdown, the little the document uses: `code`, **strong**, paragraphs. Escaped
 * first; no links, no raw HTML.
 */
export function markdownInline(text: string): Html {
  const escaped = htmlEscape(text);
  const out = escaped
    .replace(/`([^`]+)`/g, '<code>$1</code>')
    .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>');
  return raw(out);
}

function markdownBlock(text: string): Html {
  const paragraphs = text.split(/\n{2,}/).filter((p) => p.trim() !== '');
  return html`${paragraphs.map((p) => html`<p>${markdownInline(p.trim())}</p>`)}`;
}

function htmlEscape(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

/** An anchor from any text: letters, digits, `_` and `-`. */
function anchor(prefix: string, text: string): string {
  return `${prefix}-${text.replace(/[^A-Za-z0-9_-]+/g, '-')}`;
}

/** A value as JSON on one line, cut to `max` characters. */
function jsonShort(value: unknown, max = 160): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

// --- The document -----------------------------------------------------------------------------------

/** The object a local `$ref` (`#/components/schemas/Article`) points at, or undefined. */
function resolvePointer(doc: OpenApiDocument, ref: string): Json | undefined {
  if (!ref.startsWith('#/')) return undefined;
  let at: unknown = doc;
  for (const part of ref.slice(2).split('/')) {
    const key = part.replaceAll('~1', '/').replaceAll('~0', '~');
    if (at === null || typeof at !== 'object') return undefined;
    at = (at as Json)[key];
  }
  return at !== null && typeof at === 'object' ? (at as Json) : undefined;
}

/** A `$ref`'d object (a parameter, a response, a header) as what it points at; any other as it is. */
function deref(doc: OpenApiDocument, value: unknown): Json {
  const object = (value ?? {}) as Json;
  return typeof object.$ref === 'string' ? (resolvePointer(doc, object.$ref) ?? {}) : object;
}

const refName = (ref: string): string => ref.split('/').pop() ?? ref;

/** A path that may break before each of its inner `/` (a phone's width), and only there. */
function pathText(path: string): Html {
  return html`${path.split('/').map((part, i) => (i < 2 ? `${i === 0 ? '' : '/'}${part}` : html`<wbr>/${part}`))}`;
}

// --- Schemas ----------------------------------------------------------------------------------------

type SchemaContext = {
  doc: OpenApiDocument /** The `$ref`s being expanded (a cycle is a link). */;
  path: readonly string[];
};

/** What a schema is, read once: its type in words, the facts under it and what it nests. */
type SchemaView = {
  type: Html;
  nullable: boolean;
  description: string | undefined;
  facts: Html[];
  /** Nested: an object's properties, an array's items, a choice's alternatives. */
  nested: Html | null;
};

const isNullType = (schema: Json): boolean => schema.type === 'null';

function viewOf(schema: Json, ctx: SchemaContext): SchemaView {
  if (typeof schema.$ref === 'string') {
    const ref = schema.$ref;
    const name = refName(ref);
    const target = resolvePointer(ctx.doc, ref);
    if (!target || ctx.path.includes(ref)) {
      return {
        type: html`<span class="schema-name">${name}</span> (as above)`,
        nullable: false,
        description: typeof schema.description === 'string' ? schema.description : undefined,
        facts: [],
        nested: null,
      };
    }
    const inner = viewOf(target, { ...ctx, path: [...ctx.path, ref] });
    return {
      ...inner,
      type: html`<span class="schema-name">${name}</span> ${inner.type}`,
      description: typeof schema.description === 'string' ? schema.description : inner.description,
    };
  }
  const description = typeof schema.description === 'string' ? schema.description : undefined;
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key];
    if (!Array.isArray(options)) continue;
    const others = (options as Json[]).filter((o) => !isNullType(o));
    const nullable = others.length < options.length;
    if (others.length === 1) {
      const inner = viewOf(others[0] as Json, ctx);
      return {
        ...inner,
        nullable: inner.nullable || nullable,
        description: description ?? inner.description,
        facts: [...ownFacts(schema), ...inner.facts],
      };
    }
    return {
      type: html`${key === 'oneOf' ? 'exactly one of' : 'one of'} ${others.length} shapes`,
      nullable,
      description,
      facts: ownFacts(schema),
      nested: html`<ol class="schema-choices">${others.map(
        (option) => html`<li>${schemaItem(null, option, false, ctx)}</li>`,
      )}</ol>`,
    };
  }
  if (Array.isArray(schema.allOf)) {
    return {
      type: html`all of ${schema.allOf.length} shapes`,
      nullable: false,
      description,
      facts: ownFacts(schema),
      nested: html`<ol class="schema-choices">${(schema.allOf as Json[]).map(
        (part) => html`<li>${schemaItem(null, part, false, ctx)}</li>`,
      )}</ol>`,
    };
  }
  const types = (Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []) as string[];
  const enumValues = Array.isArray(schema.enum) ? (schema.enum as unknown[]) : undefined;
  const nullable = types.includes('null') || Boolean(enumValues?.includes(null));
  const named = types.filter((t) => t !== 'null');
  const facts = ownFacts(schema);
  if (named.includes('array') || schema.items) {
    const items = (schema.items ?? {}) as Json;
    const inner = viewOf(items, ctx);
    return {
      type: html`array of ${inner.type}`,
      nullable,
      description,
      facts: [...facts, ...inner.facts.map((f) => html`items: ${f}`)],
      nested: inner.nested,
    };
  }
  const properties = schema.properties as Record<string, Json> | undefined;
  const extra = schema.additionalProperties;
  if (properties && Object.keys(properties).length > 0) {
    const required = new Set((schema.required as string[] | undefined) ?? []);
    return {
      type: html`object`,
      nullable,
      description,
      facts,
      nested: html`<ul class="schema">${Object.entries(properties).map(
        ([name, property]) => html`<li>${schemaItem(name, property, required.has(name), ctx)}</li>`,
      )}${
        extra && typeof extra === 'object' && Object.keys(extra).length > 0
          ? html`<li>${schemaItem('(any other name)', extra as Json, false, ctx)}</li>`
          : ''
      }</ul>`,
    };
  }
  if (named.includes('object') || extra !== undefined) {
    const values = extra && typeof extra === 'object' ? (extra as Json) : {};
    if (Object.keys(values).length > 0) {
      const inner = viewOf(values, ctx);
      return {
        type: html`object of names to ${inner.type}`,
        nullable,
        description,
        facts,
        nested: inner.nested,
      };
    }
    return { type: html`object`, nullable, description, facts, nested: null };
  }
  const format =
    typeof schema.format === 'string' ? html` <span class="schema-format">(${schema.format})</span>` : '';
  const typeText = named.length > 0 ? named.join(' or ') : enumValues ? '' : 'any value';
  return {
    type: html`${typeText}${format}`,
    nullable,
    description,
    facts,
    nested: null,
  };
}

/** A schema's own constraints, in words: its values, lengths, bounds, pattern, default and example. */
function ownFacts(schema: Json): Html[] {
  const facts: Html[] = [];
  const values = Array.isArray(schema.enum) ? (schema.enum as unknown[]).filter((v) => v !== null) : null;
  if (values && values.length > 0) {
    facts.push(
      html`one of ${values.map((v, i) => html`${i > 0 ? ', ' : ''}<code>${jsonShort(v, 80)}</code>`)}`,
    );
  }
  if ('const' in schema) facts.push(html`always <code>${jsonShort(schema.const, 80)}</code>`);
  const range = (min: unknown, max: unknown, unit: string): void => {
    const lo = typeof min === 'number' && min > -SAFE_INTEGER ? min : undefined;
    const hi = typeof max === 'number' && max < SAFE_INTEGER ? max : undefined;
    if (lo !== undefined && hi !== undefined) facts.push(html`${lo} to ${hi}${unit}`);
    else if (lo !== undefined && !(lo === 0 && unit === '')) facts.push(html`at least ${lo}${unit}`);
    else if (hi !== undefined) facts.push(html`at most ${hi}${unit}`);
  };
  range(schema.minLength, schema.maxLength, ' characters');
  range(schema.minimum, schema.maximum, '');
  range(schema.minItems, schema.maxItems, ' items');
  if (typeof schema.exclusiveMinimum === 'number') facts.push(html`above ${schema.exclusiveMinimum}`);
  if (typeof schema.exclusiveMaximum === 'number') facts.push(html`below ${schema.exclusiveMaximum}`);
  // A format says it better than its long pattern (a date-time's is 300 characters).
  if (typeof schema.pattern === 'string' && typeof schema.format !== 'string') {
    facts.push(html`pattern <code>${schema.pattern}</code>`);
  }
  if ('default' in schema) facts.push(html`default <code>${jsonShort(schema.default, 80)}</code>`);
  if ('example' in schema) facts.push(html`example <code>${jsonShort(schema.example)}</code>`);
  else if (Array.isArray(schema.examples) && schema.examples.length > 0) {
    facts.push(html`example <code>${jsonShort(schema.examples[0])}</code>`);
  }
  return facts;
}

/** A schema with its name (a property's; null for a body or an alternative), flags, facts and what it nests. */
function schemaItem(name: string | null, schema: Json, required: boolean, ctx: SchemaContext): Html {
  const view = viewOf(schema, ctx);
  return html`<div class="schema-line">${name === null ? '' : html`<code class="schema-prop">${name}</code> `}<span class="schema-type">${view.type}</span>${
    required ? html` <span class="tag">required</span>` : ''
  }${view.nullable ? html` <span class="tag">nullable</span>` : ''}</div>${
    view.description ? html`<div class="schema-desc">${markdownInline(view.description)}</div>` : ''
  }${view.facts.length > 0 ? html`<div class="schema-facts">${view.facts.map((f, i) => html`${i > 0 ? ' · ' : ''}${f}`)}</div>` : ''}${
    view.nested ?? ''
  }`;
}

/** A body's schema: its line, then its properties as a nested list. */
export function schemaBlock(doc: OpenApiDocument, schema: Json): Html {
  return html`<div class="schema-block">${schemaItem(null, schema, false, { doc, path: [] })}</div>`;
}

// --- Operations -------------------------------------------------------------------------------------

/** RFC 9110's names where Node's are older ones. */
const STATUS_NAMES: Readonly<Record<string, string>> = {
  '413': 'Content Too Large',
  '422': 'Unprocessable Content',
};

function statusText(status: string): string {
  return (
    STATUS_NAMES[status] ?? STATUS_CODES[Number(status)] ?? (status === 'default' ? 'Any other status' : '')
  );
}

function parametersTable(doc: OpenApiDocument, parameters: readonly Json[]): Html {
  if (parameters.length === 0) return html`<p class="muted">No parameters.</p>`;
  const rows = parameters.map((p) => {
    const schema = (p.schema ?? {}) as Json;
    const view = viewOf(schema, { doc, path: [] });
    // A parameter every operation shares is described once, in the introduction.
    if (typeof p.shared === 'string') {
      return html`<tr>
<td data-label="Name"><code>${String(p.name)}</code></td>
<td data-label="In">${String(p.in)}</td>
<td data-label="Required">${p.required ? 'yes' : 'no'}</td>
<td data-label="Type">${view.type}</td>
<td data-label="Description">Taken by every operation: see <a href="#${anchor('param', p.shared)}">${String(p.name)}</a>.</td>
</tr>`;
    }
    const description = typeof p.description === 'string' ? p.description : view.description;
    return html`<tr>
<td data-label="Name"><code>${String(p.name)}</code></td>
<td data-label="In">${String(p.in)}</td>
<td data-label="Required">${p.required ? 'yes' : 'no'}</td>
<td data-label="Type">${view.type}${view.nullable ? html` <span class="tag">nullable</span>` : ''}</td>
<td data-label="Description">${description ? markdownInline(description) : ''}${
      view.facts.length > 0
        ? html`<div class="schema-facts">${view.facts.map((f, i) => html`${i > 0 ? ' · ' : ''}${f}`)}</div>`
        : ''
    }${'example' in p ? html`<div class="schema-facts">example <code>${jsonShort(p.example)}</code></div>` : ''}</td>
</tr>`;
  });
  return html`<div class="api-table"><table class="api-params">
<thead><tr><th scope="col">Name</th><th scope="col">In</th><th scope="col">Required</th><th scope="col">Type</th><th scope="col">Description</th></tr></thead>
<tbody>${rows}</tbody></table></div>`;
}

function contentBlocks(doc: OpenApiDocument, content: Json | undefined): Html {
  if (!content) return html``;
  return html`${Object.entries(content).map(([type, media]) => {
    const schema = (media as Json).schema as Json | undefined;
    return html`<p class="media-type">Content type <code>${type}</code></p>${
      schema ? schemaBlock(doc, schema) : ''
    }`;
  })}`;
}

function headerLinks(headers: Json | undefined): Html {
  const names = Object.keys(headers ?? {});
  if (names.length === 0) return html``;
  return html`<p class="response-headers">Headers: ${names.map(
    (name, i) => html`${i > 0 ? ', ' : ''}<a href="#${anchor('header', name)}"><code>${name}</code></a>`,
  )}</p>`;
}

/**
 * The responses: each success and each error of the operation's own in full; the errors every operation
 * shares (`components.responses`, problem+json) in one line, each to its row in the introduction.
 */
function responsesList(doc: OpenApiDocument, responses: Json): Html {
  const shared: string[] = [];
  const items: Html[] = [];
  for (const [status, value] of Object.entries(responses)) {
    if (typeof (value as Json).$ref === 'string' && Number(status) >= 400) {
      shared.push(status);
      continue;
    }
    const response = deref(doc, value);
    const given = typeof response.description === 'string' ? response.description : '';
    // @fastify/swagger's placeholder for a response without one says no more than the status.
    const description = given === 'OK' || given === statusText(status) ? '' : given;
    items.push(html`<li class="response">
<div class="response-status"><strong>${status}</strong> ${statusText(status)}</div>
${description ? html`<div class="schema-desc">${markdownInline(description)}</div>` : ''}
${headerLinks(response.headers as Json | undefined)}
${contentBlocks(doc, response.content as Json | undefined)}</li>`);
  }
  return html`<ul class="responses">${items}</ul>${
    shared.length > 0
      ? html`<p class="shared-errors">Errors, as <a href="#errors">problem+json</a>: ${shared.map(
          (status, i) =>
            html`${i > 0 ? ', ' : ''}<a href="#${anchor('error', status)}">${status} ${statusText(status)}</a>`,
        )}.</p>`
      : ''
  }`;
}

function renderOperation(
  doc: OpenApiDocument,
  method: string,
  path: string,
  op: Json,
  tag: string,
): RenderedOperation {
  const operationId = typeof op.operationId === 'string' ? op.operationId : `${method}-${path}`;
  const id = anchor('op', operationId);
  const summary = typeof op.summary === 'string' ? op.summary : '';
  const description = typeof op.description === 'string' ? op.description : '';
  const parameters = ((op.parameters as unknown[] | undefined) ?? []).map((p) => {
    const ref = (p as Json).$ref;
    return typeof ref === 'string' ? { ...deref(doc, p), shared: refName(ref) } : deref(doc, p);
  });
  const body = op.requestBody ? deref(doc, op.requestBody) : null;
  const upper = method.toUpperCase();
  const methodTag = html`<span class="method method-${method}">${upper}</span>`;
  const section = html`<section class="card api-op" id="${id}" aria-labelledby="${id}-title">
<h3 id="${id}-title">${methodTag} <code class="api-path">${pathText(path)}</code></h3>
${summary ? html`<p class="op-summary">${markdownInline(summary)}</p>` : ''}
${description ? html`<div class="op-description">${markdownBlock(description)}</div>` : ''}
<p class="muted op-id">Operation id <code>${operationId}</code> · needs an <a href="#authentication">API key</a></p>
<h4>Parameters</h4>
${parametersTable(doc, parameters)}
${
  body
    ? html`<h4>Request body${body.required ? ' (required)' : ''}</h4>
${typeof body.description === 'string' ? html`<p>${markdownInline(body.description)}</p>` : ''}
${contentBlocks(doc, body.content as Json | undefined)}`
    : ''
}
<h4>Responses</h4>
${responsesList(doc, (op.responses ?? {}) as Json)}
</section>`;
  const navItem = html`<li><a href="#${id}">${methodTag} <span class="api-path">${pathText(path)}</span></a>${
    summary ? html`<span class="nav-summary">${summary}</span>` : ''
  }</li>`;
  const haystack = [
    upper,
    path,
    operationId,
    tag,
    summary,
    description,
    ...parameters.map((p) => String(p.name ?? '')),
  ]
    .join('\n')
    .toLowerCase();
  return { id, tag, method: upper, path, summary, haystack, navItem, section };
}

// --- The introduction -------------------------------------------------------------------------------

function introduction(doc: OpenApiDocument): Html {
  const base = (doc.servers?.[0]?.url ?? '').replace(/\/+$/, '');
  const responses = (doc.components?.responses ?? {}) as Record<string, Json>;
  const statuses = sharedResponseStatuses(doc);
  const errorRows = Object.entries(responses)
    .map(([name, response]) => ({
      name,
      status: statuses.get(name) ?? '',
      description: String(response.description ?? ''),
    }))
    .filter((row) => row.status !== '')
    .sort((a, b) => Number(a.status) - Number(b.status));
  const problem = doc.components?.schemas?.Problem as Json | undefined;
  const headers = (doc.components?.headers ?? {}) as Record<string, Json>;
  return html`<section class="card api-intro" aria-labelledby="intro-title">
<h2 id="intro-title">Introduction</h2>
<p>${doc.info.title} ${doc.info.version}: the websites, articles, backlinks and period statistics of an account, over HTTP and JSON. This page is made from the OpenAPI 3.1 document the service generates from its routes, <a href="${DOCUMENT_PATH}"><code>${DOCUMENT_PATH}</code></a> (no key needed), for code generators and API tools. The longer guide to the API (keys, lists, revisions, protected links, limits, errors) is <code>docs/api.md</code> in the service's source; this server does not serve it.</p>
<h3 id="base-url">Base URL</h3>
<p>Every path below starts with <code>/api/v1</code> on <code>${base || 'this server'}</code>: for example <code>${base}/api/v1/sites</code>.</p>
<h3 id="authentication">Authentication</h3>
<p>Every operation needs an API key, sent as <code>Authorization: Bearer &lt;key&gt;</code> or <code>X-API-Key: &lt;key&gt;</code>, never in the query string. The account holder creates keys on the <a href="/connect">Connect Site page</a> (sign-in needed); a key is shown once. A <code>read</code> key can call every GET; a <code>write</code> key can also edit. Without a usable key the answer is 401 with <code>WWW-Authenticate</code>; a read key that writes gets 403.</p>
<h3 id="errors">Errors</h3>
<p>Every error is <code>application/problem+json</code> (RFC 9457) with a stable <code>code</code> to act on and the <code>request_id</code> to quote to support; an invalid parameter is a 400 whose <code>errors</code> names each one.</p>
${
  errorRows.length > 0
    ? html`<div class="api-table"><table class="api-errors">
<thead><tr><th scope="col">Status</th><th scope="col">When</th></tr></thead>
<tbody>${errorRows.map(
        (row) =>
          html`<tr id="${anchor('error', row.status)}"><td data-label="Status"><strong>${row.status}</strong> ${statusText(row.status)}</td><td data-label="When">${markdownInline(row.description)}</td></tr>`,
      )}</tbody></table></div>`
    : ''
}
${problem ? html`<p>A problem's fields:</p>${schemaBlock(doc, problem)}` : ''}
<h3 id="pagination">Pagination</h3>
<p>A list takes <code>page</code> (from 1) and <code>per_page</code> (1 to ${PER_PAGE_MAX}, default ${PER_PAGE_DEFAULT}). Its body is <code>{data, meta, links}</code>: <code>meta</code> has the total and the page, <code>links</code> the addresses of the <code>self</code>, <code>first</code>, <code>last</code>, <code>prev</code> and <code>next</code> pages, which also come in an RFC 8288 <code>Link</code> header. Dates are <code>YYYY-MM-DD</code>, times RFC 3339, all UTC.</p>
${sharedParameters(doc)}
<h3 id="rate-limits">Rate limits</h3>
<p>${REQUESTS_PER_MINUTE} requests per minute per account by default, shared by its keys and assistants, and ${EDIT_LIMIT_PER_DAY} article edits a day (the operator can set others). Every answer states the limits in the <code>RateLimit-Policy</code> and <code>RateLimit</code> headers; a 429 says how long to wait in <code>Retry-After</code>.</p>
${
  Object.keys(headers).length > 0
    ? html`<h3 id="headers">Response headers</h3>
<dl class="api-headers">${Object.entries(headers).map(
        ([name, header]) =>
          html`<dt id="${anchor('header', name)}"><code>${name}</code></dt><dd>${markdownInline(String(header.description ?? ''))}</dd>`,
      )}</dl>`
    : ''
}
</section>`;
}

/** The parameters every operation takes (`components.parameters`), described once. */
function sharedParameters(doc: OpenApiDocument): Html {
  const parameters = Object.entries((doc.components?.parameters ?? {}) as Record<string, Json>);
  if (parameters.length === 0) return html``;
  return html`<h3 id="shared-parameters">Parameters of every operation</h3>
<dl class="api-headers">${parameters.map(
    ([name, p]) =>
      html`<dt id="${anchor('param', name)}"><code>${String(p.name)}</code> (${String(p.in)})</dt><dd>${markdownInline(String(p.description ?? ''))}</dd>`,
  )}</dl>`;
}

/** The shared responses (`components.responses`) by the status the operations give them for. */
function sharedResponseStatuses(doc: OpenApiDocument): Map<string, string> {
  const statuses = new Map<string, string>();
  for (const item of Object.values(doc.paths ?? {})) {
    for (const method of METHODS) {
      const responses = ((item[method] as Json | undefined)?.responses ?? {}) as Record<string, Json>;
      for (const [status, response] of Object.entries(responses)) {
        if (typeof response.$ref === 'string') statuses.set(refName(response.$ref), status);
      }
    }
  }
  return statuses;
}

// --- The reference ----------------------------------------------------------------------------------

/** Renders the whole reference from the document: done once per process (`referenceOnce`). */
export function renderReference(doc: OpenApiDocument): RenderedReference {
  const declared = (doc.tags ?? []).map((t) => ({ tag: t.name, description: t.description ?? '' }));
  const groups = new Map<string, { tag: string; description: string; operations: RenderedOperation[] }>(
    declared.map((t) => [t.tag, { ...t, operations: [] }]),
  );
  let total = 0;
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method] as Json | undefined;
      if (!op) continue;
      const tag = ((op.tags as string[] | undefined) ?? [])[0] ?? 'other';
      let group = groups.get(tag);
      if (!group) {
        group = { tag, description: '', operations: [] };
        groups.set(tag, group);
      }
      group.operations.push(renderOperation(doc, method, path, op, tag));
      total += 1;
    }
  }
  return {
    title: doc.info.title,
    version: doc.info.version,
    intro: introduction(doc),
    groups: [...groups.values()].filter((g) => g.operations.length > 0),
    total,
  };
}

/** The filter's words: lower-case, at most FILTER_MAX characters in all. */
export function filterWords(q: string): string[] {
  return q.slice(0, FILTER_MAX).toLowerCase().split(/\s+/).filter(Boolean);
}

/** True when the operation has every word of the filter (in its method, path, id, tag, texts or parameters). */
export function operationMatches(op: Pick<RenderedOperation, 'haystack'>, words: readonly string[]): boolean {
  return words.every((word) => op.haystack.includes(word));
}

const tagTitle = (tag: string): string => tag.charAt(0).toUpperCase() + tag.slice(1);

/** The page's body for a filter (`''`: every operation, with the introduction). */
export function referenceBody(ref: RenderedReference, q: string): Html {
  const query = q.trim().slice(0, FILTER_MAX);
  const words = filterWords(query);
  const groups = ref.groups
    .map((g) => ({ ...g, operations: g.operations.filter((op) => operationMatches(op, words)) }))
    .filter((g) => g.operations.length > 0);
  const shown = groups.reduce((n, g) => n + g.operations.length, 0);
  const filtered = words.length > 0;
  const nav = html`<nav class="card api-nav" aria-labelledby="api-nav-title">
<h2 id="api-nav-title">Operations</h2>
<form class="api-filter" role="search" method="get" action="${DOCS_PATH}" aria-label="Filter operations">
<label for="api-filter">Filter operations</label>
<div class="api-filter-row"><input type="search" id="api-filter" name="q" value="${query}" maxlength="${FILTER_MAX}" autocomplete="off" placeholder="e.g. articles">
<button type="submit">Filter</button></div>
</form>
${
  filtered
    ? html`<p id="api-filter-count" role="status">${
        shown === 0
          ? html`No operation matches “${query}”.`
          : html`${shown} of ${ref.total} operations match “${query}”.`
      } <a href="${DOCS_PATH}">Show all</a></p>`
    : ''
}
${groups.map(
  (g) => html`<h3 class="api-nav-tag"><a href="#${anchor('tag', g.tag)}">${tagTitle(g.tag)}</a></h3>
<ul class="api-nav-ops">${g.operations.map((op) => op.navItem)}</ul>`,
)}
</nav>`;
  const operations = html`<div class="api-ops" id="operations">
${filtered ? '' : ref.intro}
${
  filtered && shown === 0
    ? html`<div class="card"><p>No operation matches “${query}”. Try a word of a path (<code>articles</code>), a method (<code>PUT</code>) or a tag (<code>webhooks</code>), or <a href="${DOCS_PATH}">show every operation</a>.</p></div>`
    : ''
}
${groups.map(
  (
    g,
  ) => html`<section class="api-tag" id="${anchor('tag', g.tag)}" aria-labelledby="${anchor('tag', g.tag)}-title">
<h2 id="${anchor('tag', g.tag)}-title">${tagTitle(g.tag)}</h2>
${g.description ? html`<p class="muted">${markdownInline(g.description)}</p>` : ''}
${g.operations.map((op) => op.section)}
</section>`,
)}
</div>`;
  return html`<div class="api-reference">
<h1>API reference</h1>
<p class="muted">${ref.title} ${ref.version} · <a href="${DOCUMENT_PATH}">OpenAPI document</a>${
    filtered ? html` · <a href="${DOCS_PATH}#intro-title">Introduction</a>` : ''
  }</p>
<div class="api-layout">
${nav}
${operations}
</div>
</div>`;
}

/**
 * The seam between the document and the page: renders the reference from `document()` the first time
 * it is asked for and keeps it for the life of the process (the document is made once from the routes
 * and never changes while it runs).
 */
export function referenceOnce(document: () => OpenApiDocument): () => RenderedReference {
  let rendered: RenderedReference | undefined;
  return () => {
    rendered ??= renderReference(document());
    return rendered;
  };
}

/** `/docs`: public; the account's (or the support staff's) header when signed in. */
export const apiReferencePage: FastifyPluginAsync<{ kit: WebKit; document: () => OpenApiDocument }> = async (
  app,
  { kit, document },
) => {
  installPageHeaders(app);
  const reference = referenceOnce(document);
  app.get(DOCS_PATH, { schema: { hide: true } }, async (request, reply) => {
    const given = (request.query as Record<string, unknown>).q;
    const first = Array.isArray(given) ? given[0] : given;
    const q = typeof first === 'string' ? first : '';
    const session = await kit.sessions.current(request);
    const staff = session ? null : await kit.sessions.currentStaff(request);
    const ref = reference();
    const words = q.trim().slice(0, FILTER_MAX);
    return kit.send(reply, {
      title: words ? `API reference: ${words}` : 'API reference',
      body: referenceBody(ref, q),
      session,
      request,
      wide: true,
      ...(staff ? { staff } : {}),
    });
  });
};
