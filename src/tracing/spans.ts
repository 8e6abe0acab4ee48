// What the gateway's parts use to make spans (docs/observability.md). Each call costs nothing but
// a flag test while tracing is off: no span object, no context switch, no attribute built. While
// it is on, the span in force travels in an AsyncLocalStorage context (OpenTelemetry's context
// manager), and between the facade and the services as a call's context value (TRACE_CONTEXT),
// as a network caller's travels in its traceparent header.
import {
  type Attributes,
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  isSpanContextValid,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { createContextKey } from '@connectrpc/connect';
import { scrub } from '../secrets/scrub.ts';

export { SpanKind, type Span, type Context, type Attributes, type Link };

let on = false;
let tracer = trace.getTracer('metered-ai-gateway');

/** Set once by tracing.ts when an exporter is in place. */
export function setTracingOn(version: string): void {
  on = true;
  tracer = trace.getTracer('metered-ai-gateway', version);
}

export function tracingOn(): boolean {
  return on;
}

/** The span every call gets while tracing is off: it records nothing and allocates nothing. */
export const NO_SPAN: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** A call's trace context from the facade to the service it calls in process (a Connect context value). */
export const TRACE_CONTEXT = createContextKey<Context | undefined>(undefined, {
  description: 'the trace context of the edge that made the call',
});

/**
 * A span under `parent` (default: the context in force); NO_SPAN while tracing is off. Its
 * attributes are made only for a span that records (`attributes` may be a function, so an
 * unsampled request builds none: the SDK would copy and check them before sampling). Under a
 * local parent that records nothing, the parent itself is the answer: every standard sampler
 * (parent-based, or by trace id) leaves a child of an unsampled local span unsampled, and an
 * unsampled request then makes one span, not one per step.
 */
export function startSpan(
  name: string,
  kind: SpanKind,
  attributes?: Attributes | (() => Attributes),
  parent?: Context,
  links?: Link[],
): Span {
  if (!on) return NO_SPAN;
  const ctx = parent ?? context.active();
  const above = trace.getSpan(ctx);
  if (above && !above.isRecording() && !above.spanContext().isRemote && isSpanContextValid(above.spanContext()))
    return above;
  const span = tracer.startSpan(name, { kind, links }, ctx);
  if (attributes && span.isRecording())
    span.setAttributes(typeof attributes === 'function' ? attributes() : attributes);
  return span;
}

/** The span in force (NO_SPAN when none or tracing is off). */
export function activeSpan(): Span {
  if (!on) return NO_SPAN;
  return trace.getActiveSpan() ?? NO_SPAN;
}

/** The context in force, with `span` as its span (the same context when it already has it). */
export function contextWith(span: Span, parent?: Context): Context {
  const base = parent ?? (on ? context.active() : ROOT_CONTEXT);
  return trace.getSpan(base) === span ? base : trace.setSpan(base, span);
}

/** `fn` with `ctx` in force (its awaits included). */
export function runIn<T>(ctx: Context | undefined, fn: () => T): T {
  return on && ctx ? context.with(ctx, fn) : fn();
}

/**
 * The values of `source` with `ctx` in force while each is made: an async generator runs its body
 * in the context of whoever calls next(), so a stream handler would lose its span otherwise.
 */
export function iterateIn<T>(ctx: Context | undefined, source: AsyncIterable<T>): AsyncIterable<T> {
  if (!on || !ctx) return source;
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      return {
        next: () => context.with(ctx, () => it.next()),
        return: (v?: unknown) => context.with(ctx, () => it.return?.(v) ?? Promise.resolve({ done: true, value: v })),
        throw: (e?: unknown) => context.with(ctx, () => it.throw?.(e) ?? Promise.reject(e)),
      } as AsyncIterator<T>;
    },
  };
}

const KEY_IN_TEXT = /prx-[0-9A-Za-z]{6,}/g;

/**
 * A caller's or a provider's text for a span (a path, a method name, a failure's message): any
 * gateway key in it masked as the log masks it, every credential scrubbed (src/secrets/scrub.ts),
 * then cut to `max` (after: a cut could leave part of a value no longer recognised).
 */
export function callerText(text: string, max: number): string {
  const masked = text.includes('prx-') ? text.replace(KEY_IN_TEXT, 'prx-…') : text;
  return scrub(masked).slice(0, max);
}

/** Marks `span` failed: error.type is the failure's code (a gateway error code, an RPC code, an HTTP status). */
export function failSpan(span: Span, errorType: string, message?: string): void {
  if (!span.isRecording()) return;
  span.setAttribute('error.type', errorType);
  // A message may repeat the caller's text (an unknown path) or a provider's (its error): scrubbed.
  span.setStatus({ code: SpanStatusCode.ERROR, ...(message ? { message: callerText(message, 256) } : {}) });
}

/** A nano-USD amount as a span attribute: an int where it is exact (every real charge), else its decimal string. */
export function nanoAttribute(n: bigint): number | string {
  return n <= BigInt(Number.MAX_SAFE_INTEGER) && n >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n.toString();
}

/** The span's trace id when it is sampled (a trace a UI can show), else ''. */
export function sampledTraceId(span: Span): string {
  const sc = span.spanContext();
  return (sc.traceFlags & TraceFlags.SAMPLED) !== 0 && isSpanContextValid(sc) ? sc.traceId : '';
}

/** The W3C traceparent of `span` (for a call that goes on elsewhere), or undefined. */
export function traceparentOf(span: Span): string | undefined {
  const sc = span.spanContext();
  if (!isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-0${(sc.traceFlags & 0xff).toString(16)}`;
}

/**
 * The W3C Trace Context Level 2 `traceresponse` of a request's span (`00-<trace id>-<span id>-<flags>`),
 * telling its caller the trace it is in; undefined unless the span is sampled (an unsampled trace
 * is nowhere to be found).
 */
export function traceresponseOf(span: Span): string | undefined {
  const sc = span.spanContext();
  if ((sc.traceFlags & TraceFlags.SAMPLED) === 0 || !isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** Trace and span ids for a log line (pino's mixin), when a sampled span is in force (an unsampled trace is nowhere to be found). */
export function logIds(): { trace_id: string; span_id: string } | undefined {
  if (!on) return undefined;
  const span = trace.getActiveSpan();
  return span ? idsOf(span.spanContext()) : undefined;
}

const idsOf = (sc: SpanContext | undefined) =>
  sc && (sc.traceFlags & TraceFlags.SAMPLED) !== 0 && isSpanContextValid(sc)
    ? { trace_id: sc.traceId, span_id: sc.spanId }
    : undefined;

/** The ids of `span` when it is sampled, for a log line written outside it. */
export function spanIds(span: Span): { trace_id: string; span_id: string } | undefined {
  return idsOf(span.spanContext());
}

/** The ids of the sampled span `ctx` carries, for a log line written outside it. */
export function spanIdsOf(ctx: Context): { trace_id: string; span_id: string } | undefined {
  return idsOf(trace.getSpanContext(ctx));
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

const headerGetter: TextMapGetter<HeaderSource> = {
  keys: (h) => (h instanceof Headers ? [...h.keys()] : Object.keys(h)),
  // A header sent twice is no context at all (W3C trace context: a vendor that cannot tell which is meant restarts the trace).
  get: (h, key) => {
    const v = h instanceof Headers ? (h.get(key) ?? undefined) : h[key];
    return Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;
  },
};

/**
 * The parent a caller's traceparent / tracestate gives a request: `continue` joins the caller's
 * trace; `link` starts a new trace linked to it (an untrusted caller cannot choose the gateway's
 * trace ids or force its sampling); `ignore` starts a new trace.
 */
export function callerParent(
  headers: HeaderSource,
  mode: 'continue' | 'link' | 'ignore',
): { parent: Context; links?: Link[] } {
  if (!on || mode === 'ignore') return { parent: ROOT_CONTEXT };
  const raw = headerGetter.get(headers, 'traceparent');
  if (raw === undefined) return { parent: ROOT_CONTEXT };
  const extracted = propagation.extract(ROOT_CONTEXT, headers, headerGetter);
  const sc = trace.getSpanContext(extracted);
  if (!sc || !isSpanContextValid(sc)) return { parent: ROOT_CONTEXT };
  if (mode === 'continue') return { parent: extracted };
  return { parent: ROOT_CONTEXT, links: [{ context: sc, attributes: { 'gateway.link': 'caller' } }] };
}
