// InferenceService: the RPC face of the inference routes. The caller's key comes from the
// call's metadata (authorization: Bearer … or x-api-key), exactly as on the HTTP routes.
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { keyFromHeaders } from '../billing/keys.ts';
import type { ChatService } from './chat.ts';
import type { MessagesService } from './messages.ts';
import type { ResponsesService } from './responses.ts';
import { newRequestId, type ChargeInfo, type StreamEvent } from './engine.ts';

const encoder = new TextEncoder();

function chargeMessage(c: ChargeInfo) {
  return {
    requestId: c.requestId,
    costNano: c.costNano,
    usage: { inputTokens: c.usage.inputTokens, outputTokens: c.usage.outputTokens, cachedTokens: c.usage.cachedTokens, cacheWriteTokens: c.usage.cacheWriteTokens, estimated: c.usage.estimated },
  };
}

const callerKey = (ctx: HandlerContext) => keyFromHeaders(ctx.requestHeader.get('authorization'), ctx.requestHeader.get('x-api-key'));
const anthropicHeaders = (ctx: HandlerContext) => ({ version: ctx.requestHeader.get('anthropic-version'), beta: ctx.requestHeader.get('anthropic-beta') });

async function* events(source: AsyncGenerator<StreamEvent>) {
  for await (const ev of source) {
    switch (ev.kind) {
      case 'request_id': yield { event: { case: 'requestId' as const, value: ev.requestId } }; break;
      case 'data': yield { event: { case: 'data' as const, value: { event: ev.event ?? '', data: encoder.encode(ev.json) } } }; break;
      case 'error': yield { event: { case: 'error' as const, value: { event: ev.event ?? '', data: encoder.encode(ev.json) } } }; break;
      case 'charge': yield { event: { case: 'charge' as const, value: chargeMessage(ev.charge) } }; break;
    }
  }
}

export function inferenceService(chat: ChatService, messages: MessagesService, responses: ResponsesService): ServiceImpl<typeof InferenceService> {
  return {
    async chatCompletion(req, ctx) {
      const r = await chat.complete(callerKey(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    streamChatCompletion(req, ctx) {
      return events(chat.stream(callerKey(ctx), req.body, req.requestId || newRequestId(), ctx.signal));
    },
    async createMessage(req, ctx) {
      const r = await messages.create(callerKey(ctx), req.body, req.requestId || newRequestId(), anthropicHeaders(ctx));
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    streamMessage(req, ctx) {
      return events(messages.stream(callerKey(ctx), req.body, req.requestId || newRequestId(), anthropicHeaders(ctx), ctx.signal));
    },
    async countMessageTokens(req, ctx) {
      const r = await messages.countTokens(callerKey(ctx), req.body, req.requestId || newRequestId(), anthropicHeaders(ctx));
      return { body: r.body };
    },
    async createResponse(req, ctx) {
      const r = await responses.create(callerKey(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    streamResponse(req, ctx) {
      return events(responses.stream(callerKey(ctx), req.body, req.requestId || newRequestId(), ctx.signal));
    },
  };
}
