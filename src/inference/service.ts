// InferenceService: the RPC face of the inference routes. The caller's key comes from the
// call's metadata (authorization: Bearer … or x-api-key), exactly as on the HTTP routes.
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { keyFromHeaders } from '../billing/keys.ts';
import type { ChatService } from './chat.ts';
import type { MessagesService } from './messages.ts';
import type { ResponsesService } from './responses.ts';
import type { EmbeddingsService } from './embeddings.ts';
import type { ImagesService } from './images.ts';
import type { AudioService } from './audio.ts';
import { newRequestId, type ChargeInfo, type StreamEvent } from './engine.ts';

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

const callerKey = (ctx: HandlerContext) => keyFromHeaders(ctx.requestHeader.get('authorization'), ctx.requestHeader.get('x-api-key'));
const anthropicHeaders = (ctx: HandlerContext) => ({ version: ctx.requestHeader.get('anthropic-version'), beta: ctx.requestHeader.get('anthropic-beta') });

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
  /** The key check every route starts with (Engine.authenticate). */
  authenticate: (apiKey: string | undefined) => Promise<unknown>;
  chat: ChatService;
  messages: MessagesService;
  responses: ResponsesService;
  embeddings: EmbeddingsService;
  images: ImagesService;
  audio: AudioService;
}

export function inferenceService({ authenticate, chat, messages, responses, embeddings, images, audio }: InferenceRoutes): ServiceImpl<typeof InferenceService> {
  return {
    async authenticate(_req, ctx) {
      await authenticate(callerKey(ctx));
      return {};
    },
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
    async createEmbedding(req, ctx) {
      const r = await embeddings.create(callerKey(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    async generateImage(req, ctx) {
      const r = await images.generate(callerKey(ctx), req.body, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    async editImage(req, ctx) {
      const r = await images.edit(callerKey(ctx), req.parts, req.requestId || newRequestId());
      return { body: r.body, charge: chargeMessage(r.charge) };
    },
    async transcribe(req, ctx) {
      const r = await audio.transcribe(callerKey(ctx), req.parts, req.requestId || newRequestId());
      return { body: r.body, contentType: r.contentType, charge: chargeMessage(r.charge) };
    },
    async *createSpeech(req, ctx) {
      for await (const ev of audio.speech(callerKey(ctx), req.body, req.requestId || newRequestId(), ctx.signal)) {
        if (ev.kind === 'start') yield { event: { case: 'start' as const, value: { requestId: ev.requestId, contentType: ev.contentType, costNano: ev.costNano } } };
        else if (ev.kind === 'audio') yield { event: { case: 'audio' as const, value: ev.data } };
        else yield { event: { case: 'charge' as const, value: chargeMessage(ev.charge) } };
      }
    },
  };
}
