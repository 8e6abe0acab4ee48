// The facade's server span (OpenTelemetry HTTP conventions): started before anything else looks at
// a request (so a 401 is traced too), ended when its response closes (a caller that leaves
// included). A keyed caller's traceparent continues, links or is ignored as TRACE_CALLER_CONTEXT
// says; the span travels to the service in the call's context values (callValues). Nothing is
// registered while tracing is off. Scrapes of /metrics and the health routes are not traced. With
// TRACE_RESPONSE_HEADER on, a sampled request's answer names its trace (`traceresponse`).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TracingConfig } from '../config/tracing-config.ts';
import { routeOf } from './access.ts';
import {
  type Context,
  callerParent,
  callerText,
  contextWith,
  failSpan,
  runIn,
  type Span,
  SpanKind,
  startSpan,
  traceresponseOf,
  tracingOn,
} from '../tracing/spans.ts';

const UNTRACED = new Set(['/metrics', '/healthz', '/readyz']);

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span and the context that carries it, while tracing is on (null otherwise). */
    traceContext: Context | null;
  }
}

/** `responseHeader` (TRACE_RESPONSE_HEADER): every answer of a sampled request carries its `traceresponse`. */
export function registerTracing(
  app: FastifyInstance,
  callerContext: TracingConfig['callerContext'],
  responseHeader = false,
): void {
  app.decorateRequest('traceContext', null);
  if (!tracingOn()) return;
  app.addHook('onRequest', (req, reply, done) => {
    const route = routeOf(req);
    if (route !== undefined && UNTRACED.has(route)) return done();
    // The HTTP port's callers are the operator's customers (the console's key holders too): TRACE_CALLER_CONTEXT decides.
    const { parent, links } = callerParent(req.headers, callerContext);
    const span = startSpan(
      route ? `${req.method} ${route}` : req.method,
      SpanKind.SERVER,
      () => ({
        'http.request.method': req.method,
        ...(route ? { 'http.route': route } : {}),
        'url.path': callerText(req.url.split('?')[0]!, 512),
        'url.scheme': 'http',
        'server.port': req.socket.localPort ?? 0,
        'network.protocol.version': req.raw.httpVersion,
        ...(typeof req.headers['user-agent'] === 'string'
          ? { 'user_agent.original': req.headers['user-agent'].slice(0, 256) }
          : {}),
        'gateway.request_id': req.id,
      }),
      parent,
      links,
    );
    req.traceContext = contextWith(span, parent);
    // An unsampled request's span records nothing: nothing to end, and no trace to tell of.
    if (span.isRecording()) {
      reply.raw.once('close', () => endServerSpan(span, req, reply));
      // On the raw response: a stream's answer (written on it directly) carries it too.
      if (responseHeader) reply.raw.setHeader('traceresponse', traceresponseOf(span)!);
    }
    done();
  });
  // The handler runs in the span's context (the body was read in the socket's): what it calls in
  // process, the console's RPCs included, is the span's child.
  app.addHook('preHandler', (req, _reply, done) => runIn(req.traceContext ?? undefined, done));
}

function endServerSpan(span: Span, req: FastifyRequest, reply: FastifyReply): void {
  const status = reply.raw.statusCode;
  span.setAttribute('http.response.status_code', status);
  if (!reply.raw.writableFinished) span.setAttribute('gateway.caller_left', true);
  if (req.caller) span.setAttribute('gateway.key.id', req.caller.keyId);
  // A server span is failed by a 5xx only: a 4xx is the caller's (OpenTelemetry's HTTP conventions).
  if (status >= 500) failSpan(span, String(status));
  else if (status >= 400) span.setAttribute('error.type', String(status));
  span.end();
}
