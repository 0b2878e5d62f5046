import { randomBytes } from 'node:crypto';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { newApiKey } from '../../infra/ids.ts';
import { redactingExporter } from '../../infra/telemetry/redacting-exporter.ts';

/*
 * What the exporter sends of a span (infra/telemetry/redacting-exporter.ts): the service's keys and
 * tokens out of every text, by the logs' rules, wherever an instrumentation put them; everything else
 * as recorded. A traced server's exported spans: tests/infra/tracing-redaction.e2e.test.ts.
 */

const memory = new InMemorySpanExporter();
const provider = new TracerProvider({
  spanProcessors: [new SimpleSpanProcessor({ exporter: redactingExporter(memory) })],
});
const tracer = provider.getTracer('test');

afterEach(() => memory.reset());

describe('the redacting exporter', () => {
  it('takes keys and tokens out of the name, attributes, events, links and status of a span', async () => {
    const key = newApiKey().key;
    const uid = randomBytes(32).toString('base64url');
    const linked = tracer.startSpan('linked');
    linked.end();
    const span = tracer.startSpan(`GET /oauth/interaction/${uid}`, {
      kind: SpanKind.SERVER,
      attributes: {
        'url.path': `/api/v1/articles/${key}`,
        'url.full': `https://hooks.example/${uid}?a=1`,
        'content_service.event.types': ['ArticleEdited', key],
        'http.response.status_code': 404,
        'content_service.article.id': 'art_01jz3k9x2m4n5p6q7r8s9t0v1w',
      },
      links: [{ context: linked.spanContext(), attributes: { note: `from ${key}` } }],
    });
    span.recordException(new Error(`No article ${key}`));
    span.addEvent(`retry ${uid}`, { why: `refused ${uid}` });
    span.setStatus({ code: SpanStatusCode.ERROR, message: `No article ${key}` });
    span.end();
    await provider.forceFlush();

    const exported = memory.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER);
    if (exported === undefined) throw new Error('no server span exported');
    const said = JSON.stringify([
      exported.name,
      exported.attributes,
      exported.events,
      exported.links,
      exported.status,
    ]);
    expect(said).not.toContain(key);
    expect(said).not.toContain(key.slice(8, 30));
    expect(said).not.toContain(uid);

    expect(exported.name).toBe('GET /oauth/interaction/[redacted]');
    expect(exported.attributes).toEqual({
      'url.path': '/api/v1/articles/[redacted]',
      'url.full': 'https://hooks.example/[redacted]?a=1',
      'content_service.event.types': ['ArticleEdited', '[redacted]'],
      'http.response.status_code': 404,
      'content_service.article.id': 'art_01jz3k9x2m4n5p6q7r8s9t0v1w',
    });
    expect(exported.events.map((e) => e.name)).toEqual(['exception', 'retry [redacted]']);
    expect(exported.events[0]?.attributes?.['exception.message']).toBe('No article [redacted]');
    expect(String(exported.events[0]?.attributes?.['exception.stacktrace'])).toMatch(
      /^Error: No article \[redacted\]\n/,
    );
    expect(exported.links[0]?.attributes).toEqual({ note: 'from [redacted]' });
    expect(exported.status).toEqual({ code: SpanStatusCode.ERROR, message: 'No article [redacted]' });
    // The rest as recorded: the same span, the same times, the same parent and scope.
    expect(exported.spanContext()).toEqual(span.spanContext());
    expect(exported.links[0]?.context).toEqual(linked.spanContext());
    expect(exported.instrumentationScope.name).toBe('test');
    expect(exported.ended).toBe(true);
  });
});
