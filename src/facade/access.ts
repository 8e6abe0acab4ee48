// Who gets the facade's attention. Every keyed route (/v1/… except the public model list) has
// its caller authenticated before Fastify reads a byte of the body (by the key check's memory,
// else by one lookup), so a stranger's request, upload or not, costs no memory, parsing or
// tokenizer time. The caller then travels with each service call as a context value: this is
// the one place the HTTP side reads the key. And every answer on those routes says what it
// cost, refusals included (0), with the request id.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { createContextValues, type ContextValues } from '@connectrpc/connect';
import { toGatewayError, unauthorized, unexpectedFailure } from '../errors/errors.ts';
import { keyFromHeaders } from '../billing/keys.ts';
import { CALLER, CUSTOMER_HEADER, type Caller } from '../billing/caller.ts';
import { errorBody, sendGatewayError, type WireShape } from './errors.ts';
import { TRACE_CONTEXT } from '../tracing/spans.ts';
import type { RequestLines } from '../log/request-lines.ts';

/** Keyed routes: everything under /v1/ but the model list, which is public. */
export const isKeyedRoute = (url: string): boolean => url.startsWith('/v1/') && !url.startsWith('/v1/models');

export const shapeOf = (url: string): WireShape => (url.startsWith('/v1/messages') ? 'anthropic' : 'openai');

export interface AccessDeps {
  /**
   * The key check's memory, asked synchronously (KeyCheck.known): the caller of a key it knows
   * is live (cached, or confirmed a moment ago) goes on in the same tick.
   */
  knownCaller: (apiKey: string | undefined) => Caller | undefined;
  /** Any other key: asked of the key check, which may need the database (KeyCheck.authenticate). */
  authenticate: (apiKey: string | undefined) => Promise<Caller | undefined>;
  /** A keyed request's line will carry what its settle wrote: its note is opened here (src/log/request-lines.ts). */
  requestLines?: Pick<RequestLines, 'open'>;
}

export function registerAccess(app: FastifyInstance, deps: AccessDeps): void {
  // Declared, so every request object has the same shape from the start.
  app.decorateRequest('callHeaders', null);
  app.decorateRequest('caller', null);
  app.decorateRequest('callValues', null);
  app.decorateRequest('routePattern', null);
  // A callback hook, not an async one: a known key's request goes on in the same tick.
  app.addHook('onRequest', (req, reply, done) => {
    const route = routeOf(req);
    // No such route: answered now, or Fastify would read the body first to answer 404. By the
    // not-found handler of the path's scope: unknownRoute, or another edge's under its prefix
    // (the console's under /console). Those answer synchronously.
    if (!route) {
      drainThenCut(req);
      req.routeOptions.handler.call(req.server, req, reply);
      return;
    }
    if (!isKeyedRoute(route)) return done();
    deps.requestLines?.open(req.id);
    const key = keyFromHeaders(headerText(req, 'authorization'), headerText(req, 'x-api-key'));
    const known = deps.knownCaller(key);
    if (known) {
      req.caller = known;
      return done();
    }
    const refuse = (err: unknown) => {
      drainThenCut(req);
      const ge = toGatewayError(err);
      ge.requestId ||= req.id;
      sendGatewayError(reply, ge, shapeOf(route));
    };
    deps.authenticate(key).then(
      (caller) => {
        if (!caller) return refuse(unauthorized(req.id));
        req.caller = caller;
        done();
      },
      (err) => {
        req.log.error({ err }, 'key check failed');
        refuse(unexpectedFailure(err, req.id));
      },
    );
  });
}

const headerText = (req: FastifyRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
};

/** The authenticated caller, as the services receive it with every call of this request. */
export function callValues(req: FastifyRequest): ContextValues {
  if (!req.callValues) {
    req.callValues = createContextValues();
    if (req.caller) req.callValues.set(CALLER, req.caller);
    if (req.traceContext) req.callValues.set(TRACE_CONTEXT, req.traceContext);
  }
  return req.callValues;
}

/** The README's promise: every answer of a keyed route carries its cost and request id (run from the facade's one onSend hook). */
export function stampKeyedAnswer(req: FastifyRequest, reply: FastifyReply): void {
  if (isKeyedRoute(req.url)) {
    if (!reply.hasHeader('x-gateway-cost-nano-usd')) reply.header('x-gateway-cost-nano-usd', '0');
    if (!reply.hasHeader('x-request-id')) reply.header('x-request-id', req.id).header('request-id', req.id);
  }
}

/** The only caller headers the services see: Anthropic's version and beta flags and the end customer (never the key). Made once per request. */
export function callHeaders(req: FastifyRequest): Headers {
  return (req.callHeaders ??= pickCallHeaders(req));
}

function pickCallHeaders(req: FastifyRequest): Headers {
  const h = new Headers();
  for (const name of ['anthropic-version', 'anthropic-beta', CUSTOMER_HEADER]) {
    const v = req.headers[name];
    if (typeof v === 'string') h.set(name, v);
  }
  return h;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** callHeaders' answer, once asked (null until then). */
    callHeaders: Headers | null;
    /** The caller the onRequest hook authenticated, on keyed routes. */
    caller: Caller | null;
    /** callValues' answer, once asked. */
    callValues: ContextValues | null;
    /** routeOf's answer, once asked (null until then; '' for a request no route has). */
    routePattern: string | null;
  }
}

/**
 * The request's route pattern (`/v1/chat/completions`), or undefined when no route has it: read
 * once per request, by whichever hook asks first (Fastify's routeOptions is a getter that builds an
 * object of the route's options each time it is read).
 */
export function routeOf(req: FastifyRequest): string | undefined {
  return (req.routePattern ??= req.routeOptions.url ?? '') || undefined;
}

/**
 * For an answer given before the request body was read: the rest of the body is read and
 * dropped (so the client, still uploading, gets the answer rather than a reset connection),
 * for a few seconds at most; a body still arriving then is cut off.
 */
export function drainThenCut(req: FastifyRequest): void {
  req.raw.resume();
  setTimeout(() => {
    if (!req.raw.complete) req.raw.socket?.destroy();
  }, 5_000).unref();
}

/** A refusal before (or instead of) reading the body, in the OpenAI shape. */
export function refuseUnread(req: FastifyRequest, reply: FastifyReply, status: number, body: object): FastifyReply {
  drainThenCut(req);
  return reply
    .code(status)
    .header('x-gateway-cost-nano-usd', '0')
    .header('x-request-id', req.id)
    .header('request-id', req.id)
    .type('application/json')
    .send(body);
}

/** 404 in the shape of the route family the path looks like. */
export function unknownRoute(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply
    .code(404)
    .type('application/json')
    .send(
      errorBody(
        shapeOf(req.url),
        404,
        `Unknown route: ${req.method} ${req.url.split('?')[0]}`,
        'invalid_request_error',
        'unknown_route',
      ),
    );
}
