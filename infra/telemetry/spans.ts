import {
  type Attributes,
  context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { DomainError } from '../../domain/errors.ts';

/*
 * The product's own spans (an edit's use case, decide, append, inline projections; a webhook delivery),
 * through @opentelemetry/api. Tracing off (infra/telemetry/tracing.ts: no OTEL_* endpoint), a span is
 * one boolean test: the work runs as it is, with no span object, no context switch and no attributes
 * built. On, the SDK's tracer makes each span the active one around its work, so the spans of pg, ioredis
 * and undici made inside it are its children.
 *
 * Attribute names: the semantic conventions' where one exists (`error.type`), else under
 * `content_service.` (ids and origins only: never a body, a secret or a key).
 */

/** The instrumentation scope of the product's spans. */
export const TRACER_NAME = 'content-service';

let on = false;

/** Turns the product's spans on; infra/telemetry/tracing.ts calls it once the SDK is registered. */
export function turnSpansOn(): void {
  on = true;
}

/** Whether the product makes spans (tracing is on in this process). */
export function spansOn(): boolean {
  return on;
}

/** A span that records nothing: what `work` is given while tracing is off. */
const NO_SPAN: Span = trace.wrapSpanContext({
  traceId: '00000000000000000000000000000000',
  spanId: '0000000000000000',
  traceFlags: TraceFlags.NONE,
});

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
  if (!on) return work(NO_SPAN);
  return tracer().startActiveSpan(name, startOptions(options), async (span) => {
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
  if (!on) return work(NO_SPAN);
  return tracer().startActiveSpan(name, startOptions(options), (span) => {
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
  return on ? context.with(ROOT_CONTEXT, work) : work();
}

/**
 * `work` bound to the trace active now: run later from elsewhere (a group of several callers' work,
 * sent by whichever caller's turn it was), it counts as part of its own caller's trace.
 */
export function bound<A extends unknown[], T>(work: (...args: A) => T): (...args: A) => T {
  return on ? context.bind(context.active(), work) : work;
}

/** Notes an error on a span as inSpan does (for work that returns its failure as a value). */
export function noteError(span: Span, error: unknown): void {
  if (!span.isRecording()) return;
  if (error instanceof DomainError) {
    span.setAttribute('error.type', error.code);
    return;
  }
  span.setAttribute('error.type', error instanceof Error ? error.name : 'unknown');
  if (error instanceof Error) span.recordException(error);
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: error instanceof Error ? error.message : String(error),
  });
}

/**
 * The W3C `traceparent` of the active span when tracing is on and the span is sampled: what an event
 * carries in its metadata, so that the work it causes later (a webhook delivery, in this process or
 * another) can link to the trace that made it. Undefined otherwise.
 */
export function activeTraceparent(): string | undefined {
  if (!on) return undefined;
  const context = trace.getActiveSpan()?.spanContext();
  if (context === undefined || (context.traceFlags & TraceFlags.SAMPLED) === 0) return undefined;
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
  return trace.isSpanContextValid(context) ? context : undefined;
}

/** A link to the span a `traceparent` names, for a span of work it caused; none for a missing or bad one. */
export function linksTo(traceparent: string | null | undefined): Link[] {
  const context = spanContextOf(traceparent);
  return context ? [{ context }] : [];
}

function tracer() {
  return trace.getTracer(TRACER_NAME);
}

function startOptions(options: SpanOptions): { attributes?: Attributes; kind: SpanKind; links?: Link[] } {
  return {
    kind: options.kind ?? SpanKind.INTERNAL,
    ...(options.attributes ? { attributes: options.attributes() } : {}),
    ...(options.links && options.links.length > 0 ? { links: options.links } : {}),
  };
}
