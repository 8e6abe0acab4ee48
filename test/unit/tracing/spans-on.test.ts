// Tracing on: a caller's traceparent continues, links or is ignored as TRACE_CALLER_CONTEXT says,
// and a hostile or malformed one starts a trace of the gateway's own; the span in force reaches
// what runs under it, an async generator's steps included; log lines get its ids.
import { beforeAll, describe, expect, it } from 'vitest';
import { context, trace } from '@opentelemetry/api';
import { loadTracingConfig } from '../../../src/config/tracing-config.ts';
import {
  activeSpan,
  callerParent,
  callerText,
  contextWith,
  failSpan,
  iterateIn,
  logIds,
  nanoAttribute,
  runIn,
  SpanKind,
  startSpan,
  traceparentOf,
  tracingOn,
} from '../../../src/tracing/spans.ts';
import { startTracing } from '../../../src/tracing/tracing.ts';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';
const GOOD = `00-${TRACE}-${SPAN}-01`;

beforeAll(() => {
  // An endpoint nothing listens on: spans are made and dropped; nothing here reads them back.
  startTracing(
    loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_BSP_SCHEDULE_DELAY: '60000' }),
    'test',
  );
});

describe("a caller's trace context", () => {
  it('continue: the request is its child', () => {
    expect(tracingOn()).toBe(true);
    const { parent, links } = callerParent({ traceparent: GOOD, tracestate: 'v=1' }, 'continue');
    expect(links).toBeUndefined();
    const span = startSpan('req', SpanKind.SERVER, {}, parent);
    expect(span.spanContext().traceId).toBe(TRACE);
    expect((span as unknown as { parentSpanContext?: { spanId: string } }).parentSpanContext?.spanId).toBe(SPAN);
    expect(span.spanContext().traceState?.get('v')).toBe('1');
  });

  it('link: a new trace, linked to the caller', () => {
    const { parent, links } = callerParent(new Headers({ traceparent: GOOD }), 'link');
    const span = startSpan('req', SpanKind.SERVER, {}, parent, links);
    expect(span.spanContext().traceId).not.toBe(TRACE);
    expect(links).toEqual([
      { context: expect.objectContaining({ traceId: TRACE, spanId: SPAN }), attributes: { 'gateway.link': 'caller' } },
    ]);
  });

  it('ignore, none, or a malformed one: a trace of our own and no link', () => {
    const hostile = [
      undefined,
      '',
      'garbage',
      `00-${'0'.repeat(32)}-${SPAN}-01`, // an all-zero trace id is invalid
      `00-${TRACE}-${'0'.repeat(16)}-01`,
      `ff-${TRACE}-${SPAN}-01`, // version ff is forbidden
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-01-${'x'.repeat(10_000)}`,
      [GOOD, GOOD],
      `${GOOD}, ${GOOD}`, // twice, as Node joins a repeated header
    ];
    for (const traceparent of hostile) {
      const { parent, links } = callerParent({ traceparent }, 'continue');
      expect(links, String(traceparent).slice(0, 80)).toBeUndefined();
      const span = startSpan('req', SpanKind.SERVER, {}, parent);
      expect(span.spanContext().traceId, String(traceparent).slice(0, 80)).not.toBe(TRACE);
    }
    expect(callerParent({ traceparent: GOOD }, 'ignore').links).toBeUndefined();
  });
});

describe('the span in force', () => {
  it('reaches awaits and each step of an async generator run under it', async () => {
    const span = startSpan('rpc', SpanKind.INTERNAL);
    const ctx = contextWith(span);
    const seen: string[] = [];
    async function* steps() {
      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setTimeout(r, 1));
        seen.push(activeSpan().spanContext().spanId);
        yield i;
      }
    }
    const source = runIn(ctx, () => steps());
    // Stepped from outside the span's context, as the facade steps a stream.
    for await (const _ of context.with(context.active(), () => iterateIn(ctx, source))) void _;
    expect(seen).toEqual(Array(3).fill(span.spanContext().spanId));
    expect(await runIn(ctx, async () => logIds())).toEqual({
      trace_id: span.spanContext().traceId,
      span_id: span.spanContext().spanId,
    });
    expect(logIds()).toBeUndefined();
  });

  it("an unsampled request makes one span: a local unsampled parent is its children's span too", () => {
    const unsampled = trace.wrapSpanContext({ traceId: TRACE, spanId: SPAN, traceFlags: 0, isRemote: false });
    const ctx = contextWith(unsampled);
    const child = startSpan(
      'child',
      SpanKind.INTERNAL,
      () => {
        throw new Error('no attributes are made for a span that records nothing');
      },
      ctx,
    );
    expect(child).toBe(unsampled);
    expect(contextWith(child, ctx)).toBe(ctx);
    // A caller's unsampled parent is remote: the request's own span is still made (by the sampler).
    const remote = contextWith(trace.wrapSpanContext({ traceId: TRACE, spanId: SPAN, traceFlags: 0, isRemote: true }));
    const server = startSpan('server', SpanKind.SERVER, {}, remote);
    expect(server).not.toBe(unsampled);
    expect(server.spanContext().spanId).not.toBe(SPAN);
    expect(server.isRecording()).toBe(false);
    // Under a sampled parent, a child of its own, with its attributes.
    const sampled = startSpan('sampled', SpanKind.INTERNAL);
    const own = startSpan('own', SpanKind.INTERNAL, () => ({ a: 1 }), contextWith(sampled));
    expect(own).not.toBe(sampled);
    expect((own as unknown as { attributes: Record<string, unknown> }).attributes).toEqual({ a: 1 });
  });

  it('its traceparent, and money as exact attributes', () => {
    const span = startSpan('attempt', SpanKind.CLIENT);
    const sc = span.spanContext();
    expect(traceparentOf(span)).toBe(`00-${sc.traceId}-${sc.spanId}-01`);
    expect(
      traceparentOf(trace.wrapSpanContext({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 })),
    ).toBeUndefined();
    expect(nanoAttribute(1_234_567_890n)).toBe(1_234_567_890);
    expect(nanoAttribute(2n ** 60n)).toBe((2n ** 60n).toString());
  });

  it("a caller's text is cut and any gateway key in it masked, on an attribute and in a failure's message", () => {
    const key = `prx-${'A1b2'.repeat(9)}zz`;
    expect(callerText(`/v1/${key}/x`, 100)).toBe('/v1/prx-…/x');
    expect(callerText('abcdef', 3)).toBe('abc');
    const span = startSpan('refused', SpanKind.SERVER) as unknown as {
      status: { message?: string };
      isRecording(): boolean;
    };
    expect(span.isRecording()).toBe(true);
    failSpan(span as never, 'unknown_route', `Unknown RPC: /svc/${key}`);
    expect(span.status.message).toBe('Unknown RPC: /svc/prx-…');
  });
});
