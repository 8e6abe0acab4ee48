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
import { directTransport } from './direct-transport.ts';

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
      return { ...res, message: (async function* () { try { yield* messages; } catch (err) { report(err); throw err; } })() };
    } catch (err) {
      report(err);
      throw err;
    }
  };
}

/**
 * When ADMIN_TOKEN is set, Billing and Catalogue calls over the network must carry it.
 * Inference and video calls authenticate with the caller's own gateway key instead.
 */
function adminGuard(token: string): Interceptor {
  return (next) => async (req) => {
    const keyed = req.service.typeName === InferenceService.typeName || req.service.typeName === VideoService.typeName;
    if (!keyed && req.header.get('authorization') !== `Bearer ${token}`) {
      throw new ConnectError('admin token required', Code.Unauthenticated);
    }
    return next(req);
  };
}

export function startRpcServer(s: Services, opts: { host: string; port: number; adminToken: string | undefined; log?: Logger }): Promise<http2.Http2Server> {
  const interceptors = [...(opts.log ? [logInternalErrors(opts.log)] : []), ...(opts.adminToken ? [adminGuard(opts.adminToken)] : [])];
  const handler = connectNodeAdapter({ routes: routes(s), interceptors });
  const server = http2.createServer(handler);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve(server));
  });
}
