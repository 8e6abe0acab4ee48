// Traces (docs/observability.md), end to end: gateways with tracing on export to an OTLP receiver
// of the test harness (test/support/otlp-receiver.ts), which decodes what arrives with the official
// OTLP protobuf definitions, as a collector would. Clients are the official SDKs, @grpc/grpc-js and
// plain fetch; the upstream is the simulator (a second deployment under /fallback for failovers).
//
// Gateway A exports OTLP/HTTP protobuf, continues callers' traceparents (TRACE_CALLER_CONTEXT=
// continue) and runs video jobs on a task queue of its own; gateway B exports OTLP/gRPC, links
// callers' traceparents (the default), captures content within a bound and sends traceparent
// upstream.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { db, mistyped, newKey, type TestKey, uniqueMarker, upstreamRequests } from '../support/context.ts';
import { extraGateway } from '../support/extra-gateway.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { UPSTREAM_KEY } from '../support/global-setup.ts';
import { type ReceivedSpan, type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { startWorker, videoEnv } from '../support/temporal.ts';

const LONG = { timeout: 120_000 };
const SERVER = 'SPAN_KIND_SERVER';
const CLIENT = 'SPAN_KIND_CLIENT';
const INTERNAL = 'SPAN_KIND_INTERNAL';
const ERROR = 'STATUS_CODE_ERROR';

/** Exports every 50 ms; a dead collector's batch is counted dropped within 3 s (a loaded machine's exports stay well inside it). */
const QUICK_EXPORT = {
  OTEL_BSP_SCHEDULE_DELAY: '50',
  OTEL_EXPORTER_OTLP_TIMEOUT: '3000',
  OTEL_BSP_EXPORT_TIMEOUT: '5000',
  UPSTREAM_RETRY_BASE_MS: '10',
  // The primary deployment keeps failing in the failover test: never cooled, so each request tries it first.
  DEPLOYMENT_ALLOWED_FAILS: '1000',
};

const WORKER_QUEUE = 'video-traces-worker';

let rxA: OtlpReceiver;
let rxB: OtlpReceiver;
let a: GatewayProcess;
let b: GatewayProcess;
let videoDir: string;

beforeAll(async () => {
  [rxA, rxB] = await Promise.all([startOtlpReceiver(), startOtlpReceiver()]);
  const sim = inject('simulatorUrl');
  const fallback = {
    OPENAI_FALLBACK_BASE_URL: `${sim}/fallback/v1`,
    OPENAI_FALLBACK_API_KEY: `${UPSTREAM_KEY}-fallback`,
  };
  videoDir = fs.mkdtempSync(path.join(inject('workDir'), 'trace-videos-'));
  [a, b] = await Promise.all([
    extraGateway('traces-a', {
      ...QUICK_EXPORT,
      ...fallback,
      ...videoEnv(inject('temporalAddress'), videoDir, 'video-traces'),
      OTEL_EXPORTER_OTLP_ENDPOINT: rxA.httpEndpoint,
      OTEL_SERVICE_NAME: 'gateway-a',
      TRACE_CALLER_CONTEXT: 'continue',
    }),
    extraGateway('traces-b', {
      ...QUICK_EXPORT,
      OTEL_EXPORTER_OTLP_ENDPOINT: rxB.grpcEndpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
      TRACE_CONTENT_MAX_BYTES: '200',
      TRACE_UPSTREAM_TRACEPARENT: '1',
      // B only starts video jobs: `npm run worker`, a process of its own, runs them.
      ...videoEnv(inject('temporalAddress'), videoDir, WORKER_QUEUE),
      VIDEO_WORKER: '0',
    }),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await Promise.all([rxA?.close(), rxB?.close()]);
});

const openaiAt = (g: GatewayProcess, k: TestKey) =>
  new OpenAI({ apiKey: k.apiKey, baseURL: `${g.httpUrl}/v1`, maxRetries: 0 });
const anthropicAt = (g: GatewayProcess, k: TestKey) =>
  new Anthropic({ apiKey: k.apiKey, baseURL: g.httpUrl, maxRetries: 0 });

/** The spans of the request `requestId` once every name in `names` has arrived. */
async function requestTrace(rx: OtlpReceiver, requestId: string, names: string[]): Promise<ReceivedSpan[]> {
  const [server] = await rx.waitFor(
    (s) => s.kind === SERVER && s.attributes['gateway.request_id'] === requestId,
    10_000,
  );
  const traceId = server!.traceId;
  for (const name of names) await rx.waitFor((s) => s.traceId === traceId && s.name === name, 10_000);
  return rx.trace(traceId);
}

const named = (spans: ReceivedSpan[], name: string): ReceivedSpan => {
  const found = spans.find((s) => s.name === name);
  if (!found) throw new Error(`no span ${name} among ${spans.map((s) => s.name).join(', ')}`);
  return found;
};

async function usageRowOf(requestId: string) {
  return (
    await db().query(
      `SELECT cost_nano::text AS cost, provider_cost_nano::text AS provider_cost, price_version_id::text AS price_version,
              COALESCE(markup_version_id, 0)::text AS markup_version, deployment, status
         FROM usage_records WHERE request_id = $1`,
      [requestId],
    )
  ).rows[0] as Record<string, string> | undefined;
}

const RPC_CHAT = 'gateway.v1.InferenceService/ChatCompletion';

/** The first line of the gateway's log that `match` accepts, once it has been written (5 s at most). */
async function logLine(g: GatewayProcess, match: (line: string) => boolean): Promise<string | undefined> {
  const until = Date.now() + 5_000;
  for (;;) {
    const line = fs.readFileSync(g.logFile, 'utf8').split('\n').find(match);
    if (line || Date.now() > until) return line;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('traces of inference requests', () => {
  it(
    'a unary chat: server span, in-process RPC, hold, GenAI attempt and settle, with the money on the request span',
    LONG,
    async () => {
      const k = await newKey('2');
      const marker = uniqueMarker('trace-unary');
      const { data, response } = await openaiAt(a, k)
        .chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: `${marker} [sim tokens=5]` }],
        })
        .withResponse();
      const requestId = response.headers.get('x-request-id')!;
      const spans = await requestTrace(rxA, requestId, [
        'POST /v1/chat/completions',
        RPC_CHAT,
        'gateway.hold',
        'chat gpt-4o-mini',
        'gateway.settle',
      ]);
      const server = named(spans, 'POST /v1/chat/completions');
      const rpc = named(spans, RPC_CHAT);
      const hold = named(spans, 'gateway.hold');
      const attempt = named(spans, 'chat gpt-4o-mini');
      const settle = named(spans, 'gateway.settle');

      // One trace, nested as the request went.
      expect(server.parentSpanId).toBe('');
      expect(rpc.parentSpanId).toBe(server.spanId);
      for (const child of [hold, attempt, settle]) expect(child.parentSpanId).toBe(rpc.spanId);
      expect([server.kind, rpc.kind, hold.kind, attempt.kind, settle.kind]).toEqual([
        SERVER,
        INTERNAL,
        INTERNAL,
        CLIENT,
        INTERNAL,
      ]);
      expect(server.resource['service.name']).toBe('gateway-a');
      expect(server.via).toBe('http');

      expect(server.attributes).toMatchObject({
        'http.request.method': 'POST',
        'http.route': '/v1/chat/completions',
        'http.response.status_code': 200n,
        'gateway.request_id': requestId,
        'gateway.key.id': k.keyId,
      });
      expect(rpc.attributes).toMatchObject({
        'rpc.system': 'connect_rpc',
        'rpc.service': 'gateway.v1.InferenceService',
        'rpc.method': 'ChatCompletion',
      });

      // The money: what the caller was told, what the usage row says.
      const row = (await usageRowOf(requestId))!;
      const cost = BigInt(response.headers.get('x-gateway-cost-nano-usd')!);
      expect(cost).toBeGreaterThan(0n);
      expect(rpc.attributes).toMatchObject({
        'gateway.request_id': requestId,
        'gateway.account.id': k.accountId,
        'gateway.charge_nano': cost,
        'gateway.provider_cost_nano': BigInt(row.provider_cost!),
        'gateway.price_version': BigInt(row.price_version!),
        'gateway.markup_version': BigInt(row.markup_version!),
        'gateway.billing_mode': 'hold',
        'gateway.outcome': 'ok',
        'gateway.deployment': row.deployment,
        'gen_ai.usage.input_tokens': BigInt(data.usage!.prompt_tokens),
        'gen_ai.usage.output_tokens': 5n,
      });
      expect(BigInt(row.cost!)).toBe(cost);
      expect(rpc.attributes['gateway.hold_nano'] as bigint).toBeGreaterThanOrEqual(cost);
      expect(hold.attributes['gateway.hold_nano']).toBe(rpc.attributes['gateway.hold_nano']);
      expect(settle.attributes['gateway.charge_nano']).toBe(cost);

      // The GenAI conventions on the attempt.
      expect(attempt.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o-mini',
        'gen_ai.response.id': data.id,
        'gen_ai.response.finish_reasons': ['stop'],
        'gen_ai.usage.input_tokens': BigInt(data.usage!.prompt_tokens),
        'gen_ai.usage.output_tokens': 5n,
        'server.address': '127.0.0.1',
        'http.response.status_code': 200n,
        'gateway.deployment': row.deployment,
        'gateway.attempt': 1n,
      });
      expect(typeof attempt.attributes['gen_ai.response.model']).toBe('string');
      expect(attempt.status.code).not.toBe(ERROR);

      // Log lines carry the trace: the request's own line (the log is written in batches, 100 ms apart).
      const line = await logLine(a, (l) => l.includes(`"requestId":"${requestId}"`) && l.includes('"msg":"request"'));
      expect(line).toContain(`"trace_id":"${server.traceId}"`);
    },
  );

  it(
    'a stream: the first token is an event on the attempt, the usage is on it when the stream ends',
    LONG,
    async () => {
      const k = await newKey('2');
      const { data: stream, response } = await openaiAt(a, k)
        .chat.completions.create({
          model: 'gpt-4o-mini',
          stream: true,
          messages: [{ role: 'user', content: `${uniqueMarker('trace-stream')} [sim tokens=6]` }],
        })
        .withResponse();
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
      expect(text).toBe('w1 w2 w3 w4 w5 w6');
      const requestId = response.headers.get('x-request-id')!;
      const spans = await requestTrace(rxA, requestId, [
        'gateway.v1.InferenceService/StreamChatCompletion',
        'chat gpt-4o-mini',
        'gateway.settle',
      ]);
      const rpc = named(spans, 'gateway.v1.InferenceService/StreamChatCompletion');
      const attempt = named(spans, 'chat gpt-4o-mini');
      expect(attempt.parentSpanId).toBe(rpc.spanId);
      const first = attempt.events.find((e) => e.name === 'gen_ai.first_token');
      expect(first).toBeDefined();
      expect(first!.timeUnixNano).toBeGreaterThanOrEqual(attempt.startTimeUnixNano);
      expect(first!.timeUnixNano).toBeLessThanOrEqual(attempt.endTimeUnixNano);
      expect(attempt.attributes).toMatchObject({
        'gen_ai.usage.output_tokens': 6n,
        'gen_ai.response.finish_reasons': ['stop'],
      });
      const row = (await usageRowOf(requestId))!;
      expect(rpc.attributes['gateway.charge_nano']).toBe(BigInt(row.cost!));
      expect(rpc.attributes['gateway.outcome']).toBe('ok');
    },
  );

  it('a Claude message through the Anthropic SDK', LONG, async () => {
    const k = await newKey('2');
    const { data, response } = await anthropicAt(a, k)
      .messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 100,
        messages: [{ role: 'user', content: `${uniqueMarker('trace-claude')} [sim tokens=3]` }],
      })
      .withResponse();
    const requestId = response.headers.get('x-request-id')!;
    const spans = await requestTrace(rxA, requestId, [
      'POST /v1/messages',
      'gateway.v1.InferenceService/CreateMessage',
      'chat claude-haiku-4-5',
      'gateway.settle',
    ]);
    const attempt = named(spans, 'chat claude-haiku-4-5');
    expect(attempt.attributes).toMatchObject({
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.operation.name': 'chat',
      'gen_ai.response.id': data.id,
      'gen_ai.response.finish_reasons': [data.stop_reason],
      'gen_ai.usage.output_tokens': BigInt(data.usage.output_tokens),
    });
    const rpc = named(spans, 'gateway.v1.InferenceService/CreateMessage');
    expect(rpc.attributes['gateway.charge_nano']).toBe(BigInt(response.headers.get('x-gateway-cost-nano-usd')!));
  });

  it('a failed upstream: every attempt failed on its span, the request charged nothing', LONG, async () => {
    const k = await newKey('2');
    const err = await anthropicAt(a, k)
      .messages.create({
        model: 'claude-haiku-4-5',
        max_tokens: 50,
        messages: [{ role: 'user', content: `${uniqueMarker('trace-fail')} [sim fault=500]` }],
      })
      .then(
        () => {
          throw new Error('expected a failure');
        },
        (e: unknown) => e as InstanceType<typeof Anthropic.APIError>,
      );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(500);
    const requestId = err.headers!.get('x-request-id')!;
    const spans = await requestTrace(rxA, requestId, ['gateway.settle']);
    const attempts = spans.filter((s) => s.name === 'chat claude-haiku-4-5');
    expect(attempts.length).toBe(3); // the first try and UPSTREAM_RETRIES (2)
    for (const t of attempts) {
      expect(t.status.code).toBe(ERROR);
      expect(t.attributes['http.response.status_code']).toBe(500n);
      expect(t.attributes['error.type']).toBe('500');
    }
    expect(attempts.map((t) => t.attributes['gateway.attempt.after'])).toEqual([undefined, 'retry', 'retry']);
    const rpc = named(spans, 'gateway.v1.InferenceService/CreateMessage');
    expect(rpc.status.code).toBe(ERROR);
    expect(rpc.attributes).toMatchObject({ 'gateway.charge_nano': 0n, 'gateway.outcome': 'upstream_error' });
    expect(named(spans, 'POST /v1/messages').attributes['http.response.status_code']).toBe(500n);
    expect((await usageRowOf(requestId))?.cost).toBe('0');
  });

  it(
    'a failover: the failed deployment and the one that answered, one charge at the one that answered',
    LONG,
    async () => {
      const k = await newKey('2');
      const { response } = await openaiAt(a, k)
        .chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: `${uniqueMarker('trace-failover')} [sim fault=500 tokens=2]` }],
        })
        .withResponse();
      const requestId = response.headers.get('x-request-id')!;
      const spans = await requestTrace(rxA, requestId, ['gateway.settle']);
      const attempts = spans
        .filter((s) => s.name === 'chat gpt-4o-mini')
        .sort((x, y) => Number(x.attributes['gateway.attempt']) - Number(y.attributes['gateway.attempt']));
      expect(attempts).toHaveLength(2);
      expect(attempts[0]!.status.code).toBe(ERROR);
      expect(attempts[0]!.attributes['http.response.status_code']).toBe(500n);
      expect(attempts[1]!.attributes).toMatchObject({
        'gateway.attempt.after': 'failover',
        'http.response.status_code': 200n,
        'gen_ai.usage.output_tokens': 2n,
      });
      expect(attempts[1]!.attributes['gateway.deployment']).not.toBe(attempts[0]!.attributes['gateway.deployment']);
      const row = (await usageRowOf(requestId))!;
      expect(attempts[1]!.attributes['gateway.deployment']).toBe(row.deployment);
      const rpc = named(spans, RPC_CHAT);
      expect(rpc.attributes).toMatchObject({
        'gateway.deployment': row.deployment,
        'gateway.charge_nano': BigInt(row.cost!),
      });
      expect(spans.filter((s) => s.name === 'gateway.settle')).toHaveLength(1);
    },
  );
});

describe('traces of refused requests', () => {
  it('401: the server span says so, and nothing ran behind it', LONG, async () => {
    const r = await fetch(`${a.httpUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer prx-notakeyatall', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(r.status).toBe(401);
    const requestId = r.headers.get('x-request-id')!;
    // A key in the path (a caller's mistake) is masked on the span.
    const k = await newKey('1');
    const stray = await fetch(`${a.httpUrl}/v1/${k.apiKey}`, { headers: { authorization: `Bearer ${k.apiKey}` } });
    expect(stray.status).toBe(404);
    const [lost] = await rxA.waitFor((s) => s.attributes['gateway.request_id'] === stray.headers.get('x-request-id'));
    expect(lost!.attributes['url.path']).toBe('/v1/prx-…');
    expect(rxA.rawContaining(k.apiKey)).toEqual([]);
    const [server] = await rxA.waitFor((s) => s.attributes['gateway.request_id'] === requestId && s.kind === SERVER);
    expect(server!.attributes).toMatchObject({ 'http.response.status_code': 401n, 'error.type': '401' });
    // A 4xx is the caller's: the server span is not failed (OpenTelemetry's HTTP conventions).
    expect(server!.status.code).not.toBe(ERROR);
    await new Promise((res) => setTimeout(res, 300));
    expect(rxA.trace(server!.traceId).map((s) => s.name)).toEqual(['POST /v1/chat/completions']);
  });

  it('402: the hold refused on its span, no upstream attempt', LONG, async () => {
    const k = await newKey('0');
    const err = await openaiAt(a, k)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => {
          throw new Error('expected a failure');
        },
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
    expect(err.status).toBe(402);
    const requestId = err.headers!.get('x-request-id')!;
    const spans = await requestTrace(rxA, requestId, ['gateway.hold', RPC_CHAT]);
    const hold = named(spans, 'gateway.hold');
    expect(hold.status.code).toBe(ERROR);
    expect(hold.attributes).toMatchObject({ 'error.type': 'insufficient_quota', 'http.response.status_code': 402n });
    expect(named(spans, RPC_CHAT).attributes['error.type']).toBe('insufficient_quota');
    expect(named(spans, 'POST /v1/chat/completions').attributes['http.response.status_code']).toBe(402n);
    expect(spans.some((s) => s.kind === CLIENT)).toBe(false);
  });
});

describe('propagation', () => {
  const callerTrace = () => {
    const traceId = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('hex');
    const spanId = Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString('hex');
    return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
  };

  it("TRACE_CALLER_CONTEXT=continue: the caller's traceparent and tracestate continue its trace", LONG, async () => {
    const k = await newKey('1');
    const caller = callerTrace();
    const { response } = await openaiAt(a, k)
      .chat.completions.create(
        { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'continued [sim tokens=1]' }] },
        { headers: { traceparent: caller.traceparent, tracestate: 'vendor=abc' } },
      )
      .withResponse();
    const requestId = response.headers.get('x-request-id')!;
    const spans = await requestTrace(rxA, requestId, ['gateway.settle']);
    const server = named(spans, 'POST /v1/chat/completions');
    expect(server.traceId).toBe(caller.traceId);
    expect(server.parentSpanId).toBe(caller.spanId);
    expect(spans.every((s) => s.traceId === caller.traceId)).toBe(true);
  });

  it(
    'a hostile traceparent or tracestate is no context: the request is served in a trace of its own',
    LONG,
    async () => {
      const k = await newKey('1');
      const caller = callerTrace();
      const hostile: Record<string, string>[] = [
        { traceparent: 'x'.repeat(8000) },
        { traceparent: `00-${caller.traceId}-${caller.spanId}-01-extra` },
        { traceparent: `00-${'0'.repeat(32)}-${caller.spanId}-01` },
        { traceparent: `${caller.traceparent}, ${caller.traceparent}` },
        {
          traceparent: caller.traceparent,
          tracestate: Array.from({ length: 400 }, (_, i) => `k${i}=${'v'.repeat(16)}`).join(','),
        },
      ];
      for (const headers of hostile) {
        const r = await fetch(`${a.httpUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${k.apiKey}`, 'content-type': 'application/json', ...headers },
          body: JSON.stringify({
            model: 'gpt-4o-mini',
            messages: [{ role: 'user', content: 'hostile [sim tokens=1]' }],
          }),
        });
        expect(r.status, JSON.stringify(headers).slice(0, 80)).toBe(200);
        const spans = await requestTrace(rxA, r.headers.get('x-request-id')!, ['gateway.settle']);
        const server = named(spans, 'POST /v1/chat/completions');
        if (headers.tracestate) {
          // A valid traceparent continues (A trusts its callers); the oversized tracestate is dropped, not kept.
          expect(server.traceId).toBe(caller.traceId);
          expect(rxA.rawContaining('k399=')).toEqual([]);
        } else {
          expect(server.traceId).not.toBe(caller.traceId);
          expect(server.parentSpanId).toBe('');
        }
      }
    },
  );

  it('by default a keyed caller gets a new trace, linked to its own', LONG, async () => {
    const k = await newKey('1');
    const caller = callerTrace();
    const { response } = await openaiAt(b, k)
      .chat.completions.create(
        { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'linked [sim tokens=1]' }] },
        { headers: { traceparent: caller.traceparent } },
      )
      .withResponse();
    const requestId = response.headers.get('x-request-id')!;
    const spans = await requestTrace(rxB, requestId, ['gateway.settle']);
    const server = named(spans, 'POST /v1/chat/completions');
    expect(server.via).toBe('grpc'); // gateway B exports OTLP over gRPC
    expect(server.traceId).not.toBe(caller.traceId);
    expect(server.parentSpanId).toBe('');
    expect(server.links).toEqual([
      { traceId: caller.traceId, spanId: caller.spanId, attributes: { 'gateway.link': 'caller' } },
    ]);
  });

  it(
    'a gRPC caller (@grpc/grpc-js) continues its trace on the RPC port: admin services always, keyed ones as set',
    LONG,
    async () => {
      const def = protoLoader.loadSync(['gateway/v1/billing.proto', 'gateway/v1/inference.proto'], {
        includeDirs: [path.resolve(import.meta.dirname, '..', '..', 'proto')],
        longs: String,
        defaults: true,
      });
      const pkg = grpc.loadPackageDefinition(def) as unknown as {
        gateway: { v1: Record<string, grpc.ServiceClientConstructor> };
      };
      const target = new URL(a.rpcUrl).host;
      const billing = new pkg.gateway.v1.BillingService!(target, grpc.credentials.createInsecure());
      const inference = new pkg.gateway.v1.InferenceService!(target, grpc.credentials.createInsecure());
      const call = (client: grpc.Client, method: string, req: object, md: grpc.Metadata) =>
        new Promise<Record<string, any>>((resolve, reject) =>
          (client as unknown as Record<string, Function>)[method]!.call(
            client,
            req,
            md,
            (e: Error | null, r: Record<string, any>) => (e ? reject(e) : resolve(r)),
          ),
        );
      try {
        const k = await newKey('1');
        const admin = callerTrace();
        const mdAdmin = new grpc.Metadata();
        mdAdmin.set('traceparent', admin.traceparent);
        await call(billing, 'GetBalance', { key: { apiKey: k.apiKey } }, mdAdmin);
        const [balance] = await rxA.waitFor(
          (s) => s.traceId === admin.traceId && s.name === 'gateway.v1.BillingService/GetBalance',
        );
        expect(balance!.kind).toBe(SERVER);
        expect(balance!.parentSpanId).toBe(admin.spanId);
        expect(balance!.attributes['gateway.rpc.transport']).toBe('network');

        const keyed = callerTrace();
        const md = new grpc.Metadata();
        md.set('authorization', `Bearer ${k.apiKey}`);
        md.set('traceparent', keyed.traceparent);
        const body = Buffer.from(
          JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'grpc [sim tokens=2]' }] }),
        );
        const res = await call(inference, 'ChatCompletion', { body }, md);
        const spans = await rxA.waitFor((s) => s.traceId === keyed.traceId && s.name === 'gateway.settle');
        const rpc = rxA.trace(keyed.traceId).find((s) => s.name === RPC_CHAT)!;
        expect(rpc.parentSpanId).toBe(keyed.spanId);
        expect(rpc.attributes['gateway.charge_nano']).toBe(BigInt(res.charge.costNano));
        expect(spans[0]!.parentSpanId).toBe(rpc.spanId);
      } finally {
        billing.close();
        inference.close();
      }
    },
  );

  it(
    'a call the RPC port refuses before reading it (no live key, no such method) is a failed server span of its own; its traceparent is taken as TRACE_CALLER_CONTEXT says',
    LONG,
    async () => {
      /** A raw gRPC call (an empty message) that must be refused: its error. */
      const refused = (g: GatewayProcess, method: string, md: grpc.Metadata) => {
        const client = new grpc.Client(new URL(g.rpcUrl).host, grpc.credentials.createInsecure());
        const same = (b: Buffer) => b;
        return new Promise<grpc.ServiceError>((resolve, reject) =>
          client.makeUnaryRequest(method, same, same, Buffer.alloc(0), md, (e) => {
            client.close();
            if (e) resolve(e);
            else reject(new Error(`${method} was served`));
          }),
        );
      };
      const metadata = (key: string, traceparent: string) => {
        const md = new grpc.Metadata();
        md.set('authorization', `Bearer ${key}`);
        md.set('traceparent', traceparent);
        return md;
      };
      const k = await newKey('1');
      const wrongKey = mistyped(k.apiKey);

      // Gateway A continues callers' traces: the refusal is a child of the caller's span.
      const noKey = callerTrace();
      const e1 = await refused(a, `/${RPC_CHAT}`, metadata(wrongKey, noKey.traceparent));
      expect(e1.code).toBe(grpc.status.UNAUTHENTICATED);
      const [span] = await rxA.waitFor((s) => s.traceId === noKey.traceId);
      expect(span).toMatchObject({ name: RPC_CHAT, kind: SERVER, parentSpanId: noKey.spanId });
      expect(span!.status.code).toBe(ERROR);
      expect(span!.attributes).toMatchObject({
        'rpc.method': 'ChatCompletion',
        'gateway.rpc.transport': 'network',
        'rpc.connect_rpc.error_code': 'Unauthenticated',
        'error.type': 'invalid_api_key',
        'gateway.request_id': expect.stringMatching(/^req_/),
      });
      // The refusal's log line names the span.
      const line = await logLine(a, (l) => l.includes('RPC refused') && l.includes(noKey.traceId));
      expect(JSON.parse(line!)).toMatchObject({ trace_id: noKey.traceId, span_id: span!.spanId });

      // A method the port does not serve: `_OTHER`, its path apart (a live key passes the access check
      // first), and a key the caller put in it masked.
      const unknown = callerTrace();
      const e2 = await refused(
        a,
        `/gateway.v1.InferenceService/NoSuchMethod-${k.apiKey}`,
        metadata(k.apiKey, unknown.traceparent),
      );
      expect(e2.code).toBe(grpc.status.UNIMPLEMENTED);
      const [other] = await rxA.waitFor((s) => s.traceId === unknown.traceId);
      expect(other).toMatchObject({ name: 'connect_rpc', kind: SERVER, parentSpanId: unknown.spanId });
      expect(other!.attributes).toMatchObject({
        'rpc.method': '_OTHER',
        'rpc.method_original': '/gateway.v1.InferenceService/NoSuchMethod-prx-…',
        'error.type': 'unknown_route',
      });
      // Its log line names it too, with the key masked there as well.
      expect(await logLine(a, (l) => l.includes('RPC refused') && l.includes(unknown.traceId))).toContain(
        'NoSuchMethod-prx-',
      );
      expect(fs.readFileSync(a.logFile, 'utf8')).not.toContain(k.apiKey);

      // Gateway B links them (the default): a trace of its own, whatever service the caller named.
      const linked = callerTrace();
      const e3 = await refused(b, '/gateway.v1.VideoService/CreateVideo', metadata(wrongKey, linked.traceparent));
      expect(e3.code).toBe(grpc.status.UNAUTHENTICATED);
      const [own] = await rxB.waitFor((s) => s.links.some((l) => l.traceId === linked.traceId));
      expect(own).toMatchObject({ name: 'gateway.v1.VideoService/CreateVideo', kind: SERVER, parentSpanId: '' });
      expect(own!.traceId).not.toBe(linked.traceId);
      // No key, not even a wrong one, in anything exported.
      expect([...rxA.rawContaining(wrongKey), ...rxB.rawContaining(wrongKey), ...rxA.rawContaining(k.apiKey)]).toEqual(
        [],
      );
    },
  );

  it(
    'TRACE_UPSTREAM_TRACEPARENT=1 tells the provider the attempt; off (the default), nothing is sent',
    LONG,
    async () => {
      const k = await newKey('1');
      const markerB = uniqueMarker('tp-on');
      const markerA = uniqueMarker('tp-off');
      const { response } = await openaiAt(b, k)
        .chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: `${markerB} [sim tokens=1]` }],
        })
        .withResponse();
      await openaiAt(a, k).chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: `${markerA} [sim tokens=1]` }],
      });
      const spans = await requestTrace(rxB, response.headers.get('x-request-id')!, ['chat gpt-4o-mini']);
      const attempt = named(spans, 'chat gpt-4o-mini');
      const [sent] = await upstreamRequests(markerB);
      expect(sent!.headers.traceparent).toBe(`00-${attempt.traceId}-${attempt.spanId}-01`);
      const [plain] = await upstreamRequests(markerA);
      expect(plain!.headers.traceparent).toBeUndefined();
    },
  );
});

describe('what spans never carry', () => {
  it(
    'no key, prompt or answer in anything exported by default; with capture on, the prompt within its bound',
    LONG,
    async () => {
      const k = await newKey('1');
      const secretPrompt = uniqueMarker('secret-prompt');
      const { data, response: responseA } = await openaiAt(a, k)
        .chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: `${secretPrompt} [sim tokens=3]` }],
        })
        .withResponse();
      const answer = data.choices[0]!.message.content!;
      const { response } = await openaiAt(b, k)
        .chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: `${secretPrompt} ${'x'.repeat(500)} [sim tokens=3]` }],
        })
        .withResponse();
      await requestTrace(rxA, responseA.headers.get('x-request-id')!, ['gateway.settle']);
      const spansB = await requestTrace(rxB, response.headers.get('x-request-id')!, ['gateway.settle']);

      // Gateway A (capture off): none of it in any byte it exported.
      for (const needle of [k.apiKey, k.apiKey.slice(4), UPSTREAM_KEY, secretPrompt, answer])
        expect(rxA.rawContaining(needle), needle).toEqual([]);
      // Nor gateway B's keys.
      for (const needle of [k.apiKey, UPSTREAM_KEY]) expect(rxB.rawContaining(needle), needle).toEqual([]);

      // Gateway B (capture on, 200 bytes): the prompt is on the attempt, cut to the bound.
      const attempt = named(spansB, 'chat gpt-4o-mini');
      const prompt = attempt.attributes['gen_ai.input.messages'] as string;
      expect(prompt).toContain(secretPrompt);
      expect(Buffer.byteLength(prompt)).toBeLessThanOrEqual(200 + Buffer.byteLength('…'));
      expect(attempt.attributes['gen_ai.output.messages']).toContain('w1 w2 w3');
    },
  );
});

describe('video jobs', () => {
  it('a job joins the trace of the request that created it: its workflow and every activity', LONG, async () => {
    const k = await newKey('5');
    const r = await fetch(`${a.httpUrl}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${k.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sora-2', prompt: `${uniqueMarker('trace-video')} [sim ms=200]`, seconds: '4' }),
    });
    expect(r.status).toBe(200);
    const job = (await r.json()) as { id: string };
    const requestId = r.headers.get('x-request-id')!;
    const [server] = await rxA.waitFor(
      (s) => s.kind === SERVER && s.attributes['gateway.request_id'] === requestId,
      10_000,
    );
    const traceId = server!.traceId;
    // The workflow runs to its end: the settle activity is the last one.
    await rxA.waitFor((s) => s.traceId === traceId && s.name.startsWith('RunWorkflow:'), 60_000);
    const until = Date.now() + 60_000;
    for (;;) {
      const v = (await (
        await fetch(`${a.httpUrl}/v1/videos/${job.id}`, { headers: { authorization: `Bearer ${k.apiKey}` } })
      ).json()) as { status: string };
      if (v.status === 'completed' || v.status === 'failed') {
        expect(v.status).toBe('completed');
        break;
      }
      if (Date.now() > until) throw new Error('the video job did not finish');
      await new Promise((res) => setTimeout(res, 200));
    }
    await new Promise((res) => setTimeout(res, 500));
    const spans = rxA.trace(traceId);
    const start = spans.find((s) => s.name.startsWith('StartWorkflow:'))!;
    const run = spans.find((s) => s.name.startsWith('RunWorkflow:'))!;
    const activities = spans.filter((s) => s.name.startsWith('RunActivity:'));
    expect(start).toBeDefined();
    expect(run.parentSpanId).toBe(start.spanId);
    expect(activities.length).toBeGreaterThan(0);
    const startActivities = new Set(spans.filter((s) => s.name.startsWith('StartActivity:')).map((s) => s.spanId));
    for (const act of activities) expect(startActivities.has(act.parentSpanId)).toBe(true);
    const create = named(spans, 'gateway.v1.VideoService/CreateVideo');
    expect(create.parentSpanId).toBe(server!.spanId);
    // The money: held when the job was made, charged by its settle activity (4 s of sora-2 at $0.10).
    expect(create.attributes).toMatchObject({ 'gateway.hold_nano': 400_000_000n, 'gateway.account.id': k.accountId });
    // The job's usage row names its trace (the settle activity's).
    const row = await db().query('SELECT trace_id FROM usage_records WHERE request_id = $1', [requestId]);
    expect(row.rows[0]?.trace_id).toBe(traceId);
    expect(named(spans, 'RunActivity:settleCharge').attributes).toMatchObject({
      'gateway.charge_nano': 400_000_000n,
      'gateway.provider_cost_nano': 400_000_000n,
      'gateway.outcome': 'ok',
    });
  });
});

describe('a video worker of its own (npm run worker)', () => {
  it(
    "exports the job's workflow and activities under its own service name, in the trace of the gateway's request",
    LONG,
    async () => {
      const worker = await startWorker(
        {
          ...QUICK_EXPORT,
          ...videoEnv(inject('temporalAddress'), videoDir, WORKER_QUEUE),
          DATABASE_URL: inject('databaseUrl'),
          OPENAI_API_KEY: UPSTREAM_KEY,
          OPENAI_BASE_URL: `${inject('simulatorUrl')}/v1`,
          OTEL_EXPORTER_OTLP_ENDPOINT: rxB.grpcEndpoint,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
          OTEL_SERVICE_NAME: 'video-worker',
        },
        path.join(inject('workDir'), `trace-worker-${uniqueMarker('w')}.log`),
      );
      try {
        const k = await newKey('5');
        const r = await fetch(`${b.httpUrl}/v1/videos`, {
          method: 'POST',
          headers: { authorization: `Bearer ${k.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'sora-2',
            prompt: `${uniqueMarker('worker-video')} [sim ms=200]`,
            seconds: '4',
          }),
        });
        expect(r.status).toBe(200);
        const requestId = r.headers.get('x-request-id')!;
        const [server] = await rxB.waitFor(
          (s) => s.kind === SERVER && s.attributes['gateway.request_id'] === requestId,
          10_000,
        );
        const traceId = server!.traceId;
        // The settle is the workflow's last activity: its span ends the job's part of the trace.
        await rxB.waitFor((s) => s.traceId === traceId && s.name === 'RunActivity:settleCharge', 60_000);
        await rxB.waitFor((s) => s.traceId === traceId && s.name.startsWith('RunWorkflow:'), 10_000);
        const spans = rxB.trace(traceId);
        const serviceOf = (s: ReceivedSpan) => s.resource['service.name'];
        // The request and the workflow's start are the gateway's; the workflow and its activities the worker's.
        expect(serviceOf(server!)).not.toBe('video-worker');
        expect(serviceOf(named(spans, 'gateway.v1.VideoService/CreateVideo'))).toBe(serviceOf(server!));
        const start = spans.find((s) => s.name.startsWith('StartWorkflow:'))!;
        expect(serviceOf(start)).toBe(serviceOf(server!));
        const run = spans.find((s) => s.name.startsWith('RunWorkflow:'))!;
        expect(run.parentSpanId).toBe(start.spanId);
        const worked = spans.filter((s) => /^(RunWorkflow|StartActivity|RunActivity):/.test(s.name));
        expect(worked.length).toBeGreaterThanOrEqual(3);
        for (const s of worked) expect(serviceOf(s), s.name).toBe('video-worker');
        expect(named(spans, 'RunActivity:settleCharge').attributes).toMatchObject({
          'gateway.charge_nano': 400_000_000n,
          'gateway.outcome': 'ok',
        });
        const row = await db().query('SELECT trace_id FROM usage_records WHERE request_id = $1', [requestId]);
        expect(row.rows[0]?.trace_id).toBe(traceId);
      } finally {
        // A worker told to stop flushes its spans and exits cleanly, tracing included.
        await worker.stop('SIGTERM');
      }
      expect(worker.child.exitCode).toBe(0);
    },
  );
});

describe('a collector that goes away', () => {
  it('every request is still served, the spans it could not take are counted, and export resumes', LONG, async () => {
    const k = await newKey('2');
    const dropped = async () =>
      Number(
        /^gateway_trace_spans_dropped_total\{reason="export_failed"\} (\d+)/m.exec(
          await (await fetch(`${a.httpUrl}/metrics`)).text(),
        )?.[1] ?? NaN,
      );
    const before = await dropped();
    expect(before).toBeGreaterThanOrEqual(0);
    await rxA.stop();
    const client = openaiAt(a, k);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        client.chat.completions.create({
          model: 'gpt-4o-mini',
          messages: [{ role: 'user', content: `down ${i} [sim tokens=1]` }],
        }),
      ),
    );
    expect(answers.every((x) => x.choices[0]!.message.content === 'w1')).toBe(true);
    const until = Date.now() + 20_000;
    // Each request's five spans (server, RPC, hold, attempt, settle) could not be exported.
    while ((await dropped()) < before + 20 * 5) {
      if (Date.now() > until) throw new Error(`dropped only ${await dropped()}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    await rxA.start();
    const { response } = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'back [sim tokens=1]' }] })
      .withResponse();
    await requestTrace(rxA, response.headers.get('x-request-id')!, ['gateway.settle']);
    const exported = Number(
      /^gateway_trace_spans_exported_total (\d+)/m.exec(await (await fetch(`${a.httpUrl}/metrics`)).text())?.[1],
    );
    expect(exported).toBeGreaterThan(0);
  });
});
