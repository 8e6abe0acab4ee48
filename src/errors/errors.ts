// One error type for every failure the services report. It travels as a ConnectError with a
// GatewayError detail, so the HTTP facade can answer in the route's own shape and status and
// a gRPC caller sees the same facts.
import { clone, create, type MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { codeToHttpStatus, codeToString } from '@connectrpc/connect/protocol-connect';
import { BudgetRefusalSchema, GatewayErrorSchema, type GatewayError } from '../gen/gateway/v1/errors_pb.js';
import { connectionLost } from '../db/connection-errors.ts';
import { scrub } from '../secrets/scrub.ts';

export interface GatewayErrorInit {
  httpStatus: number;
  type: string;
  code?: string;
  param?: string;
  message: string;
  upstreamBody?: Uint8Array;
  retryAfterSeconds?: number;
  requestId?: string;
  /** The RPC status, where it is not the one httpStatus maps to (an unknown method: 404, UNIMPLEMENTED). */
  rpcCode?: Code;
  /** The budget that refused a request (402 budget_exceeded). */
  budget?: MessageInitShape<typeof BudgetRefusalSchema>;
}

function connectCode(status: number): Code {
  switch (status) {
    case 400:
      return Code.InvalidArgument;
    case 401:
      return Code.Unauthenticated;
    case 402:
      return Code.FailedPrecondition;
    case 403:
      return Code.PermissionDenied;
    case 404:
      return Code.NotFound;
    case 409:
      return Code.AlreadyExists;
    case 413:
      return Code.InvalidArgument;
    case 429:
      return Code.ResourceExhausted;
    case 501:
      return Code.Unimplemented;
    case 502:
    case 503:
      return Code.Unavailable;
    case 504:
      return Code.DeadlineExceeded;
    default:
      return status >= 500 ? Code.Internal : Code.InvalidArgument;
  }
}

export function gatewayError(init: GatewayErrorInit): ConnectError {
  const detail = create(GatewayErrorSchema, {
    httpStatus: init.httpStatus,
    type: init.type,
    code: init.code ?? '',
    param: init.param ?? '',
    message: init.message,
    upstreamBody: init.upstreamBody ?? new Uint8Array(),
    retryAfterSeconds: init.retryAfterSeconds ?? 0,
    requestId: init.requestId ?? '',
    ...(init.budget ? { budget: init.budget } : {}),
  });
  return new ConnectError(init.message, init.rpcCode ?? connectCode(init.httpStatus), undefined, [
    { desc: GatewayErrorSchema, value: detail },
  ]);
}

/**
 * `err` as it leaves the RPC port: with a GatewayError detail that has a request id. An error
 * raised without a detail (by Connect itself: a message over the read limit or not decodable, a
 * bad timeout header) gets one made from its code; a detail without a request id gets
 * `requestId`. Returns a new error when anything was added, `err` itself otherwise.
 */
export function withGatewayDetail(err: ConnectError, requestId: string): ConnectError {
  const found = err.findDetails(GatewayErrorSchema)[0];
  if (found?.requestId) return err;
  const detail = found ? clone(GatewayErrorSchema, found) : detailFromCode(err);
  detail.requestId = requestId;
  const others = err.details.filter((d) => ('desc' in d ? d.desc.typeName : d.type) !== GatewayErrorSchema.typeName);
  const filled = new ConnectError(err.rawMessage, err.code, err.metadata, undefined, err.cause);
  filled.details = [...others, { desc: GatewayErrorSchema, value: detail }];
  return filled;
}

/**
 * `err` with every credential scrubbed from its message and its detail's (src/secrets/scrub.ts):
 * what the RPC port answers, as the last line of defence for a provider's text that was scrubbed
 * where it was read. `err` itself when there was nothing to remove (the usual case).
 */
export function scrubbedError(err: ConnectError): ConnectError {
  const found = err.findDetails(GatewayErrorSchema)[0];
  const message = scrub(err.rawMessage);
  const detailMessage = found ? scrub(found.message) : '';
  if (message === err.rawMessage && (!found || detailMessage === found.message)) return err;
  const out = new ConnectError(message, err.code, err.metadata, undefined, err.cause);
  out.details = err.details.map((d) => {
    if (!found || ('desc' in d ? d.desc.typeName : d.type) !== GatewayErrorSchema.typeName) return d;
    const detail = clone(GatewayErrorSchema, found);
    detail.message = detailMessage;
    return { desc: GatewayErrorSchema, value: detail };
  });
  return out;
}

/**
 * The detail of an error raised without one: the HTTP status and code name Connect's protocol
 * gives its RPC code. The only RESOURCE_EXHAUSTED raised without a detail is Connect's read
 * limit, so it is the facade's 413 request_too_large.
 */
function detailFromCode(err: ConnectError): GatewayError {
  const tooLarge = err.code === Code.ResourceExhausted;
  const httpStatus = tooLarge ? 413 : codeToHttpStatus(err.code);
  return create(GatewayErrorSchema, {
    httpStatus,
    type: httpStatus < 500 ? 'invalid_request_error' : 'server_error',
    code: tooLarge ? 'request_too_large' : codeToString(err.code),
    message: err.rawMessage,
  });
}

/**
 * A failure a handler did not turn into a GatewayError, as the caller sees it: the database
 * connection lost under the request (and not won back by the retries) is a 503 worth retrying,
 * not a bug; an abort stays a cancellation; anything else is an internal error (500) whose
 * message says nothing of the cause (it is logged where it is caught, with `requestId`).
 */
export function unexpectedFailure(err: unknown, requestId = ''): ConnectError {
  if (err instanceof ConnectError) return err;
  if (connectionLost(err)) {
    return gatewayError({
      httpStatus: 503,
      type: 'server_error',
      code: 'database_unavailable',
      retryAfterSeconds: 1,
      message: 'The gateway lost its database connection while handling this request; retry it.',
      requestId,
    });
  }
  const aborted = ConnectError.from(err);
  if (aborted.code === Code.Canceled) return aborted;
  return gatewayError({
    httpStatus: 500,
    type: 'server_error',
    code: 'internal_error',
    message: 'internal gateway error',
    requestId,
  });
}

/** The GatewayError behind any thrown value; unknown failures become a 500. */
export function toGatewayError(err: unknown): GatewayError {
  const ce = ConnectError.from(err);
  const found = ce.findDetails(GatewayErrorSchema)[0];
  if (found) return found;
  const status = ce.code === Code.Canceled ? 499 : ce.code === Code.DeadlineExceeded ? 504 : 500;
  return create(GatewayErrorSchema, { httpStatus: status, type: 'server_error', message: 'internal gateway error' });
}

export const UNAUTHORIZED_MESSAGE =
  'Invalid API key. Pass a gateway key (prx-…) as "Authorization: Bearer <key>" or "x-api-key: <key>".';

/** One answer for missing, malformed, unknown and revoked keys, so none can be told apart. */
export const unauthorized = (requestId?: string): ConnectError =>
  gatewayError({
    httpStatus: 401,
    type: 'invalid_request_error',
    code: 'invalid_api_key',
    message: UNAUTHORIZED_MESSAGE,
    requestId,
  });

export const badRequest = (message: string, code: string, param?: string): ConnectError =>
  gatewayError({ httpStatus: 400, type: 'invalid_request_error', code, message, ...(param ? { param } : {}) });

/** What a common refusal may carry beside its code and message. */
export type ErrorExtras = Pick<GatewayErrorInit, 'requestId' | 'param' | 'retryAfterSeconds' | 'rpcCode'>;

/** 404: what the caller named is not there (or not theirs: the same answer). */
export const notFound = (code: string, message: string, extras: ErrorExtras = {}): ConnectError =>
  gatewayError({ httpStatus: 404, type: 'invalid_request_error', code, message, ...extras });

/** 409: the request clashes with one already made (a reused id, another body under one idempotency key). */
export const conflict = (code: string, message: string, extras: ErrorExtras = {}): ConnectError =>
  gatewayError({ httpStatus: 409, type: 'invalid_request_error', code, message, ...extras });

/** 503: the gateway cannot serve this now; asking again later may work. */
export const unavailable = (code: string, message: string, extras: ErrorExtras = {}): ConnectError =>
  gatewayError({ httpStatus: 503, type: 'server_error', code, message, ...extras });

/** 402: the key's available balance does not cover the request. */
export const insufficientQuota = (message: string, extras: ErrorExtras = {}): ConnectError =>
  gatewayError({ httpStatus: 402, type: 'insufficient_quota', code: 'insufficient_quota', message, ...extras });

/** 400 model_not_found for a name the catalogue does not serve; Anthropic's messages prefix the field name. */
export const unknownModel = (id: string, prefix = ''): ConnectError =>
  badRequest(
    `${prefix}${prefix ? 'the' : 'The'} model '${id}' does not exist on this gateway. GET /v1/models lists the models.`,
    'model_not_found',
    'model',
  );
