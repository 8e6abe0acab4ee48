// The console's error answers (docs/console.md#errors): `{"error": {"code", "message"}}` with the
// console's headers (headers.ts) and no caching. The API's routes, the pages and every request
// under /console that no console route takes answer this way: an unknown address or method (a
// browser's CORS preflight among them) and a URL that does not decode. Without the fallback below
// those reached the gateway's generic /v1 handlers: no CSP or framing headers, the /v1 shape.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { ConnectError } from '@connectrpc/connect';
import { toGatewayError } from '../errors/errors.ts';
import { setConsoleHeaders } from './headers.ts';
import { ConsoleError } from './wire.ts';
import type { ErrorAnswer } from './web/wire-types.ts';

export const CONSOLE_PREFIX = '/console';

/** An error in the console's shape, with its headers. */
export function sendConsoleError(reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  setConsoleHeaders(reply);
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .type('application/json')
    .send({ error: { code, message } } satisfies ErrorAnswer);
}

/** What a request asked for, as far as it is worth repeating in an answer (it is the caller's text). */
const asked = (req: FastifyRequest) => `${req.method} ${req.url.split('?')[0]!.slice(0, 200)}`;

/** 404 for an address, or a method at an address, that no console route has. */
export function consoleNotFound(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const api = /^\/console\/api(\/|\?|$)/.test(req.url);
  return sendConsoleError(reply, 404, 'not_found', `Unknown console ${api ? 'API path' : 'address'}: ${asked(req)}`);
}

type ErrorLike = Error & { statusCode?: number; code?: string };

/** The error handler of every console scope: its own refusals, the services' errors, Fastify's refusals, and the rest as 500. */
export function consoleErrorHandler(log: Pick<Logger, 'error'>) {
  return (err: ErrorLike, req: FastifyRequest, reply: FastifyReply): FastifyReply => {
    let status: number;
    let code: string;
    let message: string;
    if (err instanceof ConsoleError) {
      ({ status, code, message } = err);
      if (err.retryAfterSeconds !== undefined) reply.header('retry-after', String(err.retryAfterSeconds));
    } else if (err instanceof ConnectError) {
      const ge = toGatewayError(err);
      status = ge.httpStatus || 500;
      code = ge.code || ge.type;
      message = ge.message;
      if (ge.retryAfterSeconds > 0) reply.header('retry-after', String(ge.retryAfterSeconds));
    } else if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
      // Fastify's own refusals: a body over the route's limit, a body shorter than its length, an aborted upload.
      status = err.statusCode;
      code = status === 413 ? 'request_too_large' : 'invalid_request';
      message = err.message;
      // Fastify stopped reading: the rest is read and dropped so a client still uploading gets this answer.
      if (status === 413) drainThenCut(req);
    } else {
      status = 500;
      code = 'internal_error';
      message = 'Internal gateway error.';
    }
    // A service's failure was logged with its cause where it happened (the transport); others here.
    if (status >= 500)
      log.error(
        err instanceof ConnectError ? { code, message, requestId: req.id } : { err, requestId: req.id },
        'console request failed',
      );
    return sendConsoleError(reply, status, code, message);
  };
}

/**
 * The answer to a request under /console that Fastify refused before routing it, so before any
 * hook: a URL that does not decode (400), a path segment over 100 characters where a route takes
 * a parameter (414).
 */
export function refuseUnroutable(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const status = err.statusCode === 414 ? 414 : 400;
  const why = status === 414 ? 'a part of it is too long' : 'it is not valid percent-encoded UTF-8';
  sendConsoleError(reply, status, 'invalid_request', `This console address cannot be read: ${why}.`);
}

/** How the facade lets an edge answer, under its own prefix, the requests Fastify refuses before routing. */
export type ClaimPrefix = (
  prefix: string,
  refuse: (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => void,
) => void;

/**
 * Makes the console answer for everything under /console: a not-found and an error handler of
 * its own for the prefix (the facade answers a request without a route from the not-found handler
 * of its path, before the body is read: src/facade/access.ts), and the prefix claimed for the
 * refusals before routing.
 */
export function registerConsoleFallback(
  app: FastifyInstance,
  log: Pick<Logger, 'error'>,
  claimPrefix: ClaimPrefix | undefined,
): void {
  app.register(
    async (scope) => {
      scope.setNotFoundHandler(consoleNotFound);
      scope.setErrorHandler(consoleErrorHandler(log));
    },
    { prefix: CONSOLE_PREFIX },
  );
  claimPrefix?.(CONSOLE_PREFIX, refuseUnroutable);
}

/**
 * For an answer given before the request body was read: the rest is read and dropped for a few
 * seconds at most, then a body still arriving is cut off (the facade's drainThenCut; an edge
 * imports no other edge).
 */
function drainThenCut(req: FastifyRequest): void {
  req.raw.resume();
  setTimeout(() => {
    if (!req.raw.complete) req.raw.socket?.destroy();
  }, 5_000).unref();
}
