import fastifySwagger, { type SwaggerTransform, type SwaggerTransformObject } from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { MAX_IMAGE_MIB, MAX_IMAGE_SIDE } from '../../domain/article/events.ts';
import type { ErrorCode } from '../../domain/errors.ts';
import { PER_PAGE_DEFAULT, PER_PAGE_MAX, REQUESTS_PER_MINUTE } from '../../domain/vocabulary.ts';
import pkg from '../../package.json' with { type: 'json' };
import { WWW_AUTHENTICATE } from './api/auth.ts';
import { statusOf } from './http/errors.ts';
import { HEAVY_BUSY_DETAIL } from './http/heavy-work.ts';
import type { OpenApiDocument } from './web/api-reference.ts';

/*
 * The OpenAPI 3.1 document, generated from the routes themselves: @fastify/swagger walks every route,
 * fastify-type-provider-zod turns the zod schemas the routes validate with into JSON Schema 2020-12
 * (schemas registered with `.meta({ id })` become `components.schemas`). What every /api/v1 route has in
 * common (API-key security, the X-Request-Id and RateLimit headers, the problem+json errors that its
 * hooks and the error handler can answer with) is added here, once, for every /api/v1 operation. The
 * readable reference at /docs is a page of the web face rendered from this document
 * (web/api-reference.ts, given `apiDocument` by the composition root).
 */

/** Where the document is served (public: no key, no rate limit, not in the activity log). */
const OPENAPI_PATH = '/api/v1/openapi.json';

const API_PREFIX = '/api/v1/';

type Json = Record<string, unknown>;

/** Response headers, by name: each becomes a `components.headers` entry. */
function headerCatalogue(publicUrl: string) {
  return {
    'X-Request-Id': {
      description:
        'The id the service gave this request (`req_...`), in the logs and the activity log; quote it when you ' +
        'contact support. The service always makes it: an `X-Request-Id` sent with the request is never used ' +
        'as the request id (it is kept as `client_request_id` on the activity record).',
      required: true,
      schema: { type: 'string', pattern: '^req_[0-9a-z]{26}$' },
      example: 'req_06h017my4x3zamww4jk51y2p4c',
    },
    'RateLimit-Policy': {
      description:
        `The quota policies that apply (IETF RateLimit header fields): \`"requests"\`, ${REQUESTS_PER_MINUTE} requests per 60-second ` +
        'window per account (per client address without a key), shared by all its keys and assistant connections.',
      required: true,
      schema: { type: 'string', pattern: '^"[a-z]+";q=[0-9]+;w=[0-9]+( *, *"[a-z]+";q=[0-9]+;w=[0-9]+)*$' },
      example: '"requests";q=60;w=60',
    },
    RateLimit: {
      description:
        'What is left of each policy: `r` requests remaining, `t` seconds until the window resets (IETF RateLimit header fields).',
      required: true,
      schema: { type: 'string', pattern: '^"[a-z]+";r=[0-9]+;t=[0-9]+( *, *"[a-z]+";r=[0-9]+;t=[0-9]+)*$' },
      example: '"requests";r=59;t=60',
    },
    Link: {
      description:
        'RFC 8288 links to the `self`, `first`, `last`, `prev` and `next` pages (absent at the ends): the same URLs as `links` in the body.',
      required: true,
      schema: { type: 'string' },
      example:
        `<${publicUrl}/api/v1/sites?page=2&per_page=20>; rel="self", <${publicUrl}/api/v1/sites?page=1&per_page=20>; rel="first", ` +
        `<${publicUrl}/api/v1/sites?page=3&per_page=20>; rel="last", <${publicUrl}/api/v1/sites?page=1&per_page=20>; rel="prev", ` +
        `<${publicUrl}/api/v1/sites?page=3&per_page=20>; rel="next"`,
    },
    ETag: {
      description:
        'The article revision as a weak entity tag. Send it back as `If-None-Match` (304 while it is current) or as `If-Match` on an edit.',
      required: true,
      schema: { type: 'string', pattern: '^W/"[0-9]+"$' },
      example: 'W/"3"',
    },
    'WWW-Authenticate': {
      description:
        'How to authenticate: an API key as `Authorization: Bearer <key>` (or `X-API-Key: <key>`); `error="invalid_token"` when the key sent is malformed, unknown or revoked.',
      required: true,
      schema: { type: 'string' },
      example: `${WWW_AUTHENTICATE}, error="invalid_token"`,
    },
    'Idempotent-Replayed': {
      description:
        '`true` when this answer is the stored first answer to an earlier request with the same Idempotency-Key: nothing was changed again.',
      required: false,
      schema: { type: 'string', enum: ['true'] },
      example: 'true',
    },
    'Cache-Control': {
      description:
        'Always `private, no-store`: an answer carries an account’s data and must not be kept by a shared cache.',
      required: true,
      schema: { type: 'string', enum: ['private, no-store'] },
      example: 'private, no-store',
    },
    'Retry-After': {
      description: 'Seconds to wait before trying again.',
      required: true,
      schema: { type: 'integer', minimum: 1 },
      example: 30,
    },
  } as const;
}

type ResponseHeaderName = keyof ReturnType<typeof headerCatalogue>;

declare module 'fastify' {
  interface FastifySchema {
    /**
     * Documentation: the response headers a route sets itself, by status (for example `Link` on a list).
     * The headers every /api/v1 response carries are added for every route by `registerOpenApi`.
     */
    responseHeaders?: { readonly [status: number]: readonly ResponseHeaderName[] };
    /** Documentation: a `multipart/form-data` body the route accepts beside its JSON body (as JSON Schema). */
    multipartBody?: Readonly<Record<string, unknown>>;
  }
}

/** Headers on every /api/v1 response (the limiter runs before authentication is refused). */
const EVERY_RESPONSE: readonly ResponseHeaderName[] = [
  'X-Request-Id',
  'Cache-Control',
  'RateLimit-Policy',
  'RateLimit',
];

/** Statuses any /api/v1 operation can answer, whatever the route: its hooks and the error handler give them. */
const EVERY_OPERATION_ERRORS = [400, 401, 429, 500, 503] as const;
/** ... and any operation with a request body: fastify refuses a body too large or of another type. */
const BODY_ERRORS = [413, 415] as const;

type ErrorResponse = {
  name: string;
  description: string;
  headers: readonly ResponseHeaderName[];
  examples: Record<string, { summary: string; value: Json }>;
};

function problemExample(
  code: ErrorCode,
  title: string,
  detail: string,
  instance: string,
  errors?: Json[],
): Json {
  return {
    type: `https://content-service.dev/problems/${code.replaceAll('_', '-')}`,
    title,
    status: statusOf[code],
    detail,
    instance,
    code,
    request_id: 'req_06h017my4x3zamww4jk51y2p4c',
    ...(errors ? { errors } : {}),
  };
}

/** The problem+json responses, by status; each becomes a `components.responses` entry. */
const errorResponses: Record<number, ErrorResponse> = {
  400: {
    name: 'BadRequest',
    description:
      'Invalid request (`invalid_request`): an invalid, unknown or repeated parameter, or `from` after `to`. ' +
      '`errors` names each one: `[{in, name, message}]`.',
    headers: EVERY_RESPONSE,
    examples: {
      per_page: {
        summary: `per_page above ${PER_PAGE_MAX}`,
        value: problemExample(
          'invalid_request',
          'Invalid request',
          'The request has invalid parameters',
          '/api/v1/sites',
          [{ in: 'query', name: 'per_page', message: `must be at most ${PER_PAGE_MAX}` }],
        ),
      },
    },
  },
  401: {
    name: 'Unauthorized',
    description:
      'No API key, or one that is malformed, unknown or revoked (`unauthenticated`). Keys are refused in the query string.',
    headers: [...EVERY_RESPONSE, 'WWW-Authenticate'],
    examples: {
      missing: {
        summary: 'No key sent',
        value: problemExample(
          'unauthenticated',
          'Authentication required',
          'Send an API key: Authorization: Bearer <key> or X-API-Key: <key>',
          '/api/v1/sites',
        ),
      },
    },
  },
  403: {
    name: 'Forbidden',
    description: 'The key can only read (`insufficient_scope`): create a key with the write scope to edit.',
    headers: EVERY_RESPONSE,
    examples: {
      scope: {
        summary: 'A read-only key writing',
        value: problemExample(
          'insufficient_scope',
          'Insufficient scope',
          'This key can only read; create a key with the write scope to edit',
          '/api/v1/articles/art_06h014k2g711vw3tv0g528qpw8',
        ),
      },
    },
  },
  404: {
    name: 'NotFound',
    description:
      'No such id on this account (`not_found`). An id of another account is answered the same way: existence is never revealed.',
    headers: EVERY_RESPONSE,
    examples: {
      site: {
        summary: 'Unknown site',
        value: problemExample(
          'not_found',
          'Not found',
          'No site site_06h014k26k323kar2chmr6p5jr',
          '/api/v1/sites/site_06h014k26k323kar2chmr6p5jr/articles',
        ),
      },
    },
  },
  409: {
    name: 'Conflict',
    description:
      'Conflict (`conflict`): for example an `Idempotency-Key` reused with a different request, or still in progress.',
    headers: EVERY_RESPONSE,
    examples: {},
  },
  412: {
    name: 'PreconditionFailed',
    description:
      '`If-Match` names a revision that is no longer the latest (`revision_mismatch`): nothing changed. Read the article again.',
    headers: EVERY_RESPONSE,
    examples: {
      stale: {
        summary: 'Stale If-Match',
        value: problemExample(
          'revision_mismatch',
          'Revision mismatch',
          'The article is at revision 4, not 3',
          '/api/v1/articles/art_06h014k2g711vw3tv0g528qpw8',
        ),
      },
    },
  },
  413: {
    name: 'ContentTooLarge',
    description: `The request body is too large (\`image_too_large\` for an image above ${MAX_IMAGE_MIB} MiB or ${MAX_IMAGE_SIDE} x ${MAX_IMAGE_SIDE} pixels).`,
    headers: EVERY_RESPONSE,
    examples: {},
  },
  415: {
    name: 'UnsupportedMediaType',
    description:
      'The request body is of a type the operation does not take (`unsupported_image` for an image that is not JPEG, PNG, WebP, GIF or AVIF).',
    headers: EVERY_RESPONSE,
    examples: {},
  },
  422: {
    name: 'UnprocessableContent',
    description:
      'The change is refused and nothing changed: `protected_links_modified` (with `errors: [{id, change}]`, change ' +
      '`removed`, `rewritten` or `forged`) or `image_fetch_failed`. A comparison of two revisions too long or too ' +
      'different to compare within the diff budget: `diff_too_large`, with `links: {from, to}` to both revisions.',
    headers: EVERY_RESPONSE,
    examples: {
      protected: {
        summary: 'An edit that drops a protected link',
        value: problemExample(
          'protected_links_modified',
          'Protected links modified',
          'The edit removes or changes protected links',
          '/api/v1/articles/art_06h014k2g711vw3tv0g528qpw8',
          [{ id: 'bl_1', change: 'removed' }],
        ),
      },
      tooLarge: {
        summary: 'Two revisions too different to compare',
        value: {
          ...problemExample(
            'diff_too_large',
            'Diff too large',
            'Revisions 1 and 9 of article art_06h014k2g711vw3tv0g528qpw8 are too long or too different to compare',
            '/api/v1/articles/art_06h014k2g711vw3tv0g528qpw8/revisions/compare',
          ),
          links: {
            from: '/api/v1/articles/art_06h014k2g711vw3tv0g528qpw8/revisions/1',
            to: '/api/v1/articles/art_06h014k2g711vw3tv0g528qpw8/revisions/9',
          },
        },
      },
    },
  },
  429: {
    name: 'TooManyRequests',
    description:
      'Too many requests (`rate_limited`; `edit_limit_reached` for the daily edit limit on writes). Wait `Retry-After` seconds.',
    headers: [...EVERY_RESPONSE, 'Retry-After'],
    examples: {
      requests: {
        summary: 'Requests per minute used up',
        value: problemExample(
          'rate_limited',
          'Too many requests',
          `More than ${REQUESTS_PER_MINUTE} requests in a minute for this account; retry in 30 s`,
          '/api/v1/sites',
        ),
      },
    },
  },
  500: {
    name: 'InternalError',
    description:
      'Something went wrong on the service side (`internal`). The answer carries nothing but a generic text and the request id.',
    // A failure before the limiter ran (the key lookup, the limiter itself) leaves no RateLimit fields.
    headers: ['X-Request-Id'],
    examples: {
      internal: {
        summary: 'Internal error',
        value: problemExample(
          'internal',
          'Internal error',
          'Something went wrong on our side. Quote the request id if you contact support.',
          '/api/v1/sites',
        ),
      },
    },
  },
  503: {
    name: 'Unavailable',
    description:
      'The database is briefly away (a restart, a failover: `unavailable`), or too many large requests (a body of 256 KiB or more) are waiting for their turn (`unavailable`; such a request changed nothing). Wait `Retry-After` seconds and retry. A write cut off during its commit may have been applied: retry it with the same Idempotency-Key, or with If-Match, so that it is not applied twice.',
    // Like a 500: a failure before the limiter ran (the key lookup) leaves no RateLimit fields.
    headers: ['X-Request-Id', 'Retry-After'],
    examples: {
      unavailable: {
        summary: 'Database restarting',
        value: problemExample(
          'unavailable',
          'Service unavailable',
          'The service is briefly unavailable; retry in 5 s.',
          '/api/v1/sites',
        ),
      },
      busy: {
        summary: 'Too many large requests waiting',
        value: problemExample(
          'unavailable',
          'Service unavailable',
          HEAVY_BUSY_DETAIL,
          '/api/v1/articles/art_1',
        ),
      },
    },
  },
};

/** A status no entry above describes: named after the codes that map to it (CONTRACT "Errors"). */
function errorResponseFor(status: number): ErrorResponse {
  const known = errorResponses[status];
  if (known) return known;
  const codes = (Object.keys(statusOf) as ErrorCode[]).filter((code) => statusOf[code] === status);
  return {
    name: `Error${status}`,
    description: codes.length > 0 ? `Problem details: ${codes.map((c) => `\`${c}\``).join(', ')}.` : 'Error',
    headers: EVERY_RESPONSE,
    examples: {},
  };
}

const headerRef = (name: ResponseHeaderName): Json => ({ $ref: `#/components/headers/${name}` });
const headerRefs = (names: readonly ResponseHeaderName[]): Json =>
  Object.fromEntries(names.map((name) => [name, headerRef(name)]));

const OPERATION_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'] as const;

/** Per route: operationId from the activity-log operation name, and the route's own response headers kept for the pass below. */
const transform: SwaggerTransform = (input) => {
  const result = jsonSchemaTransform(input);
  const schema = result.schema as Json;
  if (schema.hide || !result.url.startsWith(API_PREFIX)) return result;
  const { responseHeaders, multipartBody, ...rest } = schema;
  const operation = input.route.config?.operation;
  return {
    url: result.url,
    schema: {
      ...(operation ? { operationId: operation } : {}),
      ...rest,
      // Extensions are copied onto the operation object; the document pass reads and removes it.
      ...(responseHeaders ? { 'x-response-headers': responseHeaders } : {}),
      ...(multipartBody ? { 'x-multipart-body': multipartBody } : {}),
    },
  };
};

/** Every $ref target in a value. */
function collectRefs(value: unknown, into: Set<string>): void {
  if (Array.isArray(value)) {
    for (const item of value) collectRefs(item, into);
  } else if (value !== null && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string') into.add(child);
      else collectRefs(child, into);
    }
  }
}

/** Drops components nothing refers to (zod's input twins of the output schemas, error responses no route gives). */
function pruneComponents(doc: Json): void {
  const components = doc.components as Record<string, Json | undefined>;
  const seen = new Set<string>();
  const queue: string[] = [];
  const visit = (value: unknown): void => {
    const refs = new Set<string>();
    collectRefs(value, refs);
    for (const ref of refs) {
      if (!seen.has(ref)) {
        seen.add(ref);
        queue.push(ref);
      }
    }
  };
  visit(doc.paths);
  while (queue.length > 0) {
    const [, , kind, name] = (queue.shift() as string).split('/');
    if (kind && name) visit(components[kind]?.[name]);
  }
  for (const kind of ['schemas', 'responses', 'headers', 'parameters']) {
    const group = components[kind];
    if (!group) continue;
    for (const name of Object.keys(group)) {
      if (!seen.has(`#/components/${kind}/${name}`)) delete group[name];
    }
  }
}

/** The `{data, meta, links}` envelope of CONTRACT "Lists" (schemas.ts `listOf`). */
function isListEnvelope(schema: Json | undefined): boolean {
  const properties = schema?.properties as Json | undefined;
  return Boolean(properties?.data && properties.meta && properties.links);
}

function decorateOperation(op: Json, usedErrors: Map<number, ErrorResponse>, schemas: Json): void {
  const routeHeaders = (op['x-response-headers'] ?? {}) as Record<string, readonly ResponseHeaderName[]>;
  delete op['x-response-headers'];
  const multipart = op['x-multipart-body'] as Json | undefined;
  delete op['x-multipart-body'];
  if (multipart) {
    const body = (op.requestBody ?? { content: {} }) as Json;
    body.required = true;
    (body.content as Record<string, Json>)['multipart/form-data'] = { schema: multipart };
    op.requestBody = body;
  }
  const given = (op.responses ?? {}) as Record<string, Json>;
  const statuses = new Set([
    ...Object.keys(given),
    ...EVERY_OPERATION_ERRORS.map(String),
    ...(op.requestBody ? BODY_ERRORS.map(String) : []),
  ]);
  const responses: Record<string, Json> = {};
  for (const key of [...statuses].sort()) {
    const status = Number(key);
    const response = given[key];
    if (status >= 400) {
      const media = (response?.content as Record<string, Json> | undefined)?.['application/json'];
      const schema = media?.schema as Json | undefined;
      if (!response || schema?.$ref === '#/components/schemas/Problem') {
        const error = errorResponseFor(status);
        usedErrors.set(status, error);
        responses[key] = { $ref: `#/components/responses/${error.name}` };
      } else {
        // A route-specific error body: still problem+json, as the error handler sends every error.
        responses[key] = {
          description: errorResponseFor(status).description,
          headers: headerRefs([...EVERY_RESPONSE, ...(routeHeaders[key] ?? [])]),
          content: { 'application/problem+json': { ...media } },
        };
      }
      continue;
    }
    const content = response?.content as Record<string, Json> | undefined;
    const ref = (content?.['application/json']?.schema as Json | undefined)?.$ref;
    const component =
      typeof ref === 'string' ? (schemas[ref.split('/').pop() ?? ''] as Json | undefined) : undefined;
    const description =
      response?.description && response.description !== 'Default Response'
        ? response.description
        : typeof component?.description === 'string'
          ? component.description
          : 'OK';
    // The list envelope is only ever sent by `sendList`, which sends its links in a Link header too.
    const list: ResponseHeaderName[] = isListEnvelope(component) ? ['Link'] : [];
    responses[key] = {
      description,
      headers: headerRefs([...new Set([...EVERY_RESPONSE, ...list, ...(routeHeaders[key] ?? [])])]),
      ...(content ? { content } : {}),
    };
  }
  op.responses = responses;
  op.parameters = [
    ...((op.parameters as unknown[] | undefined) ?? []),
    { $ref: '#/components/parameters/RequestId' },
  ];
  op.security = [{ bearerAuth: [] }, { apiKey: [] }];
}

function documentPass(publicUrl: string): SwaggerTransformObject {
  return (input) => {
    const doc = jsonSchemaTransformObject(input) as Json;
    const components = (doc.components ?? {}) as Record<string, Json>;
    const schemas = components.schemas ?? {};
    const usedErrors = new Map<number, ErrorResponse>();
    for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>)) {
      if (!path.startsWith(API_PREFIX)) continue;
      for (const method of OPERATION_METHODS) {
        const op = item[method] as Json | undefined;
        if (op) decorateOperation(op, usedErrors, schemas);
      }
    }
    const responses: Record<string, Json> = {};
    for (const [, error] of [...usedErrors.entries()].sort(([a], [b]) => a - b)) {
      responses[error.name] = {
        description: error.description,
        headers: headerRefs(error.headers),
        content: {
          'application/problem+json': {
            schema: { $ref: '#/components/schemas/Problem' },
            ...(Object.keys(error.examples).length > 0 ? { examples: error.examples } : {}),
          },
        },
      };
    }
    doc.components = {
      ...components,
      responses,
      headers: headerCatalogue(publicUrl),
      parameters: {
        RequestId: {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          description:
            'Your own id for this request (1 to 128 of `A-Z a-z 0-9 . _ : -`): kept as `client_request_id` on its activity record, for your correlation. It is not the request id: the service makes that one and answers it in the `X-Request-Id` response header. Another value is ignored.',
          schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
          example: 'checkout-7f3a',
        },
      },
    };
    pruneComponents(doc);
    return doc;
  };
}

const DESCRIPTION = `The websites, articles, backlinks and period statistics of an account, over HTTP and JSON.

**Authentication.** Every \`/api/v1\` operation needs an API key, sent as \`Authorization: Bearer <key>\` or \`X-API-Key: <key>\` (never in the query string). Without a usable key the answer is 401 with \`WWW-Authenticate\`.

**Errors.** Every error is \`application/problem+json\` (RFC 9457) with a stable, machine-readable \`code\` and the \`request_id\`; an invalid parameter is a 400 whose \`errors\` names it.

**Limits.** 60 requests per minute per account. Every response states the limits in the IETF \`RateLimit-Policy\` and \`RateLimit\` fields; a 429 adds \`Retry-After\`.

**Lists.** \`page\` (from 1) and \`per_page\` (1 to ${PER_PAGE_MAX}, default ${PER_PAGE_DEFAULT}); the body is \`{data, meta, links}\` and the same links come in an RFC 8288 \`Link\` header. Dates are \`YYYY-MM-DD\` and times RFC 3339, all UTC.`;

/**
 * Registers the OpenAPI document (at `OPENAPI_PATH`). Call it before the `/api/v1` plugin is registered:
 * the document lists the routes registered after it.
 */
export async function registerOpenApi(app: FastifyInstance, opts: { publicUrl: string }): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Content Service API', version: pkg.version, description: DESCRIPTION },
      servers: [{ url: opts.publicUrl }],
      tags: [
        { name: 'sites', description: 'The websites on the account.' },
        { name: 'articles', description: 'Articles of a site, with their HTML bodies and protected links.' },
        { name: 'backlinks', description: 'Backlinks acquired for a site.' },
        { name: 'stats', description: 'Published articles and acquired backlinks of a site, per period.' },
        { name: 'revisions', description: 'The history of an article: every change is a revision.' },
        {
          name: 'activity',
          description: 'Every call through the API and MCP, and the changes the content pipeline made.',
        },
        {
          name: 'webhooks',
          description: 'Endpoints the account’s events are POSTed to, and their deliveries.',
        },
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API key as a bearer token: `Authorization: Bearer <key>`.',
          },
          apiKey: {
            type: 'apiKey',
            in: 'header',
            name: 'X-API-Key',
            description: 'The same API key in its own header: `X-API-Key: <key>`.',
          },
        },
      },
    },
    // Paths stay as the app serves them, below whichever PUBLIC_URL the server lists.
    stripBasePath: false,
    transform,
    transformObject: documentPass(opts.publicUrl),
  });

  // Built by its first reader and kept (@fastify/swagger caches it), not at start: a start serves
  // requests sooner, and the suite checks every route's schemas through the document
  // (tests/api/openapi.e2e.test.ts).
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async (_request, reply) => {
    return reply.type('application/json; charset=utf-8').send(app.swagger());
  });
}

/**
 * The document, as the API reference page reads it: the one `OPENAPI_PATH` serves, made by its first
 * reader and kept by @fastify/swagger. Ask for it once the routes are registered (on a request).
 */
export function apiDocument(app: FastifyInstance): OpenApiDocument {
  return app.swagger() as unknown as OpenApiDocument;
}
