// The tracing settings as the OpenTelemetry variables and the gateway's own TRACE_* name them:
// off unless an endpoint is set, and a value that cannot be used refused with the setting's name.
import { describe, expect, it } from 'vitest';
import { loadTracingConfig } from '../../../src/config/tracing-config.ts';

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };

describe('tracing settings', () => {
  it('are off without an OTLP endpoint, and on with one (either variable)', () => {
    expect(loadTracingConfig({}).enabled).toBe(false);
    expect(loadTracingConfig(ENDPOINT).enabled).toBe(true);
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }).enabled).toBe(true);
  });

  it('OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none turn an endpoint off', () => {
    expect(loadTracingConfig({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }).enabled).toBe(false);
    expect(loadTracingConfig({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }).enabled).toBe(false);
    expect(() => loadTracingConfig({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(/OTEL_TRACES_EXPORTER/);
  });

  it('have the defaults a demanding operator expects', () => {
    expect(loadTracingConfig(ENDPOINT)).toMatchObject({
      protocol: 'http/protobuf',
      sampler: { kind: 'parentbased_always_on' },
      serviceName: 'metered-ai-gateway',
      queue: { maxQueueSize: 2048, maxExportBatchSize: 512, scheduleDelayMs: 5000, exportTimeoutMs: 30_000 },
      callerContext: 'link',
      upstreamTraceparent: false,
      content: { capture: false, maxBytes: 4096 },
      uiUrl: undefined,
      responseHeader: false,
    });
  });

  it('TRACE_RESPONSE_HEADER: off unless the operator turns it on, and a value that is neither on nor off refused naming it', () => {
    for (const on of ['1', 'true', 'YES', ' on '])
      expect(loadTracingConfig({ ...ENDPOINT, TRACE_RESPONSE_HEADER: on }).responseHeader).toBe(true);
    for (const off of ['0', 'false', 'no', 'OFF', ''])
      expect(loadTracingConfig({ ...ENDPOINT, TRACE_RESPONSE_HEADER: off }).responseHeader).toBe(false);
    for (const bad of ['maybe', '2', 'enabled'])
      expect(() => loadTracingConfig({ ...ENDPOINT, TRACE_RESPONSE_HEADER: bad })).toThrow(
        `TRACE_RESPONSE_HEADER must be 1 or 0 (true/false, yes/no, on/off), got "${bad}"`,
      );
  });

  it('read the protocol, the signal-specific variable first', () => {
    expect(loadTracingConfig({ ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).protocol).toBe('grpc');
    expect(
      loadTracingConfig({
        ...ENDPOINT,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      }).protocol,
    ).toBe('http/protobuf');
    expect(() => loadTracingConfig({ ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf or grpc/,
    );
  });

  it('read the standard samplers, and refuse a ratio outside 0..1', () => {
    expect(
      loadTracingConfig({
        ...ENDPOINT,
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.01',
      }).sampler,
    ).toEqual({ kind: 'parentbased_traceidratio', ratio: 0.01 });
    expect(loadTracingConfig({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio' }).sampler).toEqual({
      kind: 'traceidratio',
      ratio: 1,
    });
    expect(loadTracingConfig({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'ALWAYS_OFF' }).sampler).toEqual({
      kind: 'always_off',
    });
    expect(() => loadTracingConfig({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'jaeger_remote' })).toThrow(
      /OTEL_TRACES_SAMPLER/,
    );
    for (const arg of ['1.5', '-0.1', 'half'])
      expect(() =>
        loadTracingConfig({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: arg }),
      ).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
  });

  it('bound the export queue, a batch never larger than the queue', () => {
    const q = loadTracingConfig({
      ...ENDPOINT,
      OTEL_BSP_MAX_QUEUE_SIZE: '100',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512',
    }).queue;
    expect(q).toMatchObject({ maxQueueSize: 100, maxExportBatchSize: 100 });
    expect(() => loadTracingConfig({ ...ENDPOINT, OTEL_BSP_MAX_QUEUE_SIZE: '0' })).toThrow(/OTEL_BSP_MAX_QUEUE_SIZE/);
    expect(() => loadTracingConfig({ ...ENDPOINT, OTEL_BSP_SCHEDULE_DELAY: 'soon' })).toThrow(
      /OTEL_BSP_SCHEDULE_DELAY/,
    );
  });

  it("read the gateway's own: caller context, upstream traceparent, content capture, the trace UI", () => {
    const c = loadTracingConfig({
      ...ENDPOINT,
      TRACE_CALLER_CONTEXT: 'continue',
      TRACE_UPSTREAM_TRACEPARENT: '1',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
      TRACE_CONTENT_MAX_BYTES: '1000',
      TRACE_UI_URL: 'http://localhost:16686/trace/{trace_id}',
    });
    expect(c).toMatchObject({
      callerContext: 'continue',
      upstreamTraceparent: true,
      content: { capture: true, maxBytes: 1000 },
      uiUrl: 'http://localhost:16686/trace/{trace_id}',
    });
    expect(() => loadTracingConfig({ TRACE_CALLER_CONTEXT: 'trust' })).toThrow(
      /TRACE_CALLER_CONTEXT must be link, continue or ignore/,
    );
    expect(() => loadTracingConfig({ TRACE_UI_URL: 'http://localhost:16686/trace/' })).toThrow(/\{trace_id\}/);
    expect(() => loadTracingConfig({ TRACE_UI_URL: 'javascript:alert(1)//{trace_id}' })).toThrow(/TRACE_UI_URL/);
  });
});
