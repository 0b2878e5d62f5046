import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../infra/config.ts';
import {
  activeTraceparent,
  inSpan,
  inSpanSync,
  linksTo,
  spanContextOf,
  spansOn,
} from '../../infra/telemetry/spans.ts';
import { tracing, tracingSettings } from '../../infra/telemetry/tracing.ts';

/*
 * Which OTEL_* variables turn tracing on, which turn it off, and which values stop the start with a
 * message naming the variable (infra/telemetry/tracing.ts); the product's spans while off
 * (infra/telemetry/spans.ts). What a traced server exports: tests/infra/tracing.e2e.test.ts.
 */

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

function refusal(env: NodeJS.ProcessEnv): string {
  try {
    tracingSettings(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe('the OTEL_* variables', () => {
  it('leave tracing off without an endpoint, and say why', () => {
    expect(tracingSettings({})).toEqual({ on: false, why: 'no OTEL_EXPORTER_OTLP_ENDPOINT' });
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_SERVICE_NAME: 'x' })).toMatchObject({
      on: false,
    });
  });

  it('turn it on with OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', () => {
    expect(tracingSettings(ENDPOINT)).toEqual({
      on: true,
      endpoint: 'http://collector:4318',
      sampler: { name: 'parentbased_always_on', ratio: 1 },
      batch: {},
      logLevel: 'warn',
    });
    expect(
      tracingSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example/v1/traces' }),
    ).toMatchObject({ on: true, endpoint: 'https://collector.example/v1/traces' });
  });

  it('stay off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, an endpoint or not', () => {
    expect(tracingSettings({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' })).toEqual({
      on: false,
      why: 'OTEL_SDK_DISABLED=true',
    });
    expect(tracingSettings({ ...ENDPOINT, OTEL_SDK_DISABLED: 'TRUE' })).toMatchObject({ on: false });
    expect(tracingSettings({ ...ENDPOINT, OTEL_SDK_DISABLED: 'false' })).toMatchObject({ on: true });
    expect(tracingSettings({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' })).toEqual({
      on: false,
      why: 'OTEL_TRACES_EXPORTER=none',
    });
    expect(tracingSettings({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'otlp' })).toMatchObject({ on: true });
  });

  it('read the sampler, its ratio and the batch processor settings', () => {
    expect(
      tracingSettings({
        ...ENDPOINT,
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_BSP_EXPORT_TIMEOUT: '5000',
        OTEL_BSP_MAX_QUEUE_SIZE: '4096',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '1024',
        OTEL_LOG_LEVEL: 'ERROR',
      }),
    ).toEqual({
      on: true,
      endpoint: 'http://collector:4318',
      sampler: { name: 'parentbased_traceidratio', ratio: 0.25 },
      batch: {
        scheduledDelayMillis: 200,
        exportTimeoutMillis: 5000,
        maxQueueSize: 4096,
        maxExportBatchSize: 1024,
      },
      logLevel: 'error',
    });
  });

  it('refuse a value they cannot use, naming the variable', () => {
    expect(refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: 'localhost:4318' })).toBe(
      'Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318": expected an http:// or https:// URL',
    );
    expect(refusal({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'collector' })).toMatch(
      /^Invalid configuration: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="collector": /,
    );
    expect(refusal({ ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toBe(
      'Invalid configuration: OTEL_EXPORTER_OTLP_PROTOCOL="grpc": only http/protobuf is supported',
    );
    expect(refusal({ ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' })).toMatch(
      /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http\/json"/,
    );
    expect(refusal({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'zipkin' })).toMatch(
      /OTEL_TRACES_EXPORTER="zipkin": expected otlp or none/,
    );
    expect(refusal({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'sometimes' })).toMatch(
      /^Invalid configuration: OTEL_TRACES_SAMPLER="sometimes"/,
    );
    expect(
      refusal({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }),
    ).toMatch(/OTEL_TRACES_SAMPLER_ARG="2": expected a ratio from 0 to 1/);
    expect(refusal({ ...ENDPOINT, OTEL_BSP_SCHEDULE_DELAY: 'soon' })).toMatch(
      /OTEL_BSP_SCHEDULE_DELAY="soon"/,
    );
    expect(refusal({ ...ENDPOINT, OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '5000' })).toMatch(
      /OTEL_BSP_MAX_EXPORT_BATCH_SIZE="5000": expected no more than OTEL_BSP_MAX_QUEUE_SIZE/,
    );
    expect(refusal({ ...ENDPOINT, OTEL_LOG_LEVEL: 'loud' })).toMatch(/OTEL_LOG_LEVEL="loud"/);
    // A bad value stops the start even where tracing would be off: the operator meant something.
    expect(refusal({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'nope' })).toMatch(
      /OTEL_EXPORTER_OTLP_ENDPOINT/,
    );
  });
});

describe('the product spans while tracing is off', () => {
  it('runs the work alone: no span recorded, no trace context for events', async () => {
    expect(tracing().on).toBe(false);
    expect(spansOn()).toBe(false);
    const seen: boolean[] = [];
    const value = await inSpan('articles.edit', { attributes: () => ({ built: true }) }, async (span) => {
      seen.push(span.isRecording());
      expect(activeTraceparent()).toBeUndefined();
      return 42;
    });
    expect(value).toBe(42);
    expect(inSpanSync('decide article', {}, (span) => span.isRecording())).toBe(false);
    expect(seen).toEqual([false]);
    await expect(
      inSpan('append article', {}, async () => {
        throw new Error('as is');
      }),
    ).rejects.toThrow('as is');
  });
});

describe('a traceparent carried by an event', () => {
  it('names the span a delivery links to', () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(spanContextOf(traceparent)).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: 1,
      isRemote: true,
    });
    expect(linksTo(traceparent)).toEqual([{ context: spanContextOf(traceparent) }]);
  });

  it('is no link when missing or malformed', () => {
    for (const bad of [
      null,
      undefined,
      '',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7',
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
    ]) {
      expect(linksTo(bad), String(bad)).toEqual([]);
    }
  });
});
