// The HTTP facade as a Fastify app: requests read in their wire format (OpenAI's, Anthropic's),
// their callers authenticated (access.ts), one service call each, and the reply written back in
// the same wire format (JSON, SSE, binary audio, MP4). It owns the HTTP side only: no money, no
// upstreams, no database; translating between providers' formats is the services'
// (src/inference/translate/).
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyPluginAsync,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Bindings, ChildLoggerOptions, LogFn, Logger } from 'pino';
import { ConnectError, createClient, type ContextValues, type Transport } from '@connectrpc/connect';
import {
  InferenceService,
  type InferenceEvent,
  type InferenceResponse,
  type SseEvent,
} from '../gen/gateway/v1/inference_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { toGatewayError } from '../errors/errors.ts';
import { newRequestId } from '../billing/ids.ts';
import type { Metrics } from '../log/metrics.ts';
import { errorBody, sendGatewayError, shouldRetry, type WireShape } from './errors.ts';
import { registerModelRoutes } from './model-routes.ts';
import { keyFromHeaders } from '../billing/keys.ts';
import { registerMediaRoutes } from './media-routes.ts';
import { registerVideoRoutes } from './video-routes.ts';
import { writeChunk } from './write.ts';
import { asksForStream } from './stream-flag.ts';
import { serverStream } from '../rpc/server-stream.ts';
import {
  callHeaders,
  callValues,
  drainThenCut,
  registerAccess,
  shapeOf,
  stampKeyedAnswer,
  unknownRoute,
  type AccessDeps,
} from './access.ts';
import { bearerMatches } from '../config/bearer.ts';
import { isLoopbackPeer } from '../config/exposure.ts';
import type { Config } from '../config/config.ts';

export interface FacadeDeps {
  transport: Transport;
  log: Logger;
  bodyLimitBytes: number;
  uploads: Config['media'];
  metrics: Metrics;
  /** Bearer token for GET /metrics; unset: loopback callers only. */
  metricsToken: string | undefined;
  /** The catalogue id that serves a model name (itself, or an alias's model; the book in force), or undefined: the only model names used as metric labels. */
  servedModel: (name: string) => string | undefined;
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

const DATA_FIELD = Buffer.from('data: ');
const EVENT_END = Buffer.from('\n\n');

export function buildFacade(deps: FacadeDeps): FastifyInstance {
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
    frameworkErrors: (err, req, reply) => {
      // (An absolute-form target, `GET http://host/console/…`, is routed by its path too.)
      const path = req.url.replace(/^[a-z][a-z\d+.-]*:\/\/[^/?]*/i, '').split('?')[0]!;
      const owner = claimed.find((c) => path === c.prefix || path.startsWith(`${c.prefix}/`));
      if (owner) owner.refuse(err, req, reply);
      else answerError(err, req, reply);
    },
  });
  const claimed: { prefix: string; refuse: RefuseUnroutable }[] = [];
  // Declared, so every request object has the same shape from the start.
  app.decorateRequest('modelName', null);
  const inference = createClient(InferenceService, deps.transport);
  const catalogue = createClient(CatalogueService, deps.transport);

  // Keys are confirmed before any body is read; every keyed answer carries its cost.
  registerAccess(app, { knownCaller: deps.knownCaller, authenticate: deps.authenticate });

  // Bodies stay bytes: the services parse them once, and forward them untouched.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  // One onSend hook (each hook is a step on every answer): keyed answers carry their cost and
  // request id; every error answer says whether sending it again can help.
  app.addHook('onSend', (req, reply, payload, done) => {
    stampKeyedAnswer(req, reply);
    if (reply.statusCode >= 400 && !reply.hasHeader('x-should-retry'))
      reply.header('x-should-retry', String(shouldRetry(reply.statusCode)));
    done(null, payload);
  });

  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url; // a getter that builds an object: read once
    if (route?.startsWith('/v1/'))
      deps.metrics
        .requestsOf(route, servedModelOf(req, deps) ?? (modelOf(req) ? 'other' : ''), String(reply.statusCode))
        .inc();
    // The same line req.log would write: the request id first, as a child logger's binding.
    deps.log.info(
      {
        requestId: req.id,
        method: req.method,
        url: route ?? req.url.split('?')[0],
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
      },
      'request',
    );
    done();
  });

  function answerError(
    err: { statusCode?: number; code?: string; message: string },
    req: FastifyRequest,
    reply: FastifyReply,
  ) {
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
            `The request body is larger than the limit of ${deps.bodyLimitBytes} bytes.`,
            'invalid_request_error',
            'request_too_large',
          ),
        );
    }
    if (status >= 400 && status < 500)
      return reply.code(status).send(errorBody(shape, status, err.message, 'invalid_request_error', err.code ?? null));
    req.log.error({ err }, 'unhandled facade error');
    return reply.code(500).send(errorBody(shape, 500, 'Internal gateway error.', 'server_error'));
  }
  app.setErrorHandler(answerError);
  app.setNotFoundHandler(unknownRoute); // (access.ts answers unknown routes before their body is read)

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/metrics', async (req, reply) => {
    // With METRICS_TOKEN: that bearer token, from anywhere. Without: callers on this machine only.
    if (
      deps.metricsToken
        ? !bearerMatches(req.headers.authorization, deps.metricsToken)
        : !isLoopbackPeer(req.socket.remoteAddress)
    ) {
      return deps.metricsToken
        ? reply.code(401).send({ error: 'metrics token required' })
        : reply
            .code(403)
            .send({ error: 'metrics are served to this machine only; set METRICS_TOKEN to read them from elsewhere' });
    }
    return reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });
  app.get('/readyz', async (req, reply) => {
    try {
      await deps.ready();
      return { status: 'ready' };
    } catch (err) {
      // The cause stays in the log: a database error names hosts, users and paths.
      req.log.warn({ err }, 'not ready');
      return reply.code(503).send({ status: 'not_ready', reason: 'a dependency (the database) is not reachable' });
    }
  });

  registerModelRoutes(app, catalogue, async (req) => {
    // A public route: a key is not needed, but one that is live shows its account group's prices.
    const header = (name: string) => (typeof req.headers[name] === 'string' ? req.headers[name] : undefined);
    const key = keyFromHeaders(header('authorization'), header('x-api-key'));
    if (!key) return '';
    return (deps.knownCaller(key) ?? (await deps.authenticate(key).catch(() => undefined)))?.group ?? '';
  });

  app.post('/v1/chat/completions', (req, reply) =>
    asksForStream(req.body as Buffer)
      ? answerStream(req, reply, 'openai', (body, opts) =>
          serverStream(deps.transport, InferenceService.method.streamChatCompletion, { body, requestId: req.id }, opts),
        )
      : answerUnary(req, reply, 'openai', (body, opts) => inference.chatCompletion({ body, requestId: req.id }, opts)),
  );
  app.post('/v1/messages', (req, reply) =>
    asksForStream(req.body as Buffer)
      ? answerStream(req, reply, 'anthropic', (body, opts) =>
          serverStream(deps.transport, InferenceService.method.streamMessage, { body, requestId: req.id }, opts),
        )
      : answerUnary(req, reply, 'anthropic', (body, opts) =>
          inference.createMessage({ body, requestId: req.id }, opts),
        ),
  );
  app.post('/v1/messages/count_tokens', (req, reply) =>
    answerUnary(req, reply, 'anthropic', (body, opts) =>
      inference.countMessageTokens({ body, requestId: req.id }, opts),
    ),
  );

  app.post('/v1/responses', (req, reply) =>
    asksForStream(req.body as Buffer)
      ? answerStream(req, reply, 'openai-events', (body, opts) =>
          serverStream(deps.transport, InferenceService.method.streamResponse, { body, requestId: req.id }, opts),
        )
      : answerUnary(req, reply, 'openai', (body, opts) => inference.createResponse({ body, requestId: req.id }, opts)),
  );

  type CallOptions = { headers: Headers; contextValues: ContextValues; signal?: AbortSignal };

  registerMediaRoutes(app, {
    inference,
    uploads: deps.uploads,
    answerUnary,
    callOptions: (req, signal) => ({ headers: callHeaders(req), contextValues: callValues(req), signal }),
  });
  registerVideoRoutes(app, { transport: deps.transport });
  const edgeOptions: EdgePluginOptions = { claimPrefix: (prefix, refuse) => void claimed.push({ prefix, refuse }) };
  for (const plugin of deps.plugins ?? []) app.register(plugin, edgeOptions);

  async function answerUnary(
    req: FastifyRequest,
    reply: FastifyReply,
    shape: WireShape,
    call: (body: Buffer, opts: CallOptions) => Promise<InferenceResponse>,
  ) {
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    try {
      const r = await call(body, { headers: callHeaders(req), contextValues: callValues(req) });
      const requestId = r.charge?.requestId || req.id;
      reply.header('x-request-id', requestId).header('request-id', requestId);
      const served = servedModelOf(req, deps);
      if (served) reply.header('x-gateway-model', served);
      if (r.charge) reply.header('x-gateway-cost-nano-usd', String(r.charge.costNano));
      return reply
        .type(r.contentType || 'application/json')
        .send(Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength));
    } catch (err) {
      copyRateLimitHeaders(err, reply);
      return sendGatewayError(reply, withRequestId(toGatewayError(err), req.id), shape);
    }
  }

  // Waits for the first event before committing to a 200, so an upstream that fails before its
  // first chunk still gets a real error status.
  async function answerStream(
    req: FastifyRequest,
    reply: FastifyReply,
    format: WireShape | 'openai-events',
    call: (body: Buffer, opts: CallOptions) => AsyncIterator<InferenceEvent>,
  ) {
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    const abort = new AbortController();
    const res = reply.raw;
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    // The Responses API speaks OpenAI errors but frames its stream with event names and no [DONE].
    const shape: WireShape = format === 'anthropic' ? 'anthropic' : 'openai';
    const doneMarker = format === 'openai';
    const events = call(body, { headers: callHeaders(req), contextValues: callValues(req), signal: abort.signal });
    let first: IteratorResult<InferenceEvent>;
    try {
      first = await events.next();
    } catch (err) {
      if (abort.signal.aborted) return reply.hijack();
      copyRateLimitHeaders(err, reply);
      return sendGatewayError(reply, withRequestId(toGatewayError(err), req.id), shape);
    }
    reply.hijack();
    const requestId = first.value?.event.case === 'requestId' ? first.value.event.value : req.id;
    const served = servedModelOf(req, deps);
    res.writeHead(200, {
      ...(served ? { 'x-gateway-model': served } : {}),
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-request-id': requestId,
      'request-id': requestId,
      'x-accel-buffering': 'no',
    });
    // The event's bytes as they are (no decode to a string and encode back per chunk).
    const frame = (e: SseEvent) =>
      Buffer.concat([e.event ? Buffer.from(`event: ${e.event}\ndata: `) : DATA_FIELD, e.data, EVENT_END]);
    let ended = false;
    try {
      for (let r = first; !r.done; r = await events.next()) {
        const ev = r.value.event;
        if (ev.case === 'data') await writeChunk(res, frame(ev.value));
        else if (ev.case === 'error') {
          await writeChunk(res, frame(ev.value));
          ended = true;
        }
      }
      if (!ended && doneMarker) await writeChunk(res, 'data: [DONE]\n\n');
    } catch (err) {
      if (!abort.signal.aborted) {
        const ge = toGatewayError(err);
        const data = errorBody(shape, 500, ge.message, ge.type, ge.code || null);
        await writeChunk(res, format === 'openai' ? `data: ${data}\n\n` : `event: error\ndata: ${data}\n\n`).catch(
          () => {},
        );
      }
    } finally {
      res.end();
    }
    // The onResponse hook counts and logs this request too (it runs for hijacked replies).
  }

  return app;
}

/**
 * A request's logger whose pino child is made on first use. A class (methods on the prototype):
 * one small object per request, no closures.
 */
class LazyChild {
  private readonly parent: FastifyBaseLogger;
  private readonly bindings: Bindings;
  private readonly opts: ChildLoggerOptions;
  private made: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions) {
    this.parent = parent;
    this.bindings = bindings;
    this.opts = opts;
  }

  private get log(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.opts));
  }

  get level() {
    return this.log.level;
  }
  set level(l) {
    this.log.level = l;
  }
  fatal(...a: Parameters<LogFn>) {
    this.log.fatal(...a);
  }
  error(...a: Parameters<LogFn>) {
    this.log.error(...a);
  }
  warn(...a: Parameters<LogFn>) {
    this.log.warn(...a);
  }
  info(...a: Parameters<LogFn>) {
    this.log.info(...a);
  }
  debug(...a: Parameters<LogFn>) {
    this.log.debug(...a);
  }
  trace(...a: Parameters<LogFn>) {
    this.log.trace(...a);
  }
  silent(...a: Parameters<LogFn>) {
    this.log.silent(...a);
  }
  child(bindings: Bindings, opts?: ChildLoggerOptions) {
    return this.log.child(bindings, opts);
  }
}

/** The model named in a JSON body ('' when none); bounded, for labels and headers only. */
function modelOf(req: FastifyRequest): string {
  // Asked twice per request (a header, the metric label): the scan runs once.
  return (req.modelName ??= scanModel(req.body));
}

function scanModel(body: unknown): string {
  if (!Buffer.isBuffer(body) || body.length === 0) return '';
  const m = /"model"\s*:\s*"([A-Za-z0-9._-]{1,64})"/.exec(body.toString('latin1', 0, Math.min(body.length, 4096)));
  return m ? m[1]! : '';
}

declare module 'fastify' {
  interface FastifyRequest {
    /** modelOf's answer, once asked (null until then). */
    modelName: string | null;
  }
}

/**
 * The catalogue model that serves the model a request names: the alias target, or the model
 * itself. Undefined for names the catalogue does not know (their metric label is 'other').
 */
function servedModelOf(req: FastifyRequest, deps: Pick<FacadeDeps, 'servedModel'>): string | undefined {
  const name = modelOf(req);
  if (name === '') return undefined;
  return deps.servedModel(name);
}

function copyRateLimitHeaders(err: unknown, reply: FastifyReply): void {
  ConnectError.from(err).metadata.forEach((value, name) => {
    if (name.startsWith('x-ratelimit-')) reply.header(name, value);
  });
}

function withRequestId<T extends { requestId: string }>(ge: T, id: string): T {
  if (!ge.requestId) ge.requestId = id;
  return ge;
}
