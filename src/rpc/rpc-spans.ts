// A span per RPC (OpenTelemetry's RPC conventions), the same for a call in process (the facade's)
// and one over the network: its service and method, its code when it fails. The handler runs with
// it in force, so the hold, the upstream attempts and the settle are its children; it is the
// request's span, where the metering writes the money. A network caller's traceparent continues
// (admin services) or is taken as TRACE_CALLER_CONTEXT says (keyed services). A call the port
// refuses before Connect reads it gets a span of its own (traceRefusal).
import { Code, ConnectError, type Interceptor } from '@connectrpc/connect';
import type { DescMethod, DescService } from '@bufbuild/protobuf';
import { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { GatewayErrorSchema } from '../gen/gateway/v1/errors_pb.js';
import { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { VideoService } from '../gen/gateway/v1/video_pb.js';
import { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import type { TracingConfig } from '../config/tracing-config.ts';
import {
  type Context,
  callerParent,
  callerText,
  contextWith,
  failSpan,
  iterateIn,
  type Link,
  runIn,
  type Span,
  SpanKind,
  spanIds,
  startSpan,
  traceresponseOf,
  tracingOn,
} from '../tracing/spans.ts';

/**
 * The services a gateway key calls (the operator's customers); the others are the operator's
 * (ADMIN_TOKEN). OrganisationService takes either: a member's key, or the operator's token.
 */
export const KEYED_SERVICES: ReadonlySet<string> = new Set([
  InferenceService.typeName,
  VideoService.typeName,
  OrganisationService.typeName,
]);
const SERVICES = new Map<string, DescService>(
  [BillingService, CatalogueService, InferenceService, VideoService, OrganisationService].map((s) => [s.typeName, s]),
);

/** The span of a call to `method` under `parent`, and the context that carries it. */
export function startRpcSpan(
  method: DescMethod,
  transport: 'in-process' | 'network',
  parent?: Context,
  links?: Link[],
): { span: Span; ctx: Context } {
  const service = method.parent.typeName;
  const span = startSpan(
    `${service}/${method.name}`,
    transport === 'network' ? SpanKind.SERVER : SpanKind.INTERNAL,
    () => ({
      'rpc.system': 'connect_rpc',
      'rpc.service': service,
      'rpc.method': method.name,
      'gateway.rpc.transport': transport,
    }),
    parent,
    links,
  );
  return { span, ctx: contextWith(span, parent) };
}

/** Ends an RPC span, failed with the call's gateway error code (or its RPC code) when `err` is set. */
export function endRpcSpan(span: Span, err?: unknown): void {
  if (err !== undefined && span.isRecording()) {
    const e = ConnectError.from(err);
    const detail = e.findDetails(GatewayErrorSchema)[0];
    span.setAttribute('rpc.connect_rpc.error_code', Code[e.code] ?? String(e.code));
    // A caller that left is not the call's failure.
    if (e.code === Code.Canceled) span.setAttribute('gateway.caller_left', true);
    else failSpan(span, detail?.code || Code[e.code] || 'error', e.rawMessage);
  }
  span.end();
}

/**
 * The network port's interceptor: each call's span, its handler (and a stream's every step) run
 * under it. `responseHeader` (TRACE_RESPONSE_HEADER): a sampled call's response metadata, or its
 * error's, carries `traceresponse`, as the HTTP port's answers do.
 */
export function rpcTracing(callerContext: TracingConfig['callerContext'], responseHeader = false): Interceptor {
  return (next) => async (req) => {
    const mode = KEYED_SERVICES.has(req.service.typeName) ? callerContext : 'continue';
    const { parent, links } = callerParent(req.header, mode);
    const { span, ctx } = startRpcSpan(req.method, 'network', parent, links);
    const traceresponse = responseHeader ? traceresponseOf(span) : undefined;
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await runIn(ctx, () => next(req));
    } catch (err) {
      endRpcSpan(span, err);
      if (traceresponse && err instanceof ConnectError) err.metadata.set('traceresponse', traceresponse);
      throw err;
    }
    if (traceresponse) res.header.set('traceresponse', traceresponse);
    if (!res.stream) {
      endRpcSpan(span);
      return res;
    }
    const messages = iterateIn(ctx, res.message);
    return {
      ...res,
      message: (async function* () {
        let failure: unknown;
        try {
          yield* messages;
        } catch (err) {
          failure = err;
          throw err;
        } finally {
          endRpcSpan(span, failure);
        }
      })(),
    };
  };
}

/**
 * The span of a call the port refused before Connect read it (no live key, a wrong admin token,
 * an unknown method): a server span of its own, ended at once, failed with the refusal's code.
 * Its caller proved nothing, so its traceparent is taken as TRACE_CALLER_CONTEXT says, whatever
 * the service. A method the port does not serve is `_OTHER` (RPC conventions), its path kept
 * apart, cut short and any key in it masked. Returns the span's ids for the refusal's log line (when sampled).
 */
export function traceRefusal(
  path: string,
  headers: Parameters<typeof callerParent>[0],
  err: ConnectError,
  callerContext: TracingConfig['callerContext'],
): { trace_id: string; span_id: string } | undefined {
  if (!tracingOn()) return undefined;
  const [, service = '', name = ''] = /^\/([^/]+)\/([^/?]*)/.exec(path) ?? [];
  const method = SERVICES.get(service)?.methods.find((m) => m.name === name);
  const { parent, links } = callerParent(headers, callerContext);
  const span = method
    ? startRpcSpan(method, 'network', parent, links).span
    : startSpan(
        'connect_rpc',
        SpanKind.SERVER,
        () => ({ 'rpc.system': 'connect_rpc', 'rpc.method': '_OTHER', 'rpc.method_original': callerText(path, 200) }),
        parent,
        links,
      );
  const requestId = err.findDetails(GatewayErrorSchema)[0]?.requestId;
  if (requestId && span.isRecording()) span.setAttribute('gateway.request_id', requestId);
  endRpcSpan(span, err);
  return spanIds(span);
}
