// The HTTP facade as a Fastify app: requests read in their wire format (OpenAI's, Anthropic's),
// their callers authenticated (access.ts), one service call each, and the reply written back in
// the same wire format (JSON, SSE, binary audio, MP4). It owns the HTTP side only: no money, no
// upstreams, no database; translating between providers' formats is the services'
// (src/inference/translate/).
// This file assembles: the instance, its hooks, its error and not-found answers, and the route
// plugins (routes/, one per route family), which share answer.ts.
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyPluginAsync,
  type FastifyReply,
  type FastifyRequest,
  type onResponseHookHandler,
  type onSendHookHandler,
} from 'fastify';
import type { Logger } from 'pino';
import type { Transport } from '@connectrpc/connect';
import { newRequestId } from '../billing/ids.ts';
import type { Config } from '../config/config.ts';
import type { Metrics } from '../log/metrics.ts';
import type { RequestLines, SettledFacts } from '../log/request-lines.ts';
import { type RequestLine, writeRequestLine } from '../log/request-line.ts';
import {
  type AccessDeps,
  drainThenCut,
  registerAccess,
  routeOf,
  shapeOf,
  stampKeyedAnswer,
  unknownRoute,
} from './access.ts';
import { createAnswers, modelOf, type ServedModel, servedModelOf } from './answer.ts';
import { errorBody, shouldRetry } from './errors.ts';
import { LazyChild } from './lazy-child.ts';
import { budgetRoutes } from './routes/budgets.ts';
import { chatRoutes } from './routes/chat.ts';
import { mediaRoutes } from './routes/media.ts';
import { messagesRoutes } from './routes/messages.ts';
import { modelRoutes } from './routes/models.ts';
import { opsRoutes } from './routes/ops.ts';
import { responsesRoutes } from './routes/responses.ts';
import { videoRoutes } from './routes/video.ts';
import { registerTracing } from './tracing.ts';
import { spanIdsOf } from '../tracing/spans.ts';

export interface FacadeDeps {
  transport: Transport;
  log: Logger;
  bodyLimitBytes: number;
  uploads: Config['media'];
  metrics: Metrics;
  /** Bearer token for GET /metrics; unset: loopback callers only. */
  metricsToken: string | undefined;
  /** The catalogue id that serves a model name (itself, or an alias's model; the book in force), or undefined: the only model names used as metric labels. */
  servedModel: ServedModel;
  /** Providers the built-in demo provider answers for (`npm start -- --demo`): GET /v1/models labels their models. */
  demoProviders?: ReadonlySet<string>;
  /** Unary answers carry x-gateway-deployment (DEPLOYMENT_HEADER). */
  deploymentHeader?: boolean;
  /** STREAM_STALL_TIMEOUT_MS: a stream whose client takes in nothing this long is cut; 0 or unset: never. */
  streamStallMs?: number;
  /** What a keyed caller's traceparent does (TRACE_CALLER_CONTEXT; tracing-config.ts). */
  traceCallerContext?: 'link' | 'continue' | 'ignore';
  /** A sampled request's answers carry `traceresponse` (TRACE_RESPONSE_HEADER; tracing-config.ts). */
  traceResponseHeader?: boolean;
  /** Where the settle tells each request's line its deployment, attempts and money (src/log/request-lines.ts); unset: the line has none. */
  requestLines?: RequestLines;
  knownCaller: AccessDeps['knownCaller'];
  authenticate: AccessDeps['authenticate'];
  /** Throws when a dependency (database, …) is not reachable. */
  ready: () => Promise<void>;
  /**
   * Routes of another edge served on this port (the console, src/console/), under the facade's
   * hooks. Handed in by the process that wires both (server.ts): an edge imports no other edge.
   * Each is registered with EdgePluginOptions.
   */
  plugins?: readonly FastifyPluginAsync<EdgePluginOptions>[];
}

/** An edge's answer to a request under its prefix that Fastify refused before routing it. */
export type RefuseUnroutable = (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => void;

/** What each plugin of another edge is handed. */
export interface EdgePluginOptions {
  /**
   * Answer, under `prefix`, the requests Fastify refuses before any route or hook runs (a URL
   * that does not decode, a path parameter over 100 characters), so they carry that edge's
   * headers and error shape. A request there with no route gets the not-found handler the edge
   * sets for its prefix (access.ts).
   */
  claimPrefix: (prefix: string, refuse: RefuseUnroutable) => void;
}

export function buildFacade(deps: FacadeDeps): FastifyInstance {
  const claimed: Claim[] = [];
  const answerError = errorAnswer(deps.bodyLimitBytes);
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    // One log line per request, written by the onResponse hook below.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    bodyLimit: deps.bodyLimitBytes,
    // Our own ids, never the caller's: an echoed header is a log-injection vector.
    genReqId: () => newRequestId(),
    return503OnClosing: true,
    // req.log is made when something logs through it (errors), not for every request: a pino
    // child per request cost every request (docs/benchmark.md). The request line goes to deps.log.
    childLoggerFactory: (logger, bindings, opts) => new LazyChild(logger, bindings, opts),
    // A URL Fastify cannot route: the answer of the edge that claimed its prefix, else the facade's.
    frameworkErrors: byClaimedPrefix(claimed, answerError),
  });
  // Declared, so every request object has the same shape from the start.
  app.decorateRequest('modelName', null);

  // The server span first, so a refusal is traced too (nothing is registered while tracing is off).
  registerTracing(app, deps.traceCallerContext ?? 'link', deps.traceResponseHeader);
  // Keys are confirmed before any body is read; every keyed answer carries its cost.
  registerAccess(app, {
    knownCaller: deps.knownCaller,
    authenticate: deps.authenticate,
    ...(deps.requestLines ? { requestLines: deps.requestLines } : {}),
  });

  // Bodies stay bytes: the services parse them once, and forward them untouched.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  // One onSend hook (each hook is a step on every answer): keyed answers carry their cost and
  // request id; every error answer says whether sending it again can help.
  app.addHook('onSend', stampAnswer);
  app.addHook('onResponse', countAndLog(deps));

  app.setErrorHandler(answerError);
  app.setNotFoundHandler(unknownRoute); // (access.ts answers unknown routes before their body is read)

  // The routes, one plugin per family; they run under the hooks above.
  const answers = createAnswers(deps.servedModel, deps.deploymentHeader, {
    ms: deps.streamStallMs ?? 0,
    cut: () => deps.metrics.streamStalls.of().inc(),
  });
  const inferenceOptions = { transport: deps.transport, answers };
  app.register(opsRoutes, { metrics: deps.metrics, metricsToken: deps.metricsToken, ready: deps.ready });
  app.register(modelRoutes, {
    transport: deps.transport,
    knownCaller: deps.knownCaller,
    authenticate: deps.authenticate,
    ...(deps.demoProviders ? { demoProviders: deps.demoProviders } : {}),
  });
  app.register(chatRoutes, inferenceOptions);
  app.register(messagesRoutes, inferenceOptions);
  app.register(responsesRoutes, inferenceOptions);
  app.register(mediaRoutes, { ...inferenceOptions, uploads: deps.uploads });
  app.register(videoRoutes, { transport: deps.transport });
  app.register(budgetRoutes, { transport: deps.transport });
  const edgeOptions: EdgePluginOptions = { claimPrefix: (prefix, refuse) => void claimed.push({ prefix, refuse }) };
  for (const plugin of deps.plugins ?? []) app.register(plugin, edgeOptions);

  return app;
}

type Claim = { prefix: string; refuse: RefuseUnroutable };

/** Fastify's frameworkErrors: the answer of the edge that claimed the path's prefix, else the facade's. */
function byClaimedPrefix(claimed: readonly Claim[], answerError: RefuseUnroutable): RefuseUnroutable {
  return (err, req, reply) => {
    // (An absolute-form target, `GET http://host/console/…`, is routed by its path too.)
    const path = req.url.replace(/^[a-z][a-z\d+.-]*:\/\/[^/?]*/i, '').split('?')[0]!;
    const owner = claimed.find((c) => path === c.prefix || path.startsWith(`${c.prefix}/`));
    if (owner) owner.refuse(err, req, reply);
    else answerError(err, req, reply);
  };
}

/** The one onSend hook. */
const stampAnswer: onSendHookHandler = (req, reply, payload, done) => {
  stampKeyedAnswer(req, reply);
  if (reply.statusCode >= 400 && !reply.hasHeader('x-should-retry'))
    reply.header('x-should-retry', String(shouldRetry(reply.statusCode)));
  done(null, payload);
};

/**
 * The onResponse hook: the request's metric, and one log line per request; a keyed request's line
 * waits for its settle (src/log/request-lines.ts) and carries what it wrote.
 */
function countAndLog(
  deps: Pick<FacadeDeps, 'log' | 'metrics' | 'servedModel' | 'requestLines'>,
): onResponseHookHandler {
  return (req, reply, done) => {
    const route = routeOf(req);
    if (route?.startsWith('/v1/'))
      deps.metrics
        .requestsOf(
          route,
          servedModelOf(req, deps.servedModel) ?? (modelOf(req) ? 'other' : ''),
          String(reply.statusCode),
        )
        .inc();
    // The same line req.log would write: the request id first, as a child logger's binding.
    const line: RequestLine = {
      requestId: req.id,
      method: req.method,
      url: route ?? req.url.split('?')[0]!,
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime),
    };
    // Its own trace's ids: the line is written outside the request's context.
    const ids = req.traceContext ? spanIdsOf(req.traceContext) : undefined;
    if (ids) {
      line.trace_id = ids.trace_id;
      line.span_id = ids.span_id;
    }
    if (deps.requestLines)
      deps.requestLines.close(req.id, (facts) => writeRequestLine(deps.log, withMoney(line, facts)));
    else writeRequestLine(deps.log, line);
    done();
  };
}

/**
 * What the settle wrote, on the request line: the deployment and the attempts when there were
 * some (the usage row's words: `gpt-4o/azure=429 gpt-4o/openai=ok`), the provider's cost and the
 * charge in nano-USD, as decimal strings (exact, as every amount the gateway logs).
 */
function withMoney(line: RequestLine, facts: SettledFacts | undefined): RequestLine {
  if (!facts) return line;
  if (facts.deployment) line.deployment = facts.deployment;
  if (facts.attempts) line.attempts = facts.attempts;
  line.providerCostNano = facts.providerCostNano.toString();
  line.chargeNano = facts.chargeNano.toString();
  return line;
}

/** The facade's error handler (and its answer to what Fastify cannot route), in the shape of the path's route family. */
function errorAnswer(bodyLimitBytes: number) {
  return (err: { statusCode?: number; code?: string; message: string }, req: FastifyRequest, reply: FastifyReply) => {
    const status = err.statusCode ?? 500;
    const shape = shapeOf(req.url);
    reply.header('x-request-id', req.id).type('application/json');
    if (status === 413) {
      // Read and discard the rest of the body (for a few seconds at most) so the client gets this
      // answer instead of a reset connection while it is still uploading.
      drainThenCut(req);
      return reply
        .code(413)
        .send(
          errorBody(
            shape,
            413,
            `The request body is larger than the limit of ${bodyLimitBytes} bytes.`,
            'invalid_request_error',
            'request_too_large',
          ),
        );
    }
    if (status >= 400 && status < 500)
      return reply.code(status).send(errorBody(shape, status, err.message, 'invalid_request_error', err.code ?? null));
    req.log.error({ err }, 'unhandled facade error');
    return reply.code(500).send(errorBody(shape, 500, 'Internal gateway error.', 'server_error'));
  };
}
