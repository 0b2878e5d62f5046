import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { redactSecrets } from '../redaction.ts';

/*
 * What leaves the process of a span passes the logs' redaction (infra/redaction.ts): every text a span
 * says (its name, its attributes, its events' and links' attributes, its status message) with the
 * service's keys and tokens replaced, by their shape, wherever an instrumentation put them: a path
 * segment (`/api/v1/articles/cs_live_...`, `/oauth/interaction/<uid>`), an error's message and stack
 * that echo one (an exception event), a URL of any kind. Done at export, in the batch span processor's
 * own time, not while a request waits for its span to end.
 */

/** `inner`, given every span redacted (redactSpan) instead of as it was recorded. */
export function redactingExporter(inner: SpanExporter): SpanExporter {
  return {
    export: (spans, done) => inner.export(spans.map(redactSpan), done),
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

/** A span as it may be exported: each of its texts through redactSecrets, the rest as it is. */
export function redactSpan(span: ReadableSpan): ReadableSpan {
  const { message } = span.status;
  return {
    name: redactSecrets(span.name),
    kind: span.kind,
    spanContext: () => span.spanContext(),
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    status: message === undefined ? span.status : { ...span.status, message: redactSecrets(message) },
    attributes: redactAttributes(span.attributes),
    links: span.links.map((link) =>
      link.attributes === undefined ? link : { ...link, attributes: redactAttributes(link.attributes) },
    ),
    events: span.events.map((event) => ({
      ...event,
      name: redactSecrets(event.name),
      ...(event.attributes === undefined ? {} : { attributes: redactAttributes(event.attributes) }),
    })),
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

function redactAttributes(attributes: Attributes): Attributes {
  const out: Attributes = {};
  for (const [name, value] of Object.entries(attributes)) out[name] = redactValue(value);
  return out;
}

function redactValue(value: AttributeValue | undefined): AttributeValue | undefined {
  if (typeof value === 'string') return redactSecrets(value);
  if (Array.isArray(value)) {
    return value.map((item) => (typeof item === 'string' ? redactSecrets(item) : item)) as AttributeValue;
  }
  return value;
}
