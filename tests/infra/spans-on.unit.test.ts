import * as otelApi from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterAll, describe, expect, it } from 'vitest';
import { DomainError } from '../../domain/errors.ts';
import { activeTraceparent, inSpan, inSpanSync, spansOn, turnSpansOn } from '../../infra/telemetry/spans.ts';

/*
 * The product's spans once tracing is on (infra/telemetry/spans.ts, given the API by tracing.ts): a
 * failure is recorded as the API says (ERROR status, the exception, `error.type`), a refusal only by
 * its code, and the active span's traceparent is what an event carries. Spans are kept in memory here;
 * what a traced server exports over OTLP: tests/infra/tracing.e2e.test.ts.
 */

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
otelApi.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
otelApi.trace.setGlobalTracerProvider(provider);
turnSpansOn(otelApi);

afterAll(async () => {
  await provider.shutdown();
  otelApi.trace.disable();
  otelApi.context.disable();
});

const finished = (name: string) => {
  const span = exporter.getFinishedSpans().find((s) => s.name === name);
  if (!span) throw new Error(`no span named ${name}`);
  return span;
};

describe('the product spans while tracing is on', () => {
  it('records a failure with the ERROR status and its exception', async () => {
    expect(spansOn()).toBe(true);
    await expect(
      inSpan('articles.edit', { attributes: () => ({ 'content_service.article_id': 'a1' }) }, async () => {
        throw new TypeError('broken');
      }),
    ).rejects.toThrow('broken');
    const span = finished('articles.edit');
    expect(span.status).toEqual({ code: otelApi.SpanStatusCode.ERROR, message: 'broken' });
    expect(span.attributes).toEqual({ 'content_service.article_id': 'a1', 'error.type': 'TypeError' });
    expect(span.events.map((e) => e.name)).toEqual(['exception']);
    expect(span.kind).toBe(otelApi.SpanKind.INTERNAL);
  });

  it('notes a refusal by its code, the status left unset', () => {
    expect(() =>
      inSpanSync('decide article', {}, () => {
        throw new DomainError('revision_mismatch', 'stale');
      }),
    ).toThrow('stale');
    const span = finished('decide article');
    expect(span.status.code).toBe(otelApi.SpanStatusCode.UNSET);
    expect(span.attributes).toEqual({ 'error.type': 'revision_mismatch' });
  });

  it('gives the active sampled span as a traceparent', async () => {
    const seen = await inSpan('append article', {}, async (span) => {
      const { traceId, spanId } = span.spanContext();
      return { traceparent: activeTraceparent(), expected: `00-${traceId}-${spanId}-01` };
    });
    expect(seen.traceparent).toBe(seen.expected);
    expect(activeTraceparent()).toBeUndefined();
  });
});
