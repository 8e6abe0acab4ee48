// The test collector (test/support/otlp-receiver.ts) against the official OpenTelemetry JS
// exporters, OTLP/HTTP protobuf and OTLP/gRPC: what they send must come out of the receiver
// exactly as the SDK recorded it (ids, parents, times to the nanosecond, every attribute type,
// events, links, status, resource, scope), or the tracing tests that rely on it prove nothing.
// Then its faults: stop()/start() on the same ports, and slow().
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { type ExportResult, ExportResultCode } from '@opentelemetry/core';
import { OTLPTraceExporter as GrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { type OtlpReceiver, startOtlpReceiver } from '../../support/otlp-receiver.ts';

let receiver: OtlpReceiver;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
});

afterAll(() => receiver.close());

// A fault test that failed half-way leaves no fault behind for the next.
beforeEach(async () => {
  await receiver.start();
  receiver.clear();
  receiver.slow(0);
});

interface ExporterOptions {
  timeoutMillis?: number;
}
type ProtoExporterConfig = NonNullable<ConstructorParameters<typeof ProtoTraceExporter>[0]>;

const transports = [
  {
    via: 'http' as const,
    endpoint: () => receiver.httpEndpoint,
    exporter: (o: ExporterOptions = {}): SpanExporter =>
      new ProtoTraceExporter({ url: `${receiver.httpEndpoint}/v1/traces`, ...o }),
  },
  {
    via: 'grpc' as const,
    endpoint: () => receiver.grpcEndpoint,
    exporter: (o: ExporterOptions = {}): SpanExporter => new GrpcTraceExporter({ url: receiver.grpcEndpoint, ...o }),
  },
];

// One of each attribute type the SDK has, and what OTLP carries it as: a JS integer goes as
// int_value (bigint here), any other number as double_value.
const ATTRIBUTES = {
  'gen_ai.request.model': 'gpt-test',
  'http.response.status_code': 200,
  'gateway.cost.nano_usd': 12_345_678_901_234,
  'gateway.largest_safe': Number.MAX_SAFE_INTEGER,
  'gateway.streamed': true,
  'gateway.ratio': 0.25,
  'gateway.members': ['eu-1', 'us-2'],
  'gateway.retry_delays_ms': [100, 250],
  'gateway.key_prefix': 'prx-otlp-secret-7f3a',
};
const DECODED = {
  'gen_ai.request.model': 'gpt-test',
  'http.response.status_code': 200n,
  'gateway.cost.nano_usd': 12_345_678_901_234n,
  'gateway.largest_safe': 9_007_199_254_740_991n,
  'gateway.streamed': true,
  'gateway.ratio': 0.25,
  'gateway.members': ['eu-1', 'us-2'],
  'gateway.retry_delays_ms': [100n, 250n],
  'gateway.key_prefix': 'prx-otlp-secret-7f3a',
};

const nanos = ([s, ns]: [number, number]) => BigInt(s) * 1_000_000_000n + BigInt(ns);

function exportOnce(exporter: SpanExporter, spans: ReadableSpan[]): Promise<ExportResult> {
  return new Promise((resolve) => exporter.export(spans, resolve));
}

/** Finished spans named `name`, not yet exported: what a fault test hands an exporter itself, to see each result. */
async function finished(name: string): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: memory })] });
  provider.getTracer('otlp-receiver-test').startSpan(name).end();
  await provider.forceFlush();
  return memory.getFinishedSpans();
}

function connect(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

describe.each(transports)('OTLP receiver over $via', ({ via, endpoint, exporter }) => {
  it('decodes what the official exporter sends, exactly as the SDK recorded it', async () => {
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'gateway-under-test', 'service.version': '0.1.0' }),
      spanProcessors: [new SimpleSpanProcessor({ exporter: exporter() })],
    });
    const tracer = provider.getTracer('otlp-receiver-test', '1.2.3');
    const earlier = tracer.startSpan('earlier attempt');
    earlier.end();
    const parent = tracer.startSpan('POST /v1/chat/completions', { kind: SpanKind.SERVER });
    const child = tracer.startSpan(
      'upstream call',
      {
        kind: SpanKind.CLIENT,
        attributes: ATTRIBUTES,
        links: [{ context: earlier.spanContext(), attributes: { 'gateway.link': 'retry-of' } }],
      },
      trace.setSpan(ROOT_CONTEXT, parent),
    );
    child.addEvent('first token', { 'gateway.tokens': 3 });
    child.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream 503' });
    child.end();
    parent.setStatus({ code: SpanStatusCode.OK });
    parent.end();
    await provider.forceFlush();

    await receiver.waitFor((s) => s.name === 'POST /v1/chat/completions');
    const inTrace = receiver.trace(parent.spanContext().traceId);
    expect(inTrace).toHaveLength(2); // the linked span is a trace of its own
    const [root, upstream] = inTrace;
    const recorded = child as unknown as ReadableSpan;
    expect(upstream).toEqual({
      traceId: parent.spanContext().traceId,
      spanId: child.spanContext().spanId,
      parentSpanId: parent.spanContext().spanId,
      name: 'upstream call',
      kind: 'SPAN_KIND_CLIENT',
      startTimeUnixNano: nanos(recorded.startTime),
      endTimeUnixNano: nanos(recorded.endTime),
      attributes: DECODED,
      events: [
        { name: 'first token', timeUnixNano: nanos(recorded.events[0]!.time), attributes: { 'gateway.tokens': 3n } },
      ],
      links: [
        {
          traceId: earlier.spanContext().traceId,
          spanId: earlier.spanContext().spanId,
          attributes: { 'gateway.link': 'retry-of' },
        },
      ],
      status: { code: 'STATUS_CODE_ERROR', message: 'upstream 503' },
      resource: expect.objectContaining({ 'service.name': 'gateway-under-test', 'service.version': '0.1.0' }),
      scope: { name: 'otlp-receiver-test', version: '1.2.3' },
      via,
    });
    expect(root).toMatchObject({
      spanId: parent.spanContext().spanId,
      parentSpanId: '',
      kind: 'SPAN_KIND_SERVER',
      status: { code: 'STATUS_CODE_OK', message: '' },
      attributes: {},
      events: [],
      links: [],
    });
    expect(receiver.spans().map((s) => s.name)).toEqual([
      'earlier attempt',
      'upstream call',
      'POST /v1/chat/completions',
    ]);
    // SimpleSpanProcessor: one export request per span ended.
    expect(receiver.requests).toEqual({ http: via === 'http' ? 3 : 0, grpc: via === 'grpc' ? 3 : 0 });
    expect(receiver.rawContaining('prx-otlp-secret-7f3a')).toHaveLength(1);
    expect(receiver.rawContaining('never-exported')).toEqual([]);
    await provider.shutdown();
  });

  it('waitFor rejects, after its timeout, with the spans that did arrive', async () => {
    const exp = exporter();
    expect((await exportOnce(exp, await finished('only span'))).code).toBe(ExportResultCode.SUCCESS);
    await expect(receiver.waitFor((s) => s.name === 'missing', 100)).rejects.toThrow(
      new RegExp(`no span matched[^]*Spans received \\(1\\): only span \\(${via}\\)`),
    );
    await exp.shutdown();
  });

  it('stop() refuses connections until start() serves again on the same port', async () => {
    const spans = await finished('across a restart');
    const exp = exporter({ timeoutMillis: 1_500 });
    expect((await exportOnce(exp, spans)).code).toBe(ExportResultCode.SUCCESS);
    const port = Number(new URL(endpoint()).port);

    await receiver.stop();
    await expect(connect(port)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect((await exportOnce(exp, spans)).code).toBe(ExportResultCode.FAILED);

    await receiver.start();
    expect(Number(new URL(endpoint()).port)).toBe(port);
    await connect(port);
    // The same exporter: a gRPC channel that failed to connect waits out its reconnect backoff
    // (about a second) and fails calls meanwhile, as it would against a real collector.
    const deadline = Date.now() + 5_000;
    let attempts = 1;
    let result = await exportOnce(exp, spans);
    while (result.code !== ExportResultCode.SUCCESS && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      attempts++;
      result = await exportOnce(exp, spans);
    }
    expect(result.code).toBe(ExportResultCode.SUCCESS);
    // OTLP/HTTP connects afresh: its first export after start() goes through.
    if (via === 'http') expect(attempts).toBe(1);
    expect(receiver.spans().filter((s) => s.name === 'across a restart').length).toBeGreaterThanOrEqual(2);
    await exp.shutdown();
  });

  it('stop() while an answer is held back drops it: the export in flight fails', async () => {
    const spans = await finished('in flight');
    receiver.slow(5_000);
    const exp = exporter({ timeoutMillis: 1_500 });
    const inFlight = exportOnce(exp, spans);
    await receiver.waitFor((s) => s.name === 'in flight');
    await receiver.stop();
    expect((await inFlight).code).toBe(ExportResultCode.FAILED);
    await exp.shutdown();
  });

  it('slow(ms) holds the answer back: an exporter that waits less fails, one that waits longer succeeds', async () => {
    const spans = await finished('slow collector');
    receiver.slow(800);
    const impatient = exporter({ timeoutMillis: 200 });
    let started = Date.now();
    expect((await exportOnce(impatient, spans)).code).toBe(ExportResultCode.FAILED);
    expect(Date.now() - started).toBeLessThan(800);

    const patient = exporter({ timeoutMillis: 5_000 });
    started = Date.now();
    expect((await exportOnce(patient, spans)).code).toBe(ExportResultCode.SUCCESS);
    expect(Date.now() - started).toBeGreaterThanOrEqual(750);
    // Kept on arrival, answered or not: both requests' spans are there.
    expect(receiver.spans().filter((s) => s.name === 'slow collector')).toHaveLength(2);

    receiver.slow(0);
    started = Date.now();
    expect((await exportOnce(patient, spans)).code).toBe(ExportResultCode.SUCCESS);
    expect(Date.now() - started).toBeLessThan(750);
    await impatient.shutdown();
    await patient.shutdown();
  });
});

describe('OTLP receiver over HTTP, beyond the exporter', () => {
  it('reads a gzipped export, and keeps its headers and gunzipped body for a search', async () => {
    const exp = new ProtoTraceExporter({
      url: `${receiver.httpEndpoint}/v1/traces`,
      compression: 'gzip' as ProtoExporterConfig['compression'],
      headers: { authorization: 'Bearer collector-token-91c2' },
    });
    expect((await exportOnce(exp, await finished('gzipped'))).code).toBe(ExportResultCode.SUCCESS);
    const [span] = await receiver.waitFor((s) => s.name === 'gzipped');
    expect(span!.via).toBe('http');
    expect(receiver.raw[0]!.headers['content-encoding']).toBe('gzip');
    expect(receiver.rawContaining('gzipped')).toHaveLength(1);
    expect(receiver.rawContaining('collector-token-91c2')).toHaveLength(1);
    await exp.shutdown();
  });

  it('decodes OTLP/JSON as it decodes protobuf, int64 past 2^53 included, and answers in kind', async () => {
    // The same request both ways: protobuf encoded by the official definitions, JSON as the
    // OTLP/JSON rules write it (hex ids in any case, enums as numbers, int64 as strings or numbers).
    const defs = protoLoader.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
      includeDirs: [fileURLToPath(new URL('../../fixtures/otlp/', import.meta.url))],
    });
    const exportMethod = (defs['opentelemetry.proto.collector.trace.v1.TraceService'] as protoLoader.ServiceDefinition)
      .Export!;
    const traceId = '5b8efff798038103d269b633813fc60c';
    const spanId = 'eee19b7ec3c1b174';
    const span = (json: boolean) => ({
      traceId: json ? traceId.toUpperCase() : Buffer.from(traceId, 'hex'),
      spanId: json ? spanId : Buffer.from(spanId, 'hex'),
      name: 'hand-made',
      kind: json ? 3 : 'SPAN_KIND_CLIENT',
      startTimeUnixNano: '1700000000123456789',
      endTimeUnixNano: '1700000000987654321',
      attributes: [
        { key: 'max', value: { intValue: '9223372036854775807' } },
        { key: 'min', value: { intValue: '-9223372036854775808' } },
        { key: 'empty', value: { stringValue: '' } },
        { key: 'nested', value: { kvlistValue: { values: [{ key: 'k', value: { boolValue: false } }] } } },
      ],
      status: { code: json ? 2 : 'STATUS_CODE_ERROR', message: 'boom' },
    });
    const request = (json: boolean) => ({
      resourceSpans: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'hand' } }] },
          scopeSpans: [{ scope: { name: 'by-hand', version: '1' }, spans: [span(json)] }],
        },
      ],
    });

    const binary = await fetch(`${receiver.httpEndpoint}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf' },
      body: exportMethod.requestSerialize(request(false)),
    });
    expect(binary.status).toBe(200);
    expect(binary.headers.get('content-type')).toBe('application/x-protobuf');
    expect((await binary.arrayBuffer()).byteLength).toBe(0); // an empty ExportTraceServiceResponse
    // A bare number past 2^53, as the proto3 JSON mapping allows for int64.
    const body = JSON.stringify(request(true)).replace('"-9223372036854775808"', '-9223372036854775808');
    const json = await fetch(`${receiver.httpEndpoint}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body,
    });
    expect(json.status).toBe(200);
    expect(json.headers.get('content-type')).toBe('application/json');
    expect(await json.json()).toEqual({});

    const [fromBinary, fromJson] = receiver.spans();
    expect(fromBinary).toEqual({
      traceId,
      spanId,
      parentSpanId: '',
      name: 'hand-made',
      kind: 'SPAN_KIND_CLIENT',
      startTimeUnixNano: 1_700_000_000_123_456_789n,
      endTimeUnixNano: 1_700_000_000_987_654_321n,
      attributes: {
        max: 9_223_372_036_854_775_807n,
        min: -9_223_372_036_854_775_808n,
        empty: '',
        nested: { k: false },
      },
      events: [],
      links: [],
      status: { code: 'STATUS_CODE_ERROR', message: 'boom' },
      resource: { 'service.name': 'hand' },
      scope: { name: 'by-hand', version: '1' },
      via: 'http',
    });
    expect(fromJson).toEqual(fromBinary);
  });

  it('answers what is not an OTLP/HTTP trace export with the status the specification gives', async () => {
    const post = (path: string, type: string, body: string | Buffer) =>
      fetch(`${receiver.httpEndpoint}${path}`, { method: 'POST', headers: { 'content-type': type }, body });
    expect((await post('/v1/traces', 'text/plain', 'hello')).status).toBe(415);
    expect((await post('/v1/logs', 'application/x-protobuf', '')).status).toBe(404);
    expect((await post('/v1/traces', 'application/x-protobuf', Buffer.from([0x0a, 0xff]))).status).toBe(400);
    expect((await post('/v1/traces', 'application/json', '{not json')).status).toBe(400);
    expect((await fetch(`${receiver.httpEndpoint}/v1/traces`)).status).toBe(405);
    expect(receiver.rejected.map((r) => r.reason)).toEqual([
      expect.stringContaining('content-type text/plain'),
      expect.stringContaining('not an ExportTraceServiceRequest'),
      expect.stringContaining('not an ExportTraceServiceRequest'),
    ]);
    expect(receiver.spans()).toEqual([]);
  });
});

describe('OTLP receiver over gRPC, beyond the exporter', () => {
  it('answers an Export it cannot decode with INVALID_ARGUMENT, and says so', async () => {
    const client = new grpc.Client(new URL(receiver.grpcEndpoint).host, grpc.credentials.createInsecure());
    const error = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0xff]), // resource_spans, declared 255 bytes long, with none sent
        (err) => resolve(err),
      ),
    );
    client.close();
    expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(receiver.rejected).toEqual([
      { via: 'grpc', reason: expect.stringContaining('not an ExportTraceServiceRequest') },
    ]);
    expect(receiver.requests.grpc).toBe(1);
    expect(receiver.raw[0]!.body).toEqual(Buffer.from([0x0a, 0xff]));
  });
});
