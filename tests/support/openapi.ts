import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

/*
 * Checks real responses against the service's own OpenAPI 3.1 document: the operation (by matching the
 * concrete path against the document's path templates), the documented response for the status, its
 * content type, the JSON body (ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses, with formats) and the
 * required response headers. Compiled validators are cached per document, so checking hundreds of
 * recorded responses costs little.
 */

// ajv and ajv-formats are CommonJS: under Node's ESM the default import is `module.exports`.
const Ajv2020 = Ajv2020Module.default;
const addFormats = addFormatsModule.default;
type Ajv = InstanceType<typeof Ajv2020>;
type Validator = ReturnType<Ajv['compile']>;

type Json = Record<string, unknown>;

export type OpenApiDoc = {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: { url: string; description?: string }[];
  paths: Record<string, Record<string, unknown>>;
  components?: Record<string, Record<string, unknown>>;
  [key: string]: unknown;
};

/** A response as a test saw it. `path` is the concrete request path (a query string is ignored). */
export type ObservedResponse = {
  method: string;
  path: string;
  status: number;
  headers: Record<string, string | string[] | undefined> | Headers;
  /** The parsed JSON body, or the raw text ('' for none). */
  body: unknown;
};

/** Fetches `<baseUrl>/api/v1/openapi.json` (no key needed) and checks it is an OpenAPI 3.1 document. */
export async function loadOpenApi(baseUrl: string): Promise<OpenApiDoc> {
  const url = `${baseUrl.replace(/\/+$/, '')}/api/v1/openapi.json`;
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  const doc = (await res.json()) as Partial<OpenApiDoc>;
  if (typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.1.') || typeof doc.paths !== 'object') {
    throw new Error(`GET ${url}: not an OpenAPI 3.1 document (openapi: ${String(doc.openapi)})`);
  }
  return doc as OpenApiDoc;
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

type Template = { template: string; regex: RegExp; literals: number };
type Compiled = { ajv: Ajv; id: string; templates: Template[]; validators: Map<string, Validator> };
const compiledDocs = new WeakMap<OpenApiDoc, Compiled>();
let docCounter = 0;

function compiled(doc: OpenApiDoc): Compiled {
  const known = compiledDocs.get(doc);
  if (known) return known;
  const ajv = new Ajv2020({ allErrors: true, strict: false, validateSchema: false });
  addFormats(ajv);
  docCounter += 1;
  const id = `urn:openapi:${docCounter}`;
  // The whole document is one schema resource, so `#/components/schemas/...` resolves inside it.
  ajv.addSchema(doc, id);
  const templates = Object.keys(doc.paths)
    .map((template): Template => {
      const parts = template.split(/(\{[^}/]+\})/);
      const source = parts
        .map((part) => (/^\{[^}/]+\}$/.test(part) ? '([^/]+)' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('');
      return {
        template,
        regex: new RegExp(`^${source}$`),
        literals: parts.filter((p) => !p.startsWith('{')).join('').length,
      };
    })
    // A literal segment wins over a template: /sites/stats before /sites/{id}.
    .sort((a, b) => b.literals - a.literals);
  const result: Compiled = { ajv, id, templates, validators: new Map() };
  compiledDocs.set(doc, result);
  return result;
}

function escapePointer(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

function unescapePointer(token: string): string {
  return token.replaceAll('~1', '/').replaceAll('~0', '~');
}

/** Follows local `$ref`s; returns the object and its JSON pointer in the document. */
function resolve(doc: OpenApiDoc, value: unknown, pointer: string): { value: Json; pointer: string } | null {
  let current = value;
  let at = pointer;
  for (let hops = 0; hops < 20; hops++) {
    if (current === null || typeof current !== 'object') return null;
    const ref = (current as Json).$ref;
    if (typeof ref !== 'string') return { value: current as Json, pointer: at };
    if (!ref.startsWith('#/')) return null;
    at = ref;
    current = ref
      .slice(2)
      .split('/')
      .map(unescapePointer)
      .reduce<unknown>(
        (node, key) => (node && typeof node === 'object' ? (node as Json)[key] : undefined),
        doc,
      );
  }
  return null;
}

/** The operation a concrete request path and method reach, with its path template. */
export function findOperation(
  doc: OpenApiDoc,
  method: string,
  path: string,
): { template: string; operation: Json; pointer: string } | null {
  const m = method.toLowerCase();
  const concrete = requestPath(doc, path);
  for (const { template, regex } of compiled(doc).templates) {
    if (!regex.test(concrete)) continue;
    const item = doc.paths[template];
    const operation = item?.[m];
    if (!METHODS.has(m) || !operation || typeof operation !== 'object') continue;
    return { template, operation: operation as Json, pointer: `#/paths/${escapePointer(template)}/${m}` };
  }
  return null;
}

/** The path part of what a test called, relative to the document's server when that has a base path. */
function requestPath(doc: OpenApiDoc, path: string): string {
  let p = /^https?:\/\//.test(path) ? new URL(path).pathname : (path.split(/[?#]/)[0] ?? path);
  const server = doc.servers?.[0]?.url;
  if (server && /^https?:\/\//.test(server)) {
    const base = new URL(server).pathname.replace(/\/+$/, '');
    if (base && p.startsWith(`${base}/`) && !compiled(doc).templates.some((t) => t.regex.test(p))) {
      p = p.slice(base.length);
    }
  }
  return p;
}

function lowerCaseHeaders(headers: ObservedResponse['headers']): Map<string, string> {
  const out = new Map<string, string>();
  const entries: [string, unknown][] =
    headers instanceof Headers ? [...headers.entries()] : Object.entries(headers);
  for (const [name, value] of entries) {
    if (value === undefined) continue;
    out.set(name.toLowerCase(), Array.isArray(value) ? value.join(', ') : String(value));
  }
  return out;
}

function validatorAt(doc: OpenApiDoc, pointer: string): Validator {
  const c = compiled(doc);
  let validate = c.validators.get(pointer);
  if (!validate) {
    validate = c.ajv.compile({ $ref: `${c.id}${pointer}` });
    c.validators.set(pointer, validate);
  }
  return validate;
}

function schemaErrors(validate: Validator, data: unknown, what: string): string[] {
  if (validate(data)) return [];
  return (validate.errors ?? []).slice(0, 10).map((e) => {
    const where = e.instancePath === '' ? what : `${what} ${e.instancePath}`;
    const extra =
      e.keyword === 'additionalProperties'
        ? ` (${String((e.params as { additionalProperty?: string }).additionalProperty)})`
        : e.keyword === 'enum'
          ? ` (${JSON.stringify((e.params as { allowedValues?: unknown }).allowedValues)})`
          : '';
    return `${where}: ${e.message ?? e.keyword}${extra}`;
  });
}

function isJsonMedia(media: string): boolean {
  return media === 'application/json' || media.endsWith('+json');
}

function mediaEntry(content: Json, media: string): string | undefined {
  if (media in content) return media;
  const wildcard = `${media.split('/')[0]}/*`;
  if (wildcard in content) return wildcard;
  return '*/*' in content ? '*/*' : undefined;
}

function isEmptyBody(body: unknown): boolean {
  return body === undefined || body === null || body === '';
}

/**
 * The ways a response departs from the document: an undocumented path, method or status, a content
 * type the response does not document, a body that fails the schema, a missing required header (or a
 * header that fails its schema). Empty when the response is as documented.
 */
export function validateResponse(doc: OpenApiDoc, response: ObservedResponse): string[] {
  const { method, path, status, body } = response;
  const label = `${method.toUpperCase()} ${path} -> ${status}`;
  const found = findOperation(doc, method, path);
  if (!found) {
    const anyPath = compiled(doc).templates.find((t) => t.regex.test(requestPath(doc, path)));
    return [
      anyPath
        ? `${label}: ${method.toUpperCase()} is not documented for ${anyPath.template}`
        : `${label}: no documented path matches`,
    ];
  }
  const responses = (found.operation.responses ?? {}) as Json;
  const key = [String(status), `${String(status)[0]}XX`, 'default'].find((k) => k in responses);
  if (key === undefined) {
    return [
      `${label}: status ${status} is not documented for ${found.template} (documented: ${Object.keys(responses).join(', ')})`,
    ];
  }
  const documented = resolve(doc, responses[key], `${found.pointer}/responses/${key}`);
  if (!documented) return [`${label}: the documented response ${key} does not resolve`];
  const problems: string[] = [];
  const headers = lowerCaseHeaders(response.headers);

  const content = documented.value.content as Json | undefined;
  const contentType = headers.get('content-type');
  if (content && Object.keys(content).length > 0) {
    const media = contentType?.split(';')[0]?.trim().toLowerCase();
    const entry = media ? mediaEntry(content, media) : undefined;
    if (!media) {
      problems.push(`${label}: no Content-Type; documented: ${Object.keys(content).join(', ')}`);
    } else if (!entry) {
      problems.push(
        `${label}: Content-Type ${media} is not documented (documented: ${Object.keys(content).join(', ')})`,
      );
    } else if (isJsonMedia(media) && (content[entry] as Json | undefined)?.schema !== undefined) {
      let data = body;
      if (typeof data === 'string') {
        try {
          data = JSON.parse(data);
        } catch {
          problems.push(`${label}: the body is not JSON`);
          data = undefined;
        }
      }
      if (data !== undefined) {
        const pointer = `${documented.pointer}/content/${escapePointer(entry)}/schema`;
        problems.push(...schemaErrors(validatorAt(doc, pointer), data, `${label}: body`));
      }
    }
  } else if (!isEmptyBody(body)) {
    problems.push(`${label}: a body was sent where the document describes none`);
  }

  for (const [name, raw] of Object.entries((documented.value.headers ?? {}) as Json)) {
    if (name.toLowerCase() === 'content-type') continue;
    const header = resolve(doc, raw, `${documented.pointer}/headers/${escapePointer(name)}`);
    if (!header) {
      problems.push(`${label}: header ${name} does not resolve`);
      continue;
    }
    const value = headers.get(name.toLowerCase());
    if (value === undefined) {
      if (header.value.required === true) problems.push(`${label}: required header ${name} is missing`);
      continue;
    }
    const schema = header.value.schema as Json | undefined;
    if (!schema) continue;
    const type = resolve(doc, schema, `${header.pointer}/schema`)?.value.type;
    const number = Number(value);
    const numeric =
      (type === 'integer' || type === 'number') && value.trim() !== '' && Number.isFinite(number);
    const data = numeric ? number : value;
    problems.push(
      ...schemaErrors(validatorAt(doc, `${header.pointer}/schema`), data, `${label}: header ${name}`),
    );
  }
  return problems;
}
