// errors.proto promises a gateway.v1.GatewayError detail on every error the RPC port answers.
// These tests read it as a caller in any language would: with @grpc/grpc-js, from the
// grpc-status-details-bin metadata (a google.rpc.Status whose Any holds the detail), and with
// Connect's own clients for gRPC-Web and Connect; refusals made before the message is read
// included.
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fromBinary } from '@bufbuild/protobuf';
import { AnySchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { GatewayErrorSchema, type GatewayError } from '../../src/gen/gateway/v1/errors_pb.js';
import { BillingService } from '../../src/gen/gateway/v1/billing_pb.js';
import { InferenceService } from '../../src/gen/gateway/v1/inference_pb.js';
import { generateKey } from '../../src/billing/keys.ts';
import { gatewayForFile } from '../support/extra-gateway.ts';
import { readStatus, sendOversizedFrame } from '../support/grpc-wire.ts';

const PROTO_DIR = path.resolve(import.meta.dirname, '..', '..', 'proto');
const def = protoLoader.loadSync(['gateway/v1/billing.proto', 'gateway/v1/inference.proto', 'gateway/v1/video.proto'], {
  includeDirs: [PROTO_DIR],
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const pkg = grpc.loadPackageDefinition(def) as unknown as {
  gateway: { v1: Record<string, grpc.ServiceClientConstructor> };
};
const rpcUrl = inject('rpcUrl');
const clients: grpc.Client[] = [];
const grpcClient = (service: string, url = rpcUrl) => {
  const c = new pkg.gateway.v1[service]!(new URL(url).host, grpc.credentials.createInsecure());
  clients.push(c);
  return c;
};
afterAll(() => clients.forEach((c) => c.close()));

type Any = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
function call(client: grpc.Client, method: string, req: Any, md = new grpc.Metadata()): Promise<Any> {
  return new Promise((resolve, reject) => {
    (client as unknown as Record<string, Function>)[method]!.call(client, req, md, (err: Error | null, res: Any) =>
      err ? reject(err) : resolve(res),
    );
  });
}
const bearer = (token: string) => {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
};

/**
 * The GatewayError in a grpc-status-details-bin value: google.rpc.Status is read field by field
 * (code = 1, message = 2, details = 3), as a runtime without its generated type would; its one
 * Any must name gateway.v1.GatewayError.
 */
function detailOf(statusBin: Uint8Array, status: { code: number; message: string }): GatewayError {
  const { code, message, details } = readStatus(statusBin);
  expect({ code, message }).toEqual(status);
  expect(details).toHaveLength(1);
  const any = fromBinary(AnySchema, details[0]!);
  expect(any.typeUrl).toBe('type.googleapis.com/gateway.v1.GatewayError');
  return fromBinary(GatewayErrorSchema, any.value);
}

/** A refused grpc-js call: its status, and the detail read from its metadata. */
async function grpcRefusal(p: Promise<unknown>): Promise<{ code: number; detail: GatewayError | undefined }> {
  const err = (await p.then(
    () => expect.unreachable('the call succeeded'),
    (e: unknown) => e,
  )) as grpc.ServiceError;
  const bin = err.metadata.get('grpc-status-details-bin')[0];
  // grpc-js decodes grpc-message with decodeURI, which leaves the %3A and %2F that Connect's encoder writes.
  return {
    code: err.code,
    detail:
      bin === undefined
        ? undefined
        : detailOf(bin as Buffer, { code: err.code, message: decodeURIComponent(err.details) }),
  };
}

/** The GatewayError a Connect client (any protocol) found on a refused call. */
async function connectRefusal(p: Promise<unknown>): Promise<{ code: Code; detail: GatewayError | undefined }> {
  const err = ConnectError.from(
    await p.then(
      () => expect.unreachable('the call succeeded'),
      (e: unknown) => e,
    ),
  );
  return { code: err.code, detail: err.findDetails(GatewayErrorSchema)[0] };
}

const withBearer = (token: string): Interceptor[] => [
  (next) => (req) => {
    req.header.set('authorization', `Bearer ${token}`);
    return next(req);
  },
];
const transports: Record<string, (baseUrl: string, interceptors: Interceptor[]) => Transport> = {
  'gRPC-Web': (baseUrl, interceptors) => createGrpcWebTransport({ baseUrl, httpVersion: '2', interceptors }),
  Connect: (baseUrl, interceptors) => createConnectTransport({ baseUrl, httpVersion: '2', interceptors }),
};

const chatBody = (stream = false) =>
  Buffer.from(
    JSON.stringify({ model: 'gpt-4o-mini', stream, messages: [{ role: 'user', content: 'hi [sim tokens=2]' }] }),
  );
const REQUEST_ID = /^req_[0-9A-Za-z]{20}$/;
const invalidKey = {
  httpStatus: 401,
  type: 'invalid_request_error',
  code: 'invalid_api_key',
  requestId: expect.stringMatching(REQUEST_ID),
};

describe('refusals on the RPC port carry the GatewayError detail', () => {
  it('a gRPC call with a missing, malformed or revoked key is UNAUTHENTICATED with invalid_api_key and a fresh request id', async () => {
    const billing = grpcClient('BillingService');
    const inference = grpcClient('InferenceService');
    const video = grpcClient('VideoService');
    const created = await call(billing, 'CreateKey', { creditsNano: '1000000000' });
    await call(billing, 'RevokeKey', { key: { keyId: created.keyId } });

    const refusals = [
      await grpcRefusal(call(inference, 'ChatCompletion', { body: chatBody() })),
      await grpcRefusal(call(inference, 'ChatCompletion', { body: chatBody() }, bearer('not-a-gateway-key'))),
      await grpcRefusal(call(inference, 'ChatCompletion', { body: chatBody() }, bearer(generateKey()))),
      await grpcRefusal(call(inference, 'ChatCompletion', { body: chatBody() }, bearer(created.apiKey))),
      await grpcRefusal(call(video, 'ListVideos', {})),
    ];
    for (const r of refusals) {
      expect(r.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(r.detail).toMatchObject({ ...invalidKey, message: expect.stringContaining('Invalid API key') });
    }
    expect(new Set(refusals.map((r) => r.detail!.requestId)).size).toBe(refusals.length);
  });

  it('gRPC-Web and Connect callers with a forged key find the same detail, unary and streamed', async () => {
    for (const [name, transport] of Object.entries(transports)) {
      const inference = createClient(InferenceService, transport(rpcUrl, withBearer(generateKey())));
      const unary = await connectRefusal(inference.chatCompletion({ body: chatBody() }));
      expect(unary, name).toMatchObject({ code: Code.Unauthenticated, detail: invalidKey });
      const streamed = await connectRefusal(
        (async () => {
          for await (const _ of inference.streamChatCompletion({ body: chatBody(true) })) {
            /* nothing arrives */
          }
        })(),
      );
      expect(streamed, name).toMatchObject({ code: Code.Unauthenticated, detail: invalidKey });
    }
  });

  it("a service's own refusal over gRPC carries the request id the caller sent, or one the gateway made", async () => {
    const billing = grpcClient('BillingService');
    const inference = grpcClient('InferenceService');
    const created = await call(billing, 'CreateKey', { creditsNano: '1000000000' });
    const badBody = Buffer.from(
      JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    );
    const named = await grpcRefusal(
      call(inference, 'ChatCompletion', { body: badBody, requestId: 'caller-chosen-id-1' }, bearer(created.apiKey)),
    );
    expect(named).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      detail: { httpStatus: 400, code: 'model_not_found', requestId: 'caller-chosen-id-1' },
    });
    const unnamed = await grpcRefusal(call(inference, 'ChatCompletion', { body: badBody }, bearer(created.apiKey)));
    expect(unnamed).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      detail: { httpStatus: 400, code: 'model_not_found', requestId: expect.stringMatching(REQUEST_ID) },
    });
  });

  it('a call to a method the port does not serve is UNIMPLEMENTED with unknown_route', async () => {
    const client = new grpc.Client(new URL(rpcUrl).host, grpc.credentials.createInsecure());
    clients.push(client);
    const bytes = (b: Buffer) => b;
    const r = await grpcRefusal(
      new Promise((resolve, reject) =>
        client.makeUnaryRequest('/gateway.v1.BillingService/NoSuchMethod', bytes, bytes, Buffer.alloc(0), (err, res) =>
          err ? reject(err) : resolve(res),
        ),
      ),
    );
    expect(r).toMatchObject({
      code: grpc.status.UNIMPLEMENTED,
      detail: { httpStatus: 404, code: 'unknown_route', requestId: expect.stringMatching(REQUEST_ID) },
    });
  });

  it('a message over the read limit is RESOURCE_EXHAUSTED with request_too_large, before the rest of it is sent', async () => {
    // A gRPC frame declaring 600 MB, of which 64 KiB are sent: Connect refuses it from the length prefix.
    const status = await sendOversizedFrame(rpcUrl, '/gateway.v1.BillingService/CreateKey');
    const code = Number(status['grpc-status']);
    expect(code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(status['grpc-status-details-bin']).toBeDefined();
    const detail = detailOf(Buffer.from(String(status['grpc-status-details-bin']), 'base64'), {
      code,
      message: decodeURIComponent(String(status['grpc-message'])),
    });
    expect(detail).toMatchObject({
      httpStatus: 413,
      type: 'invalid_request_error',
      code: 'request_too_large',
      requestId: expect.stringMatching(REQUEST_ID),
    });
  });
});

const ADMIN_TOKEN = 'rpc-refusals-admin-token-0123456789';
const guarded = gatewayForFile('rpc-refusals', { ADMIN_TOKEN });

describe('an RPC port with ADMIN_TOKEN', () => {
  it('a Billing call without the admin token, or with a wrong one, is UNAUTHENTICATED with admin_token_required, in gRPC, gRPC-Web and Connect', async () => {
    const gw = await guarded();
    const adminRefused = {
      httpStatus: 401,
      code: 'admin_token_required',
      message: expect.stringContaining('ADMIN_TOKEN'),
      requestId: expect.stringMatching(REQUEST_ID),
    };
    const billing = grpcClient('BillingService', gw.rpcUrl);
    for (const md of [new grpc.Metadata(), bearer(`${ADMIN_TOKEN}x`)]) {
      expect(await grpcRefusal(call(billing, 'ListKeys', { owner: 'telegram:1' }, md))).toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
        detail: adminRefused,
      });
    }
    for (const [name, transport] of Object.entries(transports)) {
      const client = createClient(BillingService, transport(gw.rpcUrl, withBearer('wrong')));
      expect(await connectRefusal(client.listKeys({ owner: 'telegram:1' })), name).toMatchObject({
        code: Code.Unauthenticated,
        detail: adminRefused,
      });
    }
    // With the token the same call is served.
    expect(await call(billing, 'ListKeys', { owner: 'telegram:1' }, bearer(ADMIN_TOKEN))).toMatchObject({ keys: [] });
  });
});
