// The RPC port's answer to a service failure that is not a ConnectError (a bug, an outage the
// service did not name): INTERNAL with the GatewayError detail errors.proto promises, the call's
// request id in it and in the log line beside the cause, and nothing of the cause for the caller.
// The real server on a real port, with services that fail on purpose.
import type http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { GatewayErrorSchema } from '../../../src/gen/gateway/v1/errors_pb.js';
import { InferenceService } from '../../../src/gen/gateway/v1/inference_pb.js';
import { startRpcServer } from '../../../src/rpc/server.ts';
import type { Services } from '../../../src/rpc/services.ts';

const CAUSE = 'password authentication failed for user "gateway"';
const logLines: Record<string, unknown>[] = [];
let server: http2.Http2Server;
const sessions = new Set<http2.ServerHttp2Session>();
let inference: ReturnType<typeof createClient<typeof InferenceService>>;

beforeAll(async () => {
  const services = {
    billing: {},
    catalogue: {},
    video: {},
    organisations: {},
    inference: {
      chatCompletion: async () => {
        throw new Error(CAUSE);
      },
      async *streamChatCompletion(req: { requestId: string }) {
        yield { event: { case: 'requestId' as const, value: req.requestId } };
        throw new Error(CAUSE);
      },
    },
  } as unknown as Services;
  const sink = new Writable({
    write(chunk, _enc, done) {
      logLines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  server = await startRpcServer(services, {
    host: '127.0.0.1',
    port: 0,
    readMaxBytes: 1 << 20,
    adminToken: undefined,
    authenticate: async () => ({
      keyHash: Buffer.alloc(32),
      keyId: 'key_test',
      accountId: 'acct_test',
      group: '',
      prefix: 'prx-test',
      memberId: 'mem_test',
      teamId: '',
    }),
    log: pino(sink),
  });
  server.on('session', (session) => sessions.add(session));
  inference = createClient(
    InferenceService,
    createGrpcTransport({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
  );
});
afterAll(async () => {
  // The client keeps its HTTP/2 session open; close waits for sessions to end.
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const session of sessions) session.destroy();
  await closed;
});

const failureOf = async (p: Promise<unknown>) =>
  ConnectError.from(
    await p.then(
      () => expect.unreachable('the call succeeded'),
      (e: unknown) => e,
    ),
  );
const loggedFailure = (requestId: string) =>
  logLines.find((l) => l.msg === 'RPC failed inside the gateway' && l.requestId === requestId);
const body = new TextEncoder().encode('{}');

describe('a service failure that is not a ConnectError, on the RPC port', () => {
  it('answers INTERNAL with an internal_error detail whose request id is the one logged with the cause', async () => {
    const err = await failureOf(inference.chatCompletion({ body }));
    expect(err.code).toBe(Code.Internal);
    expect(err.rawMessage).not.toContain('password');
    const detail = err.findDetails(GatewayErrorSchema)[0];
    expect(detail).toMatchObject({
      httpStatus: 500,
      type: 'server_error',
      code: 'internal_error',
      requestId: expect.stringMatching(/^req_/),
    });
    expect(loggedFailure(detail!.requestId)).toMatchObject({
      rpc: 'gateway.v1.InferenceService/ChatCompletion',
      err: { message: CAUSE },
    });
  });

  it('mid-stream, carries the request id the caller sent, the one the stream announced', async () => {
    const seen: string[] = [];
    const err = await failureOf(
      (async () => {
        for await (const ev of inference.streamChatCompletion({ body, requestId: 'caller-chosen-id-2' }))
          seen.push(String(ev.event.value));
      })(),
    );
    expect(seen).toEqual(['caller-chosen-id-2']);
    expect(err.code).toBe(Code.Internal);
    expect(err.findDetails(GatewayErrorSchema)[0]).toMatchObject({
      code: 'internal_error',
      requestId: 'caller-chosen-id-2',
    });
    expect(loggedFailure('caller-chosen-id-2')).toBeDefined();
  });

  it('a stream without a request id is given one: the one it announces is the one its failure carries', async () => {
    const seen: string[] = [];
    const err = await failureOf(
      (async () => {
        for await (const ev of inference.streamChatCompletion({ body })) seen.push(String(ev.event.value));
      })(),
    );
    expect(seen).toEqual([expect.stringMatching(/^req_/)]);
    expect(err.findDetails(GatewayErrorSchema)[0]?.requestId).toBe(seen[0]);
  });
});

describe('an error Connect raises itself, on the RPC port', () => {
  it('a message over the read limit is RESOURCE_EXHAUSTED with request_too_large, its request id in the "RPC refused" log line', async () => {
    const err = await failureOf(inference.chatCompletion({ body: new Uint8Array(2 << 20) }));
    expect(err.code).toBe(Code.ResourceExhausted);
    const detail = err.findDetails(GatewayErrorSchema)[0];
    expect(detail).toMatchObject({
      httpStatus: 413,
      code: 'request_too_large',
      requestId: expect.stringMatching(/^req_/),
    });
    expect(logLines.find((l) => l.msg === 'RPC refused' && l.requestId === detail!.requestId)).toMatchObject({
      rpc: 'gateway.v1.InferenceService/ChatCompletion',
      status: 'resource_exhausted',
    });
  });
});
