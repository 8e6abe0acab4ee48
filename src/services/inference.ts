// InferenceService: the RPC face of the inference routes. Its caller was authenticated at the
// edge (the facade's onRequest hook, or the RPC port before it read the message) and arrives as
// the call's context value (src/billing/caller.ts); the key itself is not read again here.
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { callerOf, requestCallerOf, type Caller } from '../billing/caller.ts';
import type { ChatRoute } from '../inference/routes/chat.ts';
import type { MessagesRoute } from '../inference/routes/messages.ts';
import type { ResponsesRoute } from '../inference/routes/responses.ts';
import type { EmbeddingsRoute } from '../inference/routes/embeddings.ts';
import type { ImagesRoute } from '../inference/routes/images.ts';
import type { AudioRoute } from '../inference/routes/audio.ts';
import { newRequestId } from '../billing/ids.ts';
import type { ChargeInfo } from '../metering/plan.ts';
import type { StreamEvent } from '../inference/streams/stream-types.ts';
import { scrub } from '../secrets/scrub.ts';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { KeyBudgetFigures } from '../budgets/key-budgets.ts';
import { periodColumns } from '../budgets/budget.ts';

const encoder = new TextEncoder();

function chargeMessage(c: ChargeInfo) {
  return {
    requestId: c.requestId,
    costNano: c.costNano,
    deployment: c.deployment ?? '',
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
        yield { event: { case: 'requestId' as const, value: ev.requestId }, deployment: ev.deployment ?? '' };
        break;
      case 'data':
        yield { event: { case: 'data' as const, value: { event: ev.event ?? '', data: encoder.encode(ev.json) } } };
        break;
      case 'error':
        // A stream's error leaves here for either transport: scrubbed (as where it was read) for the last time.
        yield {
          event: { case: 'error' as const, value: { event: ev.event ?? '', data: encoder.encode(scrub(ev.json)) } },
        };
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
  /** The budgets over a caller's requests now (src/budgets/key-budgets.ts); none where budgets are off. */
  keyBudgets?: (caller: Caller) => Promise<KeyBudgetFigures[]>;
}

const timestamp = (d: Date) => timestampFromMs(d.getTime());

/** A budget over the caller as ListKeyBudgets answers it. */
function keyBudgetMessage(b: KeyBudgetFigures) {
  const p = periodColumns(b.period);
  return {
    budgetId: b.id,
    scope: b.scope,
    scopeId: b.scopeId,
    name: b.name,
    mode: b.mode,
    period: p.period,
    timeZone: p.timeZone,
    startDay: p.startDay,
    rollingHours: p.rollingHours,
    customer: b.customer,
    amountNano: b.amountNano,
    spentNano: b.spentNano,
    heldNano: b.heldNano,
    remainingNano: b.remainingNano,
    windowStart: timestamp(b.windowStart),
    ...(b.windowEnd ? { windowEnd: timestamp(b.windowEnd) } : {}),
  };
}

/** A unary route as an RPC: the caller the edge authenticated and a request id in; the answer, its charge as a message, out. */
async function unary<R extends { charge: ChargeInfo }>(
  ctx: HandlerContext,
  requestId: string,
  run: (caller: Caller, requestId: string) => Promise<R>,
) {
  const r = await run(requestCallerOf(ctx), requestId || newRequestId());
  return { ...r, charge: chargeMessage(r.charge) };
}

/** A streamed route as an RPC: its events as the stream's messages. */
function streamed(
  ctx: HandlerContext,
  requestId: string,
  run: (caller: Caller, requestId: string) => AsyncGenerator<StreamEvent>,
) {
  return events(run(requestCallerOf(ctx), requestId || newRequestId()));
}

export function inferenceService({
  chat,
  messages,
  responses,
  embeddings,
  images,
  audio,
  keyBudgets,
}: InferenceRoutes): ServiceImpl<typeof InferenceService> {
  return {
    async listKeyBudgets(_req, ctx) {
      const budgets = keyBudgets ? await keyBudgets(requestCallerOf(ctx)) : [];
      return { budgets: budgets.map(keyBudgetMessage) };
    },
    // The edge has answered 401 already for a key that is not live: a call that gets here is authenticated.
    async authenticate(_req, ctx) {
      callerOf(ctx);
      return {};
    },
    chatCompletion: (req, ctx) => unary(ctx, req.requestId, (c, id) => chat.complete(c, req.body, id)),
    streamChatCompletion: (req, ctx) =>
      streamed(ctx, req.requestId, (c, id) => chat.stream(c, req.body, id, ctx.signal)),
    createMessage: (req, ctx) =>
      unary(ctx, req.requestId, (c, id) => messages.create(c, req.body, id, anthropicHeaders(ctx))),
    streamMessage: (req, ctx) =>
      streamed(ctx, req.requestId, (c, id) => messages.stream(c, req.body, id, anthropicHeaders(ctx), ctx.signal)),
    async countMessageTokens(req, ctx) {
      const r = await messages.countTokens(
        requestCallerOf(ctx),
        req.body,
        req.requestId || newRequestId(),
        anthropicHeaders(ctx),
      );
      return { body: r.body };
    },
    createResponse: (req, ctx) => unary(ctx, req.requestId, (c, id) => responses.create(c, req.body, id)),
    streamResponse: (req, ctx) =>
      streamed(ctx, req.requestId, (c, id) => responses.stream(c, req.body, id, ctx.signal)),
    createEmbedding: (req, ctx) => unary(ctx, req.requestId, (c, id) => embeddings.create(c, req.body, id)),
    generateImage: (req, ctx) => unary(ctx, req.requestId, (c, id) => images.generate(c, req.body, id)),
    editImage: (req, ctx) => unary(ctx, req.requestId, (c, id) => images.edit(c, req.parts, id)),
    transcribe: (req, ctx) => unary(ctx, req.requestId, (c, id) => audio.transcribe(c, req.parts, id)),
    async *createSpeech(req, ctx) {
      for await (const ev of audio.speech(
        requestCallerOf(ctx),
        req.body,
        req.requestId || newRequestId(),
        ctx.signal,
      )) {
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
