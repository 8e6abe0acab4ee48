// InferenceService: the RPC face of the chat pipeline. The caller's key comes from the call's
// metadata (authorization: Bearer … or x-api-key), exactly as on the HTTP routes.
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { keyFromHeaders } from '../billing/keys.ts';
import type { ChatService } from './chat.ts';
import { newRequestId, type ChargeInfo } from './engine.ts';

const encoder = new TextEncoder();

function chargeMessage(c: ChargeInfo) {
  return {
    requestId: c.requestId,
    costNano: c.costNano,
    usage: { inputTokens: c.usage.inputTokens, outputTokens: c.usage.outputTokens, cachedTokens: c.usage.cachedTokens, cacheWriteTokens: c.usage.cacheWriteTokens, estimated: c.usage.estimated },
  };
}

const callerKey = (ctx: HandlerContext) => keyFromHeaders(ctx.requestHeader.get('authorization'), ctx.requestHeader.get('x-api-key'));

export function inferenceService(chat: ChatService): ServiceImpl<typeof InferenceService> {
  return {
    async chatCompletion(req, ctx) {
      const r = await chat.complete(callerKey(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    async *streamChatCompletion(req, ctx) {
      for await (const ev of chat.stream(callerKey(ctx), req.body, req.requestId || newRequestId(), ctx.signal)) {
        switch (ev.kind) {
          case 'request_id': yield { event: { case: 'requestId', value: ev.requestId } }; break;
          case 'data': yield { event: { case: 'data', value: encoder.encode(ev.json) } }; break;
          case 'error': yield { event: { case: 'error', value: encoder.encode(ev.json) } }; break;
          case 'charge': yield { event: { case: 'charge', value: chargeMessage(ev.charge) } }; break;
        }
      }
    },
  };
}
