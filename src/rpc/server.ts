// The services over the network: Connect, gRPC and gRPC-Web on one HTTP/2 port. The facade and
// the bot in the same process call the same implementations through direct-transport.ts.
import http2 from 'node:http2';
import type { Interceptor, ConnectRouter, ContextValues, HandlerContext } from '@connectrpc/connect';
import { Code, ConnectError, createContextKey, createContextValues } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { VideoService } from '../gen/gateway/v1/video_pb.js';
import { OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { ACTOR, isTelegramUser, TELEGRAM_USER_HEADER, type Actor, type Via } from '../organisations/actor.ts';
import type { Logger } from 'pino';
import {
  endStreamFlag,
  endStreamToJson,
  errorToJsonBytes,
  codeToHttpStatus,
  codeToString,
} from '@connectrpc/connect/protocol-connect';
import { setTrailerStatus } from '@connectrpc/connect/protocol-grpc';
import { keyFromHeaders } from '../billing/keys.ts';
import { CALLER, type Caller } from '../billing/caller.ts';
import { bearerMatches } from '../config/bearer.ts';
import { isLoopbackPeer } from '../config/exposure.ts';
import { newRequestId } from '../billing/ids.ts';
import { GatewayErrorSchema } from '../gen/gateway/v1/errors_pb.js';
import {
  gatewayError,
  notFound,
  unauthorized,
  scrubbedError,
  unavailable,
  unexpectedFailure,
  withGatewayDetail,
} from '../errors/errors.ts';
import type { Services } from './services.ts';
import { KEYED_SERVICES, rpcTracing, traceRefusal } from './rpc-spans.ts';
import { tracingOn } from '../tracing/spans.ts';
import { BOOK_LIMITS, CATALOGUE_READ_MAX_BYTES } from '../catalogue/book-document.ts';

/**
 * `readMaxBytes`: the port's read limit. CatalogueService reads at least room for a price book
 * document at its limit, however small BODY_LIMIT_BYTES and UPLOAD_TOTAL_LIMIT_BYTES are set; a
 * larger document is refused by the service itself, as invalid_book naming the limit (which every
 * client reads, where one that has queued a large message may not read an early refusal).
 */
export function routes(s: Services, readMaxBytes: number) {
  return (router: ConnectRouter) => {
    router.service(BillingService, s.billing);
    router.service(CatalogueService, s.catalogue, {
      readMaxBytes: Math.max(readMaxBytes, CATALOGUE_READ_MAX_BYTES),
    });
    router.service(InferenceService, s.inference);
    router.service(VideoService, s.video);
    router.service(OrganisationService, s.organisations);
  };
}

/** A call's request id on the network port, made when first needed (see callRequestIds). */
interface CallRequestId {
  value: string;
}
const CALL_REQUEST_ID = createContextKey<CallRequestId | undefined>(undefined, {
  description: 'request id of a network call',
});

/**
 * Every error a call on the network port ends with carries a GatewayError detail with the
 * call's request id (errors.proto's promise). The id is the caller's own (the request_id of an
 * Inference or Video request) or one made here and written into the message, so the service
 * uses it too: the id in an error is the id in the logs and the usage rows. A failure that is
 * not a ConnectError (a database outage, a bug) is logged here, where its cause is still known,
 * and answers an internal error that does not repeat it.
 */
export function gatewayErrorDetails(log?: Logger): Interceptor {
  return (next) => async (req) => {
    const call = req.contextValues.get(CALL_REQUEST_ID) ?? { value: '' };
    const idOf = () => (call.value ||= newRequestId());
    const adopt = (message: unknown) => {
      const m = message as { requestId?: unknown };
      if (!KEYED_SERVICES.has(req.service.typeName) || typeof m.requestId !== 'string') return;
      if (m.requestId) call.value = m.requestId;
      else m.requestId = idOf();
    };
    const failure = (err: unknown): ConnectError => {
      if (!(err instanceof ConnectError))
        log?.error(
          { err, rpc: `${req.service.typeName}/${req.method.name}`, requestId: idOf() },
          'RPC failed inside the gateway',
        );
      // Scrubbed once more on the way out: a provider's words in it were scrubbed where they were read.
      return scrubbedError(withGatewayDetail(unexpectedFailure(err, idOf()), idOf()));
    };
    let forwarded = req;
    if (req.stream) {
      const inputs = req.message;
      forwarded = {
        ...req,
        message: (async function* () {
          for await (const m of inputs) {
            adopt(m);
            yield m;
          }
        })(),
      };
    } else adopt(req.message);
    try {
      const res = await next(forwarded);
      if (!res.stream) return res;
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* messages;
          } catch (err) {
            throw failure(err);
          }
        })(),
      };
    } catch (err) {
      throw failure(err);
    }
  };
}

/**
 * The request gate, run for every call before its message is read: it gives the call its
 * request id holder, and the detail to the errors Connect raises itself, where no interceptor
 * sees them (a message over readMaxBytes or not decodable, a bad timeout or compression header:
 * met while reading a unary call's message). Connect aborts the call's signal with such an error
 * just before it writes it, so the detail is added there; test/e2e/rpc-refusals.test.ts notices
 * should a Connect release change that order.
 */
function callRequestIds(log?: Logger) {
  return (ctx: HandlerContext): void => {
    const call: CallRequestId = { value: '' };
    ctx.values.set(CALL_REQUEST_ID, call);
    ctx.signal.addEventListener(
      'abort',
      () => {
        const reason: unknown = ctx.signal.reason;
        if (!(reason instanceof ConnectError) || reason.findDetails(GatewayErrorSchema).length > 0) return;
        const requestId = (call.value ||= newRequestId());
        const tooLargeBook =
          reason.code === Code.ResourceExhausted && ctx.service.typeName === CatalogueService.typeName;
        reason.details = withGatewayDetail(tooLargeBook ? catalogueTooLarge(reason) : reason, requestId).details;
        // A caller that went away is told nothing; anything else was refused.
        if (reason.code !== Code.Canceled)
          log?.info(
            {
              requestId,
              rpc: `${ctx.service.typeName}/${ctx.method.name}`,
              status: codeToString(reason.code),
              message: reason.rawMessage,
            },
            'RPC refused',
          );
      },
      { once: true },
    );
  };
}

/** The read limit met by a CatalogueService message: the detail names the document limit as well. */
const catalogueTooLarge = (err: ConnectError) =>
  gatewayError({
    httpStatus: 413,
    type: 'invalid_request_error',
    code: 'request_too_large',
    rpcCode: Code.ResourceExhausted,
    message: `${err.rawMessage}; a price book document is at most ${BOOK_LIMITS.documentBytes} bytes (docs/price-book.md#limits)`,
  });

/**
 * Who may call what on the network port, decided from the request headers before a byte of
 * the body is read (Connect reads a whole message before any interceptor runs): Billing and
 * Catalogue need the admin token when one is set, and come from this machine otherwise;
 * Inference and Video need a live gateway key of the caller's own.
 */
export interface RpcAccess {
  adminToken: string | undefined;
  /** The caller of a live gateway key (KeyCheck.authenticate), or undefined. */
  authenticate: (apiKey: string | undefined) => Promise<Caller | undefined>;
}

/** The caller each keyed call was authenticated as, from its access check to its handler's context values. */
const callers = new WeakMap<http2.Http2ServerRequest, Caller>();
/** Who acts in each OrganisationService call, from its access check. */
const actors = new WeakMap<http2.Http2ServerRequest, Actor>();

/** A keyed call's context values: its authenticated caller (src/billing/caller.ts), or who acts on an organisation. */
function callerValues(req: unknown): ContextValues {
  const values = createContextValues();
  const caller = callers.get(req as http2.Http2ServerRequest);
  if (caller) values.set(CALLER, caller);
  const actor = actors.get(req as http2.Http2ServerRequest);
  if (actor) values.set(ACTOR, actor);
  return values;
}

/**
 * OrganisationService: a call with a gateway key acts as that key's member (or as a team key,
 * which may only ask who it is); a call without one is the operator's, checked as Billing's are.
 * A call that passes the operator's check and names a Telegram user (TELEGRAM_USER_HEADER: the
 * bot run apart, trusted as it is with `owner` on a KeyRef) acts as that user instead, never as
 * the operator; with a key, the header is not read.
 */
async function organisationRefusal(
  req: http2.Http2ServerRequest,
  access: RpcAccess,
): Promise<ConnectError | undefined> {
  const via: Via = header(req, 'x-gateway-via') === 'cli' ? 'cli' : 'rpc';
  const from = req.socket.remoteAddress ?? '';
  const key = keyFromHeaders(header(req, 'authorization'), header(req, 'x-api-key'));
  if (key?.startsWith('prx-') || header(req, 'x-api-key') !== undefined) {
    const caller = await access.authenticate(key);
    if (!caller) return unauthorized(newRequestId());
    actors.set(
      req,
      caller.memberId
        ? { kind: 'member', memberId: caller.memberId, via, from }
        : { kind: 'team_key', keyId: caller.keyId, accountId: caller.accountId, via, from },
    );
    return undefined;
  }
  const refused = await operatorRefusal(req, access);
  if (refused) return refused;
  const telegramUser = header(req, TELEGRAM_USER_HEADER);
  if (telegramUser === undefined) actors.set(req, { kind: 'operator', via, from });
  else if (isTelegramUser(telegramUser)) actors.set(req, { kind: 'telegram', telegramUser, via: 'bot', from: '' });
  else
    return gatewayError({
      httpStatus: 400,
      type: 'invalid_request_error',
      code: 'invalid_value',
      param: TELEGRAM_USER_HEADER,
      message: `${TELEGRAM_USER_HEADER} is "telegram:<user id>"`,
      requestId: newRequestId(),
    });
  return undefined;
}

/** Each refusal is a GatewayError with a request id of its own, as every answer of the facade has. */
async function refusal(req: http2.Http2ServerRequest, access: RpcAccess): Promise<ConnectError | undefined> {
  const service = /^\/([^/]+)\//.exec(req.url)?.[1] ?? '';
  if (service === OrganisationService.typeName) return organisationRefusal(req, access);
  if (KEYED_SERVICES.has(service)) {
    const key = keyFromHeaders(header(req, 'authorization'), header(req, 'x-api-key'));
    const caller = await access.authenticate(key);
    if (!caller) return unauthorized(newRequestId());
    callers.set(req, caller);
    return undefined;
  }
  return operatorRefusal(req, access);
}

/** The operator's services: the admin token when one is set, this machine otherwise. */
async function operatorRefusal(req: http2.Http2ServerRequest, access: RpcAccess): Promise<ConnectError | undefined> {
  if (access.adminToken) {
    return bearerMatches(header(req, 'authorization'), access.adminToken)
      ? undefined
      : adminTokenRequired(401, 'admin token required: send "authorization: Bearer <ADMIN_TOKEN>"');
  }
  // No token: the port listens on loopback (the gateway refuses to start otherwise); a caller
  // that still arrives from elsewhere (a forwarded port) is not answered.
  return isLoopbackPeer(req.socket.remoteAddress)
    ? undefined
    : adminTokenRequired(403, 'admin token required: this gateway has none set, so it answers this machine only');
}

const adminTokenRequired = (httpStatus: 401 | 403, message: string) =>
  gatewayError({
    httpStatus,
    type: 'invalid_request_error',
    code: 'admin_token_required',
    message,
    requestId: newRequestId(),
  });

/** No such method: the facade's unknown_route, with the status gRPC gives an unknown method. */
const unknownMethod = (req: http2.Http2ServerRequest) =>
  notFound(
    'unknown_route',
    `Unknown RPC: ${methodPath(req)}. proto/gateway/v1/ defines the services and their methods.`,
    { requestId: newRequestId(), rpcCode: Code.Unimplemented },
  );

/** The path a call names, as far as it is worth repeating (it is the caller's text). */
const methodPath = (req: http2.Http2ServerRequest): string => req.url.split('?')[0]!.slice(0, 200);

const header = (req: http2.Http2ServerRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
};

/**
 * Answers with `err` in the caller's protocol (gRPC, gRPC-Web or Connect) without reading the
 * request body: what the caller sends meanwhile stops at the stream's flow-control window, and
 * gRPC and Connect clients cancel the call once they have the error. Connect's own encoders
 * write the status and the error's details (the GatewayError) in each protocol.
 */
function refuse(
  req: http2.Http2ServerRequest,
  res: http2.Http2ServerResponse,
  err: ConnectError,
  opts: Pick<RpcServerOptions, 'log' | 'traceCallerContext'>,
): void {
  const detail = err.findDetails(GatewayErrorSchema)[0];
  const ids = traceRefusal(methodPath(req), req.headers, err, opts.traceCallerContext ?? 'link');
  opts.log?.info(
    { requestId: detail?.requestId, rpc: methodPath(req), status: codeToString(err.code), code: detail?.code, ...ids },
    'RPC refused',
  );
  const type = (header(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type.startsWith('application/grpc')) {
    // gRPC and gRPC-Web: a trailers-only answer, the status (grpc-status, grpc-message and
    // grpc-status-details-bin) in one HEADERS frame that ends the stream.
    const status = Object.fromEntries(setTrailerStatus(new Headers(), err));
    req.stream.respond({ ':status': 200, 'content-type': type, ...status }, { endStream: true });
    return;
  }
  if (type.startsWith('application/connect+')) {
    // Connect streaming: one end-of-stream message carrying the error.
    const json = Buffer.from(JSON.stringify(endStreamToJson(new Headers(), err, undefined)));
    const prefix = Buffer.alloc(5);
    prefix.writeUInt8(endStreamFlag, 0);
    prefix.writeUInt32BE(json.length, 1);
    res.writeHead(200, { 'content-type': type });
    res.end(Buffer.concat([prefix, json]));
  } else {
    // Connect unary (and anything else): the HTTP status of the code and a JSON error.
    res.writeHead(codeToHttpStatus(err.code), { 'content-type': 'application/json' });
    res.end(Buffer.from(errorToJsonBytes(err, undefined)));
  }
}

export interface RpcServerOptions extends RpcAccess {
  host: string;
  port: number;
  /** Largest request message; Connect's default (4 GiB) would let any caller fill memory. */
  readMaxBytes: number;
  log?: Logger;
  /** What a keyed caller's traceparent does (TRACE_CALLER_CONTEXT). */
  traceCallerContext?: 'link' | 'continue' | 'ignore';
  /** A sampled call's response metadata carries `traceresponse` (TRACE_RESPONSE_HEADER). */
  traceResponseHeader?: boolean;
}

export function startRpcServer(s: Services, opts: RpcServerOptions): Promise<http2.Http2Server> {
  const handler = connectNodeAdapter({
    routes: routes(s, opts.readMaxBytes),
    // The span first, so it sees the call's final error (nothing while tracing is off).
    interceptors: [
      ...(tracingOn() ? [rpcTracing(opts.traceCallerContext ?? 'link', opts.traceResponseHeader)] : []),
      gatewayErrorDetails(opts.log),
    ],
    requestGate: callRequestIds(opts.log),
    contextValues: callerValues,
    // A path no service serves (this server speaks HTTP/2 only, hence the casts).
    fallback: (req, res) =>
      refuse(
        req as http2.Http2ServerRequest,
        res as http2.Http2ServerResponse,
        unknownMethod(req as http2.Http2ServerRequest),
        opts,
      ),
    readMaxBytes: opts.readMaxBytes,
  });
  const server = http2.createServer(
    {
      // Bounds what one connection can make the server hold: streams at once (each with its
      // flow-control window of unread body) and the session's own buffers.
      settings: { maxConcurrentStreams: 128, maxHeaderListSize: 32 * 1024 },
      maxSessionMemory: 16,
    },
    (req, res) => {
      refusal(req, opts).then(
        (err) => (err ? refuse(req, res, err, opts) : handler(req, res)),
        (err: unknown) => {
          const requestId = newRequestId();
          opts.log?.error({ err, requestId }, 'RPC access check failed');
          const failed = unavailable(
            'access_check_failed',
            "The gateway could not check this call's credentials; retry it.",
            { retryAfterSeconds: 1, requestId },
          );
          refuse(req, res, failed, opts);
        },
      );
    },
  );
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve(server));
  });
}
