import type { Attributes, Link, Span, SpanContext, SpanKind } from '@opentelemetry/api';
import { DomainError } from '../../domain/errors.ts';

/*
 * The product's own spans (an edit's use case, decide, append, inline projections; a webhook delivery),
 * through @opentelemetry/api. Tracing off (infra/telemetry/tracing.ts: no OTEL_* endpoint), a span is
 * one boolean test: the work runs as it is, with no span object, no context switch and no attributes
 * built, and the API itself is not loaded (a start reads some 50 files less). On, the SDK's tracer makes
 * each span the active one around its work, so the spans of pg, ioredis and undici made inside it are
 * its children.
 *
 * Attribute names: the semantic conventions' where one exists (`error.type`), else under
 * `content_service.` (ids and origins only: never a body, a secret or a key).
 */

/** The instrumentation scope of the product's spans. */
export const TRACER_NAME = 'content-service';

type Api = typeof import('@opentelemetry/api');

/** The API, once tracing is on in this process; undefined while it is off. */
let api: Api | undefined;

/** Turns the product's spans on with the API the SDK registered with; infra/telemetry/tracing.ts calls it. */
export function turnSpansOn(registered: Api): void {
  api = registered;
}

/** Whether the product makes spans (tracing is on in this process). */
export function spansOn(): boolean {
  return api !== undefined;
}

const NO_TRACE = '00000000000000000000000000000000';
const NO_PARENT = '0000000000000000';

/** A span that records nothing: what `work` is given while tracing is off (the API's non-recording span's behaviour). */
const NO_SPAN: Span = {
  spanContext: () => ({ traceId: NO_TRACE, spanId: NO_PARENT, traceFlags: 0 }),
  setAttribute: () => NO_SPAN,
  setAttributes: () => NO_SPAN,
  addEvent: () => NO_SPAN,
  addLink: () => NO_SPAN,
  addLinks: () => NO_SPAN,
  setStatus: () => NO_SPAN,
  updateName: () => NO_SPAN,
  end: () => {},
  isRecording: () => false,
  recordException: () => {},
};

export type SpanOptions = {
  /** Built only when tracing is on. */
  attributes?: () => Attributes;
  kind?: SpanKind;
  links?: Link[];
};

/**
 * Runs `work` inside a span named `name` (the active span while it runs), ending it when `work`
 * settles. A DomainError (a refusal: not found, stale revision...) is noted as `error.type` with its
 * code, the span's status left unset, as a 4xx leaves an HTTP server span's; anything else is recorded
 * as an exception with the ERROR status. Tracing off: `work()` and nothing else.
 */
export function inSpan<T>(name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
  if (!api) return work(NO_SPAN);
  return tracer(api).startActiveSpan(name, startOptions(api, options), async (span) => {
    try {
      return await work(span);
    } catch (error) {
      noteError(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** `inSpan` for synchronous work (a decider call). */
export function inSpanSync<T>(name: string, options: SpanOptions, work: (span: Span) => T): T {
  if (!api) return work(NO_SPAN);
  return tracer(api).startActiveSpan(name, startOptions(api, options), (span) => {
    try {
      return work(span);
    } catch (error) {
      noteError(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * Runs `work` outside any trace: for work that serves many callers at once (a batch of several requests'
 * records), which would otherwise count as part of the trace of whichever caller started it.
 */
export function detached<T>(work: () => T): T {
  return api ? api.context.with(api.ROOT_CONTEXT, work) : work();
}

/**
 * `work` bound to the trace active now: run later from elsewhere (a group of several callers' work,
 * sent by whichever caller's turn it was), it counts as part of its own caller's trace.
 */
export function bound<A extends unknown[], T>(work: (...args: A) => T): (...args: A) => T {
  return api ? api.context.bind(api.context.active(), work) : work;
}

/** Notes an error on a span as inSpan does (for work that returns its failure as a value). */
export function noteError(span: Span, error: unknown): void {
  // A span records only while tracing is on, the API given.
  if (!api || !span.isRecording()) return;
  if (error instanceof DomainError) {
    span.setAttribute('error.type', error.code);
    return;
  }
  span.setAttribute('error.type', error instanceof Error ? error.name : 'unknown');
  if (error instanceof Error) span.recordException(error);
  span.setStatus({
    code: api.SpanStatusCode.ERROR,
    message: error instanceof Error ? error.message : String(error),
  });
}

/**
 * The W3C `traceparent` of the active span when tracing is on and the span is sampled: what an event
 * carries in its metadata, so that the work it causes later (a webhook delivery, in this process or
 * another) can link to the trace that made it. Undefined otherwise.
 */
export function activeTraceparent(): string | undefined {
  if (!api) return undefined;
  const context = api.trace.getActiveSpan()?.spanContext();
  if (context === undefined || (context.traceFlags & api.TraceFlags.SAMPLED) === 0) return undefined;
  return `00-${context.traceId}-${context.spanId}-${context.traceFlags.toString(16).padStart(2, '0')}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The span context a `traceparent` names (as a remote parent); undefined for anything else. */
export function spanContextOf(traceparent: string | null | undefined): SpanContext | undefined {
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (!match?.[1] || !match[2] || !match[3]) return undefined;
  const context = {
    traceId: match[1],
    spanId: match[2],
    traceFlags: Number.parseInt(match[3], 16),
    isRemote: true,
  };
  // All zeros is the API's invalid id (isSpanContextValid), read without loading it.
  return context.traceId !== NO_TRACE && context.spanId !== NO_PARENT ? context : undefined;
}

/** A link to the span a `traceparent` names, for a span of work it caused; none for a missing or bad one. */
export function linksTo(traceparent: string | null | undefined): Link[] {
  const context = spanContextOf(traceparent);
  return context ? [{ context }] : [];
}

function tracer(on: Api) {
  return on.trace.getTracer(TRACER_NAME);
}

function startOptions(
  on: Api,
  options: SpanOptions,
): { attributes?: Attributes; kind: SpanKind; links?: Link[] } {
  return {
    kind: options.kind ?? on.SpanKind.INTERNAL,
    ...(options.attributes ? { attributes: options.attributes() } : {}),
    ...(options.links && options.links.length > 0 ? { links: options.links } : {}),
  };
}
