// The in-process transport hands a server-streaming handler the caller's one request message,
// whether it comes as serverStream's OneMessage (read directly) or as any other async iterable
// (iterated, as Connect's own client sends it), and relays the handler's messages in order.
import { describe, expect, it } from 'vitest';
import { createClient } from '@connectrpc/connect';
import { InferenceService } from '../../../src/gen/gateway/v1/inference_pb.js';
import { directTransport } from '../../../src/rpc/direct-transport.ts';
import { serverStream } from '../../../src/rpc/server-stream.ts';
import type { Services } from '../../../src/rpc/services.ts';

function transportSeeing(seen: string[]) {
  const inference = {
    async *streamChatCompletion(req: { requestId: string; body: Uint8Array }, ctx: { requestHeader: Headers }) {
      seen.push(`${req.requestId} ${new TextDecoder().decode(req.body)} ${ctx.requestHeader.get('authorization')}`);
      yield { event: { case: 'requestId' as const, value: req.requestId } };
      yield { event: { case: 'data' as const, value: { event: '', data: new TextEncoder().encode('one') } } };
    },
  };
  return directTransport({
    billing: {},
    catalogue: {},
    inference,
    video: {},
    organisations: {},
  } as unknown as Services);
}

const read = async (it: AsyncIterator<{ event: { case?: string; value?: unknown } }>) => {
  const out: string[] = [];
  for (let r = await it.next(); !r.done; r = await it.next()) {
    const e = r.value.event;
    out.push(
      e.case === 'data'
        ? `data:${new TextDecoder().decode((e.value as { data: Uint8Array }).data)}`
        : `${e.case}:${String(e.value)}`,
    );
  }
  return out;
};

describe('in-process server streams', () => {
  it('take the request from serverStream without iterating it', async () => {
    const seen: string[] = [];
    const it = serverStream(
      transportSeeing(seen),
      InferenceService.method.streamChatCompletion,
      { body: new TextEncoder().encode('{"a":1}'), requestId: 'req_1' },
      { headers: { authorization: 'Bearer k1' } },
    );
    expect(await read(it)).toEqual(['requestId:req_1', 'data:one']);
    expect(seen).toEqual(['req_1 {"a":1} Bearer k1']);
  });

  it("take it from Connect's own client (a plain async iterable) the same way", async () => {
    const seen: string[] = [];
    const client = createClient(InferenceService, transportSeeing(seen));
    const it = client
      .streamChatCompletion(
        { body: new TextEncoder().encode('{"b":2}'), requestId: 'req_2' },
        { headers: { authorization: 'Bearer k2' } },
      )
      [Symbol.asyncIterator]();
    expect(await read(it)).toEqual(['requestId:req_2', 'data:one']);
    expect(seen).toEqual(['req_2 {"b":2} Bearer k2']);
  });
});
