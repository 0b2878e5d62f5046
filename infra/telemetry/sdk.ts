import { readFileSync } from 'node:fs';
import { register } from 'node:module';
import { FastifyOtelInstrumentation } from '@fastify/otel';
import { type Attributes, context, DiagLogLevel, diag, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { type Instrumentation, registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import {
  defaultResource,
  detectResources,
  hostDetector,
  resourceAttributesEnvDetector,
  resourceFromAttributes,
  serviceNameEnvDetector,
} from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_QUERY,
} from '@opentelemetry/semantic-conventions';
import { BullMQOtel } from 'bullmq-otel';
import pino from 'pino';
import { redactingExporter } from './redacting-exporter.ts';
import type { DiagLevel, SamplerSetting, TracedProcess, TracingSettings } from './tracing.ts';

/*
 * The OpenTelemetry SDK, loaded by infra/telemetry/tracing.ts only when tracing is on: the tracer
 * provider with its OTLP (http/protobuf) exporter behind a batch span processor, the async-local-storage
 * context manager, W3C trace context and baggage propagation, and the instrumentations of node:http
 * (server and client), fastify (@fastify/otel: the route on the request's span), pg, ioredis and undici
 * (webhook deliveries, image fetches), plus BullMQ's own telemetry (bullmq-otel).
 *
 * The project is ESM: an imported module is linked before any code runs, and pg and ioredis, CommonJS
 * packages imported from ESM, are not loaded through `require`. So the import-in-the-middle loader hook
 * (@opentelemetry/instrumentation/hook.mjs) is registered for exactly the packages patched here, and
 * the process's own modules are imported after this has run (the entry points' `await import`).
 */

/** The packages the loader hook intercepts when imported from ESM: the ones instrumented by patching. */
const HOOKED = ['pg', 'pg-pool', 'ioredis'];
/** Paths whose requests are not traced: probes that a load balancer or Prometheus call every few seconds. */
const UNTRACED_PATHS = ['/healthz', '/readyz', '/metrics'];

export type Sdk = {
  /** BullMQ's telemetry option (bullmq-otel), for its queues and workers. */
  bullmq: BullMQOtel;
  /** Exports the spans still queued, then stops the SDK and the instrumentations. */
  shutdown(): Promise<void>;
};

export function startSdk(
  settings: Extract<TracingSettings, { on: true }>,
  opts: { process: TracedProcess; serviceName: string },
): Sdk {
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, { data: { include: HOOKED } });
  diag.setLogger(diagLogger(), { logLevel: diagLevel(settings.logLevel), suppressOverrideMessage: true });

  const version = packageVersion();
  const resource = defaultResource()
    .merge(
      resourceFromAttributes({
        [ATTR_SERVICE_NAME]: opts.serviceName,
        [ATTR_SERVICE_VERSION]: version,
        'content_service.process': opts.process,
      }),
    )
    // OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME, over the defaults.
    .merge(
      detectResources({ detectors: [hostDetector, resourceAttributesEnvDetector, serviceNameEnvDetector] }),
    );

  const contextManager = new AsyncLocalStorageContextManager();
  context.setGlobalContextManager(contextManager.enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  const provider = new TracerProvider({
    resource,
    sampler: samplerOf(settings.sampler),
    // The exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT and _COMPRESSION itself.
    // What it sends has the service's keys and tokens out of every text, as the logs do (a path
    // segment, an error's message): redacting-exporter.ts.
    spanProcessors: [
      new BatchSpanProcessor({ exporter: redactingExporter(new OTLPTraceExporter()), ...settings.batch }),
    ],
  });
  trace.setGlobalTracerProvider(provider);

  const instrumentations: Instrumentation[] = [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (request) =>
        UNTRACED_PATHS.some((path) => request.url === path || request.url?.startsWith(`${path}?`)),
      // A query string's values may be tokens: only its names are kept.
      startIncomingSpanHook: (request) => queryAttributes(request.url ?? ''),
      // The same for a request made through node:http, as undici's below.
      startOutgoingSpanHook: (options) => {
        const { hostname, port } = options;
        const host = hostname?.includes(':') ? `[${hostname}]` : (hostname ?? options.host ?? 'localhost');
        const origin = `${options.protocol ?? 'http:'}//${host}${hostname && port ? `:${port}` : ''}`;
        return outgoingUrlAttributes(URL.parse(options.path ?? '/', origin));
      },
      requireParentforOutgoingSpans: true,
    }),
    // The route (`/api/v1/articles/:id`) on the HTTP server span and a `request` span under it, for
    // every fastify instance as it is made (fastify's `fastify.initialization` diagnostics channel).
    new FastifyOtelInstrumentation({
      registerOnInitialization: true,
      // Its `request` span is enough (it carries the route); a span per hook and per handler would
      // double the spans of a read for what the product's own spans already say.
      instrumentHooks: false,
      instrumentHandler: false,
      // Its `url.path` is the request's URL, query included: the path alone.
      requestHook: (span, request) => span.setAttribute(ATTR_URL_PATH, request.url.split('?')[0] ?? ''),
    }) as unknown as Instrumentation,
    // Only queries and commands made inside a span: the projectors' polls, LISTEN and the job
    // queues' blocking reads would each be a trace of their own.
    new PgInstrumentation({ requireParentSpan: true, ignoreConnectSpans: true }),
    // A command's name only: its arguments are key names that hold an account's id or a client's address
    // (the limits' `<prefix>:requests:acct:<id>`, `...:ip:<address>`), and values.
    new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    new UndiciInstrumentation({
      requireParentforSpans: true,
      // Webhook and image URLs may carry tokens in their query or user info: only names are kept.
      startSpanHook: (request) => outgoingUrlAttributes(URL.parse(request.path, request.origin)),
    }),
  ];
  const unregister = registerInstrumentations({ tracerProvider: provider, instrumentations });

  return {
    bullmq: new BullMQOtel({ tracerName: 'bullmq', version }),
    async shutdown() {
      try {
        await provider.shutdown();
      } finally {
        unregister();
      }
    },
  };
}

/** `url.query` with every value replaced (`a=REDACTED&b=REDACTED`), for a path or URL with a query; none without. */
function queryAttributes(pathOrSearch: string): Attributes {
  const at = pathOrSearch.indexOf('?');
  if (at < 0 || at === pathOrSearch.length - 1) return {};
  const params = new URLSearchParams(pathOrSearch.slice(at + 1));
  return {
    [ATTR_URL_QUERY]: [...params.keys()].map((key) => `${encodeURIComponent(key)}=REDACTED`).join('&'),
  };
}

/** `url.full` without user info and with `url.query`'s values replaced, for a request the service makes. */
function outgoingUrlAttributes(url: URL | null): Attributes {
  if (url === null) return {};
  const query = queryAttributes(url.search);
  url.username = '';
  url.password = '';
  url.search = String(query[ATTR_URL_QUERY] ?? '');
  return { ...query, [ATTR_URL_FULL]: url.toString() };
}

function samplerOf(setting: SamplerSetting): Sampler {
  switch (setting.name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(setting.ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(setting.ratio) });
    default: {
      const unknown: never = setting.name;
      throw new Error(`unknown sampler ${String(unknown)}`);
    }
  }
}

function diagLevel(level: DiagLevel): DiagLogLevel {
  const levels = {
    none: DiagLogLevel.NONE,
    error: DiagLogLevel.ERROR,
    warn: DiagLogLevel.WARN,
    info: DiagLogLevel.INFO,
    debug: DiagLogLevel.DEBUG,
    verbose: DiagLogLevel.VERBOSE,
    all: DiagLogLevel.ALL,
  } as const;
  return levels[level];
}

/** The SDK's own messages (an export that failed, say) as JSON log lines, `component: "tracing"`. */
function diagLogger() {
  const log = pino({ level: 'trace' }).child({ component: 'tracing' });
  const line =
    (level: 'error' | 'warn' | 'info' | 'debug' | 'trace') =>
    (message: string, ...args: unknown[]): void =>
      log[level](args.length > 0 ? { details: args.map(String) } : {}, message);
  return {
    error: line('error'),
    warn: line('warn'),
    info: line('info'),
    debug: line('debug'),
    verbose: line('trace'),
  };
}

function packageVersion(): string {
  const file = new URL('../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}
