// InferenceService: the RPC face of the inference routes. Its caller was authenticated at the
// edge (the facade's onRequest hook, or the RPC port before it read the message) and arrives as
// the call's context value (src/billing/caller.ts); the key itself is not read again here.
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { callerOf } from '../billing/caller.ts';
import type { ChatRoute } from '../inference/chat.ts';
import type { MessagesRoute } from '../inference/messages.ts';
import type { ResponsesRoute } from '../inference/responses.ts';
import type { EmbeddingsRoute } from '../inference/embeddings.ts';
import type { ImagesRoute } from '../inference/images.ts';
import type { AudioRoute } from '../inference/audio.ts';
import { newRequestId } from '../billing/ids.ts';
import type { ChargeInfo } from '../metering/plan.ts';
import type { StreamEvent } from '../inference/stream-types.ts';

const encoder = new TextEncoder();

function chargeMessage(c: ChargeInfo) {
  return {
    requestId: c.requestId,
    costNano: c.costNano,
    usage: {
      inputTokens: c.usage.inputTokens,
      outputTokens: c.usage.outputTokens,
      cachedTokens: c.usage.cachedTokens,
      cacheWriteTokens: c.usage.cacheWriteTokens,
      estimated: c.usage.estimated,
      units: c.usage.units ?? 0n,
      unit: c.usage.unit ?? '',
    },
  };
}

const anthropicHeaders = (ctx: HandlerContext) => ({
  version: ctx.requestHeader.get('anthropic-version'),
  beta: ctx.requestHeader.get('anthropic-beta'),
});

async function* events(source: AsyncGenerator<StreamEvent>) {
  for await (const ev of source) {
    switch (ev.kind) {
      case 'request_id':
        yield { event: { case: 'requestId' as const, value: ev.requestId } };
        break;
      case 'data':
        yield { event: { case: 'data' as const, value: { event: ev.event ?? '', data: encoder.encode(ev.json) } } };
        break;
      case 'error':
        yield { event: { case: 'error' as const, value: { event: ev.event ?? '', data: encoder.encode(ev.json) } } };
        break;
      case 'charge':
        yield { event: { case: 'charge' as const, value: chargeMessage(ev.charge) } };
        break;
    }
  }
}

export interface InferenceRoutes {
  chat: ChatRoute;
  messages: MessagesRoute;
  responses: ResponsesRoute;
  embeddings: EmbeddingsRoute;
  images: ImagesRoute;
  audio: AudioRoute;
}

export function inferenceService({
  chat,
  messages,
  responses,
  embeddings,
  images,
  audio,
}: InferenceRoutes): ServiceImpl<typeof InferenceService> {
  return {
    // The edge has answered 401 already for a key that is not live: a call that gets here is authenticated.
    async authenticate(_req, ctx) {
      callerOf(ctx);
      return {};
    },
    async chatCompletion(req, ctx) {
      const r = await chat.complete(callerOf(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    streamChatCompletion(req, ctx) {
      return events(chat.stream(callerOf(ctx), req.body, req.requestId || newRequestId(), ctx.signal));
    },
    async createMessage(req, ctx) {
      const r = await messages.create(callerOf(ctx), req.body, req.requestId || newRequestId(), anthropicHeaders(ctx));
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    streamMessage(req, ctx) {
      return events(
        messages.stream(callerOf(ctx), req.body, req.requestId || newRequestId(), anthropicHeaders(ctx), ctx.signal),
      );
    },
    async countMessageTokens(req, ctx) {
      const r = await messages.countTokens(
        callerOf(ctx),
        req.body,
        req.requestId || newRequestId(),
        anthropicHeaders(ctx),
      );
      return { body: r.body };
    },
    async createResponse(req, ctx) {
      const r = await responses.create(callerOf(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    streamResponse(req, ctx) {
      return events(responses.stream(callerOf(ctx), req.body, req.requestId || newRequestId(), ctx.signal));
    },
    async createEmbedding(req, ctx) {
      const r = await embeddings.create(callerOf(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    async generateImage(req, ctx) {
      const r = await images.generate(callerOf(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    async editImage(req, ctx) {
      const r = await images.edit(callerOf(ctx), req.parts, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    async transcribe(req, ctx) {
      const r = await audio.transcribe(callerOf(ctx), req.parts, req.requestId || newRequestId());
      return { body: r.body, contentType: r.contentType, charge: chargeMessage(r.charge) };
    },
    async *createSpeech(req, ctx) {
      for await (const ev of audio.speech(callerOf(ctx), req.body, req.requestId || newRequestId(), ctx.signal)) {
        if (ev.kind === 'start')
          yield {
            event: {
              case: 'start' as const,
              value: { requestId: ev.requestId, contentType: ev.contentType, costNano: ev.costNano },
            },
          };
        else if (ev.kind === 'audio') yield { event: { case: 'audio' as const, value: ev.data } };
        else yield { event: { case: 'charge' as const, value: chargeMessage(ev.charge) } };
      }
    },
  };
}
