import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/*
 * An OTLP/HTTP trace receiver for tests: a node:http server that takes `POST /v1/traces`
 * (application/x-protobuf, gzip or not), decodes each ExportTraceServiceRequest and keeps its spans.
 *
 * The decoder reads the protobuf wire format by the field numbers of opentelemetry-proto
 * (opentelemetry/proto/collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
 * common/v1/common.proto, resource/v1/resource.proto). Nothing installed decodes a request: the
 * OTLP packages serialise requests and decode only responses, and protobufjs is here only as a
 * dependency of a dependency.
 */

export type AttributeValue = string | number | boolean | bigint | AttributeValue[] | Uint8Array | null;

export type DecodedLink = { traceId: string; spanId: string; attributes: Record<string, AttributeValue> };

export type DecodedSpan = {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttributeValue>;
  links: DecodedLink[];
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  events: { name: string; attributes: Record<string, AttributeValue> }[];
  /** The instrumentation scope that made it. */
  scope: string;
  /** Its resource's attributes (service.name, ...). */
  resource: Record<string, AttributeValue>;
};

export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

/** A message's fields: field number → the values it came with, in order (a repeated field has several). */
type Fields = Map<number, Array<bigint | Uint8Array>>;

/** Reads one message's fields from the protobuf wire format. */
function fieldsOf(bytes: Uint8Array): Fields {
  const fields: Fields = new Map();
  let at = 0;
  const varint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (at >= bytes.length) throw new Error('protobuf: truncated varint');
      const byte = bytes[at++] as number;
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
      if (shift > 63n) throw new Error('protobuf: varint too long');
    }
  };
  const fixed = (size: number): bigint => {
    if (at + size > bytes.length) throw new Error('protobuf: truncated fixed field');
    let value = 0n;
    for (let i = size - 1; i >= 0; i--) value = (value << 8n) | BigInt(bytes[at + i] as number);
    at += size;
    return value;
  };
  while (at < bytes.length) {
    const key = varint();
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    let value: bigint | Uint8Array;
    if (wire === 0) value = varint();
    else if (wire === 1) value = fixed(8);
    else if (wire === 5) value = fixed(4);
    else if (wire === 2) {
      const length = Number(varint());
      if (at + length > bytes.length) throw new Error('protobuf: truncated length-delimited field');
      value = bytes.subarray(at, at + length);
      at += length;
    } else throw new Error(`protobuf: wire type ${wire} not expected in OTLP`);
    const list = fields.get(field) ?? [];
    list.push(value);
    fields.set(field, list);
  }
  return fields;
}

const bytesOf = (fields: Fields, n: number): Uint8Array[] =>
  (fields.get(n) ?? []).filter((v): v is Uint8Array => v instanceof Uint8Array);
const firstBytes = (fields: Fields, n: number): Uint8Array => bytesOf(fields, n)[0] ?? new Uint8Array();
const numberOf = (fields: Fields, n: number): bigint => {
  const v = fields.get(n)?.[0];
  return typeof v === 'bigint' ? v : 0n;
};
const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('utf8');
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

/** AnyValue: string 1, bool 2, int 3, double 4, array 5, kvlist 6, bytes 7. */
function anyValue(bytes: Uint8Array): AttributeValue {
  const f = fieldsOf(bytes);
  if (f.has(1)) return text(firstBytes(f, 1));
  if (f.has(2)) return numberOf(f, 2) !== 0n;
  if (f.has(3)) {
    const n = BigInt.asIntN(64, numberOf(f, 3));
    return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
  }
  if (f.has(4)) {
    const buffer = Buffer.alloc(8);
    buffer.writeBigUInt64LE(numberOf(f, 4));
    return buffer.readDoubleLE(0);
  }
  if (f.has(5)) return bytesOf(fieldsOf(firstBytes(f, 5)), 1).map(anyValue);
  if (f.has(6))
    return bytesOf(fieldsOf(firstBytes(f, 6)), 1).map((kv) => Object.entries(keyValue(kv))[0]?.[1] ?? null);
  if (f.has(7)) return firstBytes(f, 7);
  return null;
}

/** KeyValue: key 1, value 2. */
function keyValue(bytes: Uint8Array): Record<string, AttributeValue> {
  const f = fieldsOf(bytes);
  return { [text(firstBytes(f, 1))]: anyValue(firstBytes(f, 2)) };
}

const attributesOf = (list: Uint8Array[]): Record<string, AttributeValue> =>
  Object.assign({}, ...list.map(keyValue));

/**
 * Decodes an ExportTraceServiceRequest: resource_spans 1 → ResourceSpans (resource 1 → Resource
 * (attributes 1), scope_spans 2 → ScopeSpans (scope 1 → InstrumentationScope (name 1), spans 2 → Span)).
 */
export function decodeTraceRequest(body: Uint8Array): DecodedSpan[] {
  const spans: DecodedSpan[] = [];
  for (const resourceSpans of bytesOf(fieldsOf(body), 1)) {
    const rs = fieldsOf(resourceSpans);
    const resource = attributesOf(bytesOf(fieldsOf(firstBytes(rs, 1)), 1));
    for (const scopeSpans of bytesOf(rs, 2)) {
      const ss = fieldsOf(scopeSpans);
      const scope = text(firstBytes(fieldsOf(firstBytes(ss, 1)), 1));
      for (const span of bytesOf(ss, 2)) spans.push({ ...decodeSpan(span), scope, resource });
    }
  }
  return spans;
}

/**
 * Span: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8 (fixed64 ns),
 * attributes 9, events 11 (name 2, attributes 3), links 13 (trace_id 1, span_id 2, attributes 4),
 * status 15 (message 2, code 3).
 */
function decodeSpan(bytes: Uint8Array): Omit<DecodedSpan, 'scope' | 'resource'> {
  const f = fieldsOf(bytes);
  const status = fieldsOf(firstBytes(f, 15));
  return {
    traceId: hex(firstBytes(f, 1)),
    spanId: hex(firstBytes(f, 2)),
    parentSpanId: hex(firstBytes(f, 4)),
    name: text(firstBytes(f, 5)),
    kind: Number(numberOf(f, 6)),
    startNs: numberOf(f, 7),
    endNs: numberOf(f, 8),
    attributes: attributesOf(bytesOf(f, 9)),
    events: bytesOf(f, 11).map((event) => {
      const e = fieldsOf(event);
      return { name: text(firstBytes(e, 2)), attributes: attributesOf(bytesOf(e, 3)) };
    }),
    links: bytesOf(f, 13).map((link) => {
      const l = fieldsOf(link);
      return {
        traceId: hex(firstBytes(l, 1)),
        spanId: hex(firstBytes(l, 2)),
        attributes: attributesOf(bytesOf(l, 4)),
      };
    }),
    status: { code: Number(numberOf(status, 3)), message: text(firstBytes(status, 2)) },
  };
}

export type OtlpReceiver = {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces). */
  url: string;
  /** Every span received so far, in arrival order. */
  spans: DecodedSpan[];
  /** Every request received so far: its path and content type. */
  requests: { path: string; contentType: string | undefined }[];
  close(): Promise<void>;
};

/**
 * Starts a receiver on 127.0.0.1. It answers 200 with an empty ExportTraceServiceResponse to a
 * request it decoded, 400 to one it could not (and keeps the error in `errors`), 404 elsewhere.
 * `discard`: count requests without decoding them (a benchmark's receiver).
 */
export async function startOtlpReceiver(
  opts: { discard?: boolean } = {},
): Promise<OtlpReceiver & { errors: string[] }> {
  const spans: DecodedSpan[] = [];
  const requests: OtlpReceiver['requests'] = [];
  const errors: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({ path: req.url ?? '', contentType: req.headers['content-type'] });
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      if (opts.discard) {
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        return;
      }
      try {
        if (req.headers['content-type'] !== 'application/x-protobuf') {
          throw new Error(`unexpected content type ${req.headers['content-type']}`);
        }
        const raw = Buffer.concat(chunks);
        const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
        spans.push(...decodeTraceRequest(body));
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      } catch (error) {
        errors.push(String(error));
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    errors,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
