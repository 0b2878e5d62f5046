import type { Telemetry } from 'bullmq';
import { ConfigError } from '../config-error.ts';

/*
 * Traces with OpenTelemetry, configured by the standard OTEL_* variables (docs/operations.md, "Traces").
 * On only when they say where to send: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
 * set (and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none). Off, nothing of the SDK is
 * loaded: not the SDK, not the exporter, not the instrumentations, not the ESM loader hook; the
 * product's spans (spans.ts) are a boolean test each.
 *
 * A process entry point (apps/server/main.js, apps/worker/main.js, apps/cli/main.js) starts tracing
 * first and only then imports the rest: the instrumentations patch pg, ioredis and node:http as they
 * are loaded, which an ESM import linked before the SDK ran would be too early for.
 */

/** The service's name on its traces unless OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise. */
export const DEFAULT_SERVICE_NAME = 'content-service';

/** Which process is traced: a resource attribute (`content_service.process`) of its spans. */
export type TracedProcess = 'server' | 'worker' | 'cli';

/** How spans are sampled (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG). */
export type SamplerSetting = {
  name:
    | 'always_on'
    | 'always_off'
    | 'traceidratio'
    | 'parentbased_always_on'
    | 'parentbased_always_off'
    | 'parentbased_traceidratio';
  /** The ratio of the *traceidratio samplers, 0 to 1. */
  ratio: number;
};

/** The batch span processor's settings (OTEL_BSP_*), in milliseconds and spans; unset: the SDK's defaults. */
export type BatchSetting = {
  scheduledDelayMillis?: number;
  exportTimeoutMillis?: number;
  maxQueueSize?: number;
  maxExportBatchSize?: number;
};

/** What the OTEL_* variables ask for. */
export type TracingSettings =
  | { on: false; why: string }
  | { on: true; endpoint: string; sampler: SamplerSetting; batch: BatchSetting; logLevel: DiagLevel };

export type DiagLevel = 'none' | 'error' | 'warn' | 'info' | 'debug' | 'verbose' | 'all';

const SAMPLERS: readonly SamplerSetting['name'][] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];
const DIAG_LEVELS: readonly DiagLevel[] = ['none', 'error', 'warn', 'info', 'debug', 'verbose', 'all'];
const BATCH: readonly [variable: string, key: keyof BatchSetting][] = [
  ['OTEL_BSP_SCHEDULE_DELAY', 'scheduledDelayMillis'],
  ['OTEL_BSP_EXPORT_TIMEOUT', 'exportTimeoutMillis'],
  ['OTEL_BSP_MAX_QUEUE_SIZE', 'maxQueueSize'],
  ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 'maxExportBatchSize'],
];

/** A bad value, in the words loadConfig uses for every other variable. */
function invalid(name: string, value: string, message: string): ConfigError {
  return new ConfigError(`Invalid configuration: ${name}=${JSON.stringify(value)}: ${message}`);
}

/**
 * Reads the OTEL_* variables this service honours; an empty value counts as unset. Throws a
 * ConfigError naming the variable for a value it cannot use (an endpoint that is not an http(s) URL,
 * a protocol other than http/protobuf, an unknown exporter or sampler, a ratio outside 0..1, ...).
 * Besides these, the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, _TIMEOUT and _COMPRESSION,
 * and the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, themselves.
 */
export function tracingSettings(env: NodeJS.ProcessEnv = process.env): TracingSettings {
  const get = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  const endpointName = get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
    ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
    : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const endpoint = get(endpointName);
  if (endpoint !== undefined && !/^https?:$/.test(URL.parse(endpoint)?.protocol ?? '')) {
    throw invalid(endpointName, endpoint, 'expected an http:// or https:// URL');
  }
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const protocol = get(name);
    if (protocol !== undefined && protocol !== 'http/protobuf') {
      throw invalid(name, protocol, 'only http/protobuf is supported');
    }
    if (protocol !== undefined) break;
  }
  const exporters = (get('OTEL_TRACES_EXPORTER') ?? 'otlp').split(',').map((x) => x.trim());
  const unknown = exporters.find((x) => x !== 'otlp' && x !== 'none');
  if (unknown !== undefined) {
    throw invalid('OTEL_TRACES_EXPORTER', get('OTEL_TRACES_EXPORTER') ?? '', 'expected otlp or none');
  }
  const samplerName = get('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  if (!SAMPLERS.includes(samplerName as SamplerSetting['name'])) {
    throw invalid('OTEL_TRACES_SAMPLER', samplerName, `expected one of ${SAMPLERS.join(', ')}`);
  }
  const ratioText = get('OTEL_TRACES_SAMPLER_ARG');
  const ratio = ratioText === undefined ? 1 : Number(ratioText);
  if (samplerName.endsWith('traceidratio') && !(ratio >= 0 && ratio <= 1)) {
    throw invalid('OTEL_TRACES_SAMPLER_ARG', ratioText ?? '', 'expected a ratio from 0 to 1');
  }
  const batch: BatchSetting = {};
  for (const [name, key] of BATCH) {
    const text = get(name);
    if (text === undefined) continue;
    const n = Number(text);
    if (!Number.isInteger(n) || n < (key === 'scheduledDelayMillis' ? 0 : 1)) {
      throw invalid(name, text, 'expected a whole number');
    }
    batch[key] = n;
  }
  if (batch.maxExportBatchSize !== undefined && batch.maxExportBatchSize > (batch.maxQueueSize ?? 2048)) {
    throw invalid(
      'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
      String(batch.maxExportBatchSize),
      'expected no more than OTEL_BSP_MAX_QUEUE_SIZE (2048 unless set)',
    );
  }
  const logLevel = (get('OTEL_LOG_LEVEL')?.toLowerCase() ?? 'warn') as DiagLevel;
  if (!DIAG_LEVELS.includes(logLevel)) {
    throw invalid('OTEL_LOG_LEVEL', get('OTEL_LOG_LEVEL') ?? '', `expected one of ${DIAG_LEVELS.join(', ')}`);
  }

  if (get('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return { on: false, why: 'OTEL_SDK_DISABLED=true' };
  if (exporters.includes('none')) return { on: false, why: 'OTEL_TRACES_EXPORTER=none' };
  if (endpoint === undefined) return { on: false, why: 'no OTEL_EXPORTER_OTLP_ENDPOINT' };
  return {
    on: true,
    endpoint,
    sampler: { name: samplerName as SamplerSetting['name'], ratio },
    batch,
    logLevel,
  };
}

/** Tracing in this process: on (the SDK runs) or off (and why), and how to stop it. */
export type Tracing = {
  on: boolean;
  /** Why tracing is off; undefined when on. */
  why: string | undefined;
  /** Exports the spans still queued and stops the SDK; nothing when off. Safe to call more than once. */
  stop(): Promise<void>;
};

const OFF: Tracing = { on: false, why: 'not started', stop: async () => {} };
let current: Tracing = OFF;
/** BullMQ's telemetry (bullmq-otel) while tracing is on. */
let bullTelemetry: Telemetry | undefined;

/**
 * Starts tracing as the OTEL_* variables ask: off, returns at once having loaded nothing; on, loads the
 * SDK (infra/telemetry/sdk.ts), registers it and the instrumentations, and turns the product's spans
 * on. Call it once, first thing in a process, before the modules it instruments are imported.
 */
export async function startTracing(opts: {
  process: TracedProcess;
  env?: NodeJS.ProcessEnv;
}): Promise<Tracing> {
  const settings = tracingSettings(opts.env ?? process.env);
  if (!settings.on) {
    current = { ...OFF, why: settings.why };
    return current;
  }
  const [{ startSdk }, { turnSpansOn }, otelApi] = await Promise.all([
    import('./sdk.ts'),
    import('./spans.ts'),
    import('@opentelemetry/api'),
  ]);
  const sdk = startSdk(settings, { process: opts.process, serviceName: DEFAULT_SERVICE_NAME });
  bullTelemetry = sdk.bullmq;
  turnSpansOn(otelApi);
  let stopping: Promise<void> | undefined;
  current = {
    on: true,
    why: undefined,
    stop: () => {
      stopping ??= sdk.shutdown();
      return stopping;
    },
  };
  return current;
}

/** `startTracing` for a process entry point: a bad OTEL_* value is one line on stderr and exit 1, as a bad variable is. */
export async function startTracingOrExit(opts: { process: TracedProcess }): Promise<Tracing> {
  try {
    return await startTracing(opts);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

/** This process's tracing (off until startTracing turned it on). */
export function tracing(): Tracing {
  return current;
}

/** Exports what is queued and stops tracing (a process's shutdown calls it last); nothing when off. */
export function stopTracing(): Promise<void> {
  return current.stop();
}

/**
 * BullMQ's `telemetry` option for queues and workers while tracing is on (the bullmq-otel add-on, which
 * carries the context of a job's adder to its worker); undefined when off.
 */
export function jobsTelemetry(): Telemetry | undefined {
  return bullTelemetry;
}
