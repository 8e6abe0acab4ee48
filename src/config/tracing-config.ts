// The tracing settings (docs/observability.md): the standard OpenTelemetry variables
// (OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER*, OTEL_BSP_*, OTEL_SERVICE_NAME), read as the
// OpenTelemetry specification names them, and the gateway's own (TRACE_*). Tracing is off unless
// an OTLP endpoint is set; the exporters read their endpoint, headers, timeout and compression
// from the same variables themselves.
import { nonEmpty } from './env.ts';

export type OtlpProtocol = 'http/protobuf' | 'grpc';

export type SamplerSetting =
  | { kind: 'always_on' | 'always_off' | 'parentbased_always_on' | 'parentbased_always_off' }
  | { kind: 'traceidratio' | 'parentbased_traceidratio'; ratio: number };

export interface TracingConfig {
  /** An OTLP endpoint is set and neither OTEL_SDK_DISABLED nor OTEL_TRACES_EXPORTER=none turns it off. */
  enabled: boolean;
  protocol: OtlpProtocol;
  sampler: SamplerSetting;
  serviceName: string;
  /** The bounded export queue (OTEL_BSP_*): spans past maxQueueSize are dropped and counted. */
  queue: { maxQueueSize: number; maxExportBatchSize: number; scheduleDelayMs: number; exportTimeoutMs: number };
  /**
   * TRACE_CALLER_CONTEXT: what a keyed caller's traceparent does. `link` (default): a new trace,
   * linked to the caller's; `continue`: the request joins the caller's trace (callers are trusted);
   * `ignore`: neither. Admin RPCs (Billing, Catalogue) always continue theirs.
   */
  callerContext: 'link' | 'continue' | 'ignore';
  /** TRACE_UPSTREAM_TRACEPARENT: upstream calls carry the attempt's traceparent (off: providers learn nothing of the operator's traces). */
  upstreamTraceparent: boolean;
  /**
   * Prompts and answers on the spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, as
   * OpenTelemetry's GenAI instrumentations name it): off by default; each at most maxBytes.
   */
  content: { capture: boolean; maxBytes: number };
  /** TRACE_UI_URL: a trace's address in the operator's trace UI, `{trace_id}` standing for its id; the console links request rows there. */
  uiUrl: string | undefined;
  /**
   * TRACE_RESPONSE_HEADER: every answer of a sampled request tells its caller the request's trace
   * (W3C Trace Context Level 2's `traceresponse`, and the same on the RPC port's response
   * metadata). Off by default: the trace ids are the operator's, and a customer who quotes one
   * learns nothing else from it only where the operator says so.
   */
  responseHeader: boolean;
}

const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

const flag = (v: string | undefined): boolean => ['1', 'true', 'yes', 'on'].includes((nonEmpty(v) ?? '').toLowerCase());

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}

function protocolOf(env: NodeJS.ProcessEnv): OtlpProtocol {
  const raw = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ?? nonEmpty(env.OTEL_EXPORTER_OTLP_PROTOCOL);
  const p = (raw ?? 'http/protobuf').toLowerCase();
  if (p !== 'http/protobuf' && p !== 'grpc')
    throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or grpc, got ${JSON.stringify(raw)}`);
  return p;
}

function samplerOf(env: NodeJS.ProcessEnv): SamplerSetting {
  const kind = (nonEmpty(env.OTEL_TRACES_SAMPLER) ?? 'parentbased_always_on').toLowerCase();
  if (!(SAMPLERS as readonly string[]).includes(kind))
    throw new Error(`OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')}, got ${JSON.stringify(kind)}`);
  if (kind !== 'traceidratio' && kind !== 'parentbased_traceidratio')
    return { kind: kind as 'always_on' | 'always_off' | 'parentbased_always_on' | 'parentbased_always_off' };
  const arg = nonEmpty(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1)
    throw new Error(`OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got ${JSON.stringify(arg)}`);
  return { kind, ratio };
}

function callerContextOf(v: string | undefined): TracingConfig['callerContext'] {
  const mode = (nonEmpty(v) ?? 'link').toLowerCase();
  if (mode !== 'link' && mode !== 'continue' && mode !== 'ignore')
    throw new Error(`TRACE_CALLER_CONTEXT must be link, continue or ignore, got ${JSON.stringify(v)}`);
  return mode;
}

/** An on/off setting: unset is `fallback`; anything but the usual words for on and off is refused, naming it. */
function onOff(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const v = (nonEmpty(env[name]) ?? '').toLowerCase();
  if (v === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new Error(`${name} must be 1 or 0 (true/false, yes/no, on/off), got ${JSON.stringify(env[name])}`);
}

function uiUrlOf(v: string | undefined): string | undefined {
  const url = nonEmpty(v);
  if (url === undefined) return undefined;
  if (!/^https?:\/\//i.test(url) || !url.includes('{trace_id}'))
    throw new Error(
      `TRACE_UI_URL must be an http(s) address with {trace_id} where the trace id goes, such as http://localhost:16686/trace/{trace_id}; got ${JSON.stringify(url)}`,
    );
  return url;
}

export function loadTracingConfig(env: NodeJS.ProcessEnv): TracingConfig {
  const endpoint = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) ?? nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const exporter = (nonEmpty(env.OTEL_TRACES_EXPORTER) ?? 'otlp').toLowerCase();
  if (exporter !== 'otlp' && exporter !== 'none')
    throw new Error(`OTEL_TRACES_EXPORTER must be otlp or none, got ${JSON.stringify(exporter)}`);
  const maxQueueSize = positiveInt(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048);
  return {
    enabled: endpoint !== undefined && exporter === 'otlp' && !flag(env.OTEL_SDK_DISABLED),
    protocol: protocolOf(env),
    sampler: samplerOf(env),
    serviceName: nonEmpty(env.OTEL_SERVICE_NAME) ?? 'metered-ai-gateway',
    queue: {
      maxQueueSize,
      maxExportBatchSize: Math.min(maxQueueSize, positiveInt(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512)),
      scheduleDelayMs: positiveInt(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000),
      exportTimeoutMs: positiveInt(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000),
    },
    callerContext: callerContextOf(env.TRACE_CALLER_CONTEXT),
    upstreamTraceparent: flag(env.TRACE_UPSTREAM_TRACEPARENT),
    content: {
      capture: flag(env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT),
      maxBytes: positiveInt(env, 'TRACE_CONTENT_MAX_BYTES', 4096),
    },
    uiUrl: uiUrlOf(env.TRACE_UI_URL),
    responseHeader: onOff(env, 'TRACE_RESPONSE_HEADER', false),
  };
}
