// The services, served two ways from one router definition: over the network (Connect, gRPC
// and gRPC-Web on one HTTP/2 port) and in-process for the HTTP facade (no network hop).
import http2 from 'node:http2';
import type { ServiceImpl, Interceptor, ConnectRouter } from '@connectrpc/connect';
import { Code, ConnectError } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { VideoService } from '../gen/gateway/v1/video_pb.js';
import type { Logger } from 'pino';
import { endStreamFlag, endStreamToJson, errorToJsonBytes, codeToHttpStatus } from '@connectrpc/connect/protocol-connect';
import { directTransport } from './direct-transport.ts';
import { keyFromHeaders } from '../billing/keys.ts';
import { bearerMatches } from '../config/bearer.ts';
import { isLoopbackPeer } from '../config/exposure.ts';
import { UNAUTHORIZED_MESSAGE, unexpectedFailure } from './errors.ts';

export interface Services {
  billing: ServiceImpl<typeof BillingService>;
  catalogue: ServiceImpl<typeof CatalogueService>;
  inference: ServiceImpl<typeof InferenceService>;
  video: ServiceImpl<typeof VideoService>;
}

export function routes(s: Services) {
  return (router: ConnectRouter) => {
    router.service(BillingService, s.billing);
    router.service(CatalogueService, s.catalogue);
    router.service(InferenceService, s.inference);
    router.service(VideoService, s.video);
  };
}

/** What the facade and the bot use in one process: the services called directly (see direct-transport.ts). */
export function inProcessTransport(s: Services, log?: Logger) {
  return directTransport(s, log);
}

/**
 * A service that throws something other than a ConnectError (a database outage, a bug) answers
 * a bare "internal error"; the cause is logged here, where it is still known.
 */
export function logInternalErrors(log: Logger): Interceptor {
  return (next) => async (req) => {
    const report = (err: unknown) => {
      if (err instanceof ConnectError) return;
      const requestId = (req as { message?: { requestId?: string } }).message?.requestId;
      log.error({ err, rpc: `${req.service.typeName}/${req.method.name}`, requestId }, 'RPC failed inside the gateway');
    };
    try {
      const res = await next(req);
      if (!res.stream) return res;
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* messages;
          } catch (err) {
            report(err);
            throw unexpectedFailure(err);
          }
        })(),
      };
    } catch (err) {
      report(err);
      throw unexpectedFailure(err);
    }
  };
}

/**
 * Who may call what on the network port, decided from the request headers before a byte of
 * the body is read (Connect reads a whole message before any interceptor runs): Billing and
 * Catalogue need the admin token when one is set, and come from this machine otherwise;
 * Inference and Video need a live gateway key of the caller's own.
 */
export interface RpcAccess {
  adminToken: string | undefined;
  keyIsLive: (apiKey: string | undefined) => Promise<boolean>;
}

const KEYED_SERVICES = new Set([InferenceService.typeName, VideoService.typeName]);

async function refusal(req: http2.Http2ServerRequest, access: RpcAccess): Promise<ConnectError | undefined> {
  const service = /^\/([^/]+)\//.exec(req.url)?.[1] ?? '';
  if (KEYED_SERVICES.has(service)) {
    const key = keyFromHeaders(header(req, 'authorization'), header(req, 'x-api-key'));
    return (await access.keyIsLive(key)) ? undefined : new ConnectError(UNAUTHORIZED_MESSAGE, Code.Unauthenticated);
  }
  if (access.adminToken) {
    return bearerMatches(header(req, 'authorization'), access.adminToken) ? undefined : new ConnectError('admin token required: send "authorization: Bearer <ADMIN_TOKEN>"', Code.Unauthenticated);
  }
  // No token: the port listens on loopback (the gateway refuses to start otherwise); a caller
  // that still arrives from elsewhere (a forwarded port) is not answered.
  return isLoopbackPeer(req.socket.remoteAddress) ? undefined : new ConnectError('admin token required: this gateway has none set, so it answers this machine only', Code.PermissionDenied);
}

const header = (req: http2.Http2ServerRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
};

/**
 * Answers with `err` in the caller's protocol (gRPC, gRPC-Web or Connect) without reading the
 * request body: what the caller sends meanwhile stops at the stream's flow-control window, and
 * gRPC and Connect clients cancel the call once they have the error.
 */
function refuse(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, err: ConnectError): void {
  const type = (header(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type.startsWith('application/grpc')) {
    // gRPC and gRPC-Web: a trailers-only answer, the status in one HEADERS frame that ends the stream.
    req.stream.respond({ ':status': 200, 'content-type': type, 'grpc-status': String(err.code), 'grpc-message': encodeURIComponent(err.rawMessage) }, { endStream: true });
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
}

export function startRpcServer(s: Services, opts: RpcServerOptions): Promise<http2.Http2Server> {
  const handler = connectNodeAdapter({ routes: routes(s), interceptors: opts.log ? [logInternalErrors(opts.log)] : [], readMaxBytes: opts.readMaxBytes });
  const server = http2.createServer(
    {
      // Bounds what one connection can make the server hold: streams at once (each with its
      // flow-control window of unread body) and the session's own buffers.
      settings: { maxConcurrentStreams: 128, maxHeaderListSize: 32 * 1024 },
      maxSessionMemory: 16,
    },
    (req, res) => {
      refusal(req, opts).then(
        (err) => (err ? refuse(req, res, err) : handler(req, res)),
        (err: unknown) => {
          opts.log?.error({ err }, 'RPC access check failed');
          refuse(req, res, new ConnectError('access check failed', Code.Unavailable));
        },
      );
    },
  );
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve(server));
  });
}
