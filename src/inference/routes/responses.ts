// POST /v1/responses. Passthrough models (catalogue flag) go to the provider's own Responses
// API untouched (but for a lowered cap and a cap on web search calls); chat-only models are
// rewritten to chat completions and the reply rebuilt in the Responses shape
// (translate/responses-chat.ts), streamed too. What changes the bill is priced, held for or
// refused by bill-policy.ts: state kept by the provider is held at the full context window,
// background responses are refused. A stored response belongs to the account that created it
// (src/tenancy/response-owners.ts): its ids are recorded before the caller sees them, and only
// that account may name them again.
import { modelNotAvailable, type ResolvedModel } from '../../catalogue/catalogue.ts';
import type { Caller } from '../../billing/caller.ts';
import { usageFromOpenAI, usageFromOpenAIResponses, type TokenUsage } from '../../billing/pricing.ts';
import { randomBase62 } from '../../billing/keys.ts';
import { badRequest, gatewayError, unknownModel } from '../../errors/errors.ts';
import {
  countInputTokens,
  countResponsesInput,
  countedUsage,
  inputTokensUpperBound,
  responsesInputUpperBound,
} from '../tokens.ts';
import { capFieldsOf, CHAT_COMPLETIONS, RESPONSES } from '../providers/openai-compatible.ts';
import type { Endpoint } from '../providers/target.ts';
import { outputTextOfReply, deltaText } from './chat.ts';
import type { ChargeInfo, Json, Plan } from '../../metering/plan.ts';
import {
  asIs,
  type OutEvent,
  type StepResult,
  type StreamEvent,
  type StreamProcessor,
} from '../streams/stream-types.ts';
import { chatPolicy, responsesPolicy } from '../../metering/bill-policy.ts';
import { errorMessage, readJson, readUpstreamError } from '../upstream/replies.ts';
import { replyNamingModel } from '../upstream/reply-text.ts';
import { parseBody } from '../request-body.ts';
import { BodyRewrite, preparePriced, refuseIfRefused } from '../../metering/priced-request.ts';
import type { RouteDeps } from '../deps.ts';
import type { SseEvent } from '../streams/sse.ts';
import { storedIds, storedRefs, unknownStoredRef, type ResponseOwners } from '../../tenancy/response-owners.ts';
import {
  builtinToolTypes,
  chatResponseToResponses,
  ChatToResponsesStream,
  responsesRequestToChat,
  TranslationError,
} from '../translate/responses-chat.ts';

export const RESPONSES_ROUTE = '/v1/responses';
const encoder = new TextEncoder();

interface Prepared {
  plan: Plan;
  endpoint: Endpoint;
  upstreamBody: string | Uint8Array;
  passthrough: boolean;
  /** The provider stores the response (passthrough, store not false): its ids are recorded as the caller's account's. */
  stores: boolean;
}

/** POST /v1/responses, unary and streamed. */
export class ResponsesRoute {
  private readonly deps: RouteDeps;
  private readonly owners: ResponseOwners;

  constructor(deps: RouteDeps, owners: ResponseOwners) {
    this.deps = deps;
    this.owners = owners;
  }

  /** Records a stored response's ids as its creator's, before the caller can learn them (src/tenancy/response-owners.ts). */
  private async recordStored(plan: Plan, response: Json): Promise<void> {
    if (response.store === false) return;
    await this.owners
      .record(plan.caller.accountId, storedIds(response))
      .catch((err) =>
        this.deps.log.error(
          { err, requestId: plan.requestId },
          'recording a stored response failed; its owner cannot continue it through the gateway',
        ),
      );
  }

  async create(caller: Caller, raw: Uint8Array, requestId: string): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const p = await this.prepare(caller, raw, requestId, false);
    return this.deps.metering.run(p.plan, () => this.answer(p));
  }

  private async answer(p: Prepared): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const { metering, calls } = this.deps;
    const res = await calls.post(p.plan, p.endpoint, p.upstreamBody);
    if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, p.plan.requestId);
    const reply = await readJson(res, p.plan.requestId);
    const { json } = reply;
    const model = p.plan.model.id;

    if (p.passthrough) {
      const usage =
        json.usage && typeof json.usage === 'object'
          ? { ...usageFromOpenAIResponses(json.usage as Json, json), estimated: false }
          : { ...countedUsage(p.plan, outputTextOfResponse(json)), estimated: true };
      const charge = await metering.settle(p.plan, usage, 'ok', 200);
      if (p.stores) await this.recordStored(p.plan, json);
      return { body: replyNamingModel(reply, model), charge };
    }

    const usage =
      json.usage && typeof json.usage === 'object'
        ? { ...usageFromOpenAI(json.usage as Json, json.service_tier), estimated: false }
        : { ...countedUsage(p.plan, outputTextOfReply(json)), estimated: true };
    const charge = await metering.settle(p.plan, usage, 'ok', 200);
    const rebuilt = chatResponseToResponses(usage.estimated ? { ...json, usage: chatUsage(usage) } : json, {
      model,
      request: p.plan.body,
      responseId: `resp_${randomBase62(24)}`,
      createdAt: Math.floor(Date.now() / 1000),
    });
    return { body: encoder.encode(JSON.stringify(rebuilt)), charge };
  }

  async *stream(caller: Caller, raw: Uint8Array, requestId: string, signal: AbortSignal): AsyncGenerator<StreamEvent> {
    const p = await this.prepare(caller, raw, requestId, true);
    const native = p.passthrough
      ? new ResponsesEventProcessor(p.plan.model.id, p.stores ? (r) => this.recordStored(p.plan, r) : undefined)
      : undefined;
    const processor: StreamProcessor =
      native ??
      new ChatToResponsesProcessor(
        new ChatToResponsesStream({
          model: p.plan.model.id,
          request: p.plan.body,
          responseId: `resp_${randomBase62(24)}`,
          createdAt: Math.floor(Date.now() / 1000),
        }),
      );
    const events = this.deps.streams.start(p.plan, {
      send: (s, gone) => this.deps.calls.post(p.plan, p.endpoint, p.upstreamBody, s, gone),
      processor,
      countUsage: (d) => countedUsage(p.plan, d),
      brokenStreamEvent: (message) => ({
        event: 'error',
        json: JSON.stringify({ type: 'error', code: 'upstream_stream_broken', message, param: null }),
      }),
      signal,
    });
    if (!native?.records) return yield* events;
    // An event that carries ids of a stored response goes out once they are recorded as the
    // caller's: a follow-up sent as soon as response.created arrives may name the response.
    for await (const ev of events) {
      const recording = ev.kind === 'data' && ev.event ? native.recording(ev.event) : undefined;
      if (recording) await recording;
      yield ev;
    }
  }

  private async prepare(caller: Caller, raw: Uint8Array, requestId: string, streamRoute: boolean): Promise<Prepared> {
    const startedAt = performance.now();
    const body = parseBody(raw);
    checkResponsesBody(body, streamRoute);
    const model = this.responsesModel(body.model as string);
    const maxOutput = BigInt((body.max_output_tokens as number | undefined) ?? model.maxOutputTokens);
    const request = { caller, raw, requestId, startedAt, body, model, maxOutput };
    return model.responsesPassthrough ? this.preparePassthrough(request) : this.prepareViaChat(request, streamRoute);
  }

  /** A model with its provider's own Responses API: the caller's body, held under the Responses rules. */
  private async preparePassthrough(r: ResponsesRequest): Promise<Prepared> {
    const { caller, body, model } = r;
    const policy = responsesPolicy(body, model, this.deps.sharedProviderObjects);
    refuseIfRefused(policy);
    // Stored responses and their items are their creator's account's alone: others get the provider's not-found.
    const refs = storedRefs(body);
    const notFound = refs && (await unknownStoredRef(this.owners, caller.keyHash, refs, body));
    if (notFound) throw notFound;
    const plan: Plan = {
      requestId: r.requestId,
      route: RESPONSES_ROUTE,
      caller,
      model,
      prices: policy.worst.prices,
      worst: policy.worst,
      body,
      maxOutput: r.maxOutput,
      choices: 1n,
      startedAt: r.startedAt,
      inputUpper: BigInt(responsesInputUpperBound(body, model)),
      countInput: () => BigInt(countResponsesInput(body, model)),
    };
    const upstream = new BodyRewrite(body, r.raw);
    await preparePriced(this.deps.metering, { plan, policy, upstream, capFields: ['max_output_tokens'] });
    return {
      plan,
      endpoint: RESPONSES,
      upstreamBody: upstream.bytes(),
      passthrough: true,
      stores: body.store !== false,
    };
  }

  /** A chat-only model: only what chat completions can express, translated there and back. */
  private async prepareViaChat(r: ResponsesRequest, streamRoute: boolean): Promise<Prepared> {
    const { caller, requestId, startedAt, body, model, maxOutput } = r;
    if (body.previous_response_id != null) {
      throw badRequest(
        `previous_response_id cannot be used with ${model.id}: it is answered through chat completions, so its response ids are the gateway's own and nothing is stored to continue. Send the earlier turns in input.`,
        'unsupported_parameter',
        'previous_response_id',
      );
    }
    if (body.background === true) {
      throw badRequest(
        `background responses are not served for ${model.id}: it is answered through chat completions, in this request.`,
        'unsupported_parameter',
        'background',
      );
    }
    const builtins = builtinToolTypes(body);
    if (builtins.length > 0) {
      const passthroughs = this.deps.catalogue
        .list()
        .filter((m) => m.responsesPassthrough && m.available)
        .map((m) => m.id);
      throw gatewayError({
        httpStatus: 400,
        type: 'invalid_request_error',
        code: 'unsupported_responses_tools',
        param: 'tools',
        message: `The model '${model.id}' is served on /v1/responses through chat completions, which cannot run built-in tools (${builtins.join(', ')}). Use a passthrough model for them: ${passthroughs.join(', ')}.`,
      });
    }
    let chat: Json;
    try {
      chat = responsesRequestToChat(body, { upstreamModel: model.upstreamId });
    } catch (err) {
      if (err instanceof TranslationError)
        throw gatewayError({
          httpStatus: 400,
          type: 'invalid_request_error',
          code: err.code,
          param: err.param ?? undefined,
          message: err.message,
        });
      throw err;
    }
    const policy = chatPolicy(chat, model, this.deps.sharedProviderObjects);
    const plan: Plan = {
      requestId,
      route: RESPONSES_ROUTE,
      caller,
      model,
      prices: policy.worst.prices,
      worst: policy.worst,
      body,
      maxOutput,
      choices: 1n,
      startedAt,
      inputUpper: BigInt(inputTokensUpperBound(chat, model)),
      countInput: () => BigInt(countInputTokens(chat, model)),
    };
    const upstream = new BodyRewrite(chat);
    const capField = capFieldsOf(model).maxTokensField;
    const held = await preparePriced(this.deps.metering, { plan, policy, upstream, capFields: [capField] });
    // A lowered cap goes in the one field the provider reads.
    if (held.loweredOutputCap !== undefined)
      for (const f of ['max_completion_tokens', 'max_tokens']) if (f !== capField) upstream.delete(f);
    if (streamRoute)
      upstream.set('stream_options', { ...((chat.stream_options as Json | undefined) ?? {}), include_usage: true });
    return {
      plan,
      endpoint: CHAT_COMPLETIONS,
      upstreamBody: upstream.bytes(),
      passthrough: false,
      stores: false,
    };
  }

  private responsesModel(id: string): ResolvedModel {
    const model = this.deps.catalogue.get(id);
    if (!model) throw unknownModel(id);
    if (model.kind !== 'chat')
      throw badRequest(
        `The model '${model.id}' is a ${model.kind} model; it cannot be used on ${RESPONSES_ROUTE}.`,
        'model_not_supported',
        'model',
      );
    if (model.dialect === 'anthropic')
      throw badRequest(
        `Claude models are served on /v1/messages (and /v1/chat/completions), not on ${RESPONSES_ROUTE}.`,
        'model_not_supported',
        'model',
      );
    if (!model.available) throw modelNotAvailable(model);
    return model;
  }
}

/** A Responses request as the route has read it, before its plan. */
interface ResponsesRequest {
  caller: Caller;
  raw: Uint8Array;
  requestId: string;
  startedAt: number;
  body: Json;
  model: ResolvedModel;
  maxOutput: bigint;
}

/** The Responses body's own rules, before its model is looked up: 400 naming the field. */
function checkResponsesBody(body: Json, streamRoute: boolean): void {
  if (typeof body.model !== 'string' || body.model === '')
    throw badRequest("Missing required parameter: 'model'.", 'missing_required_parameter', 'model');
  if (typeof body.input !== 'string' && !Array.isArray(body.input))
    throw badRequest("Missing required parameter: 'input'.", 'missing_required_parameter', 'input');
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean')
    throw badRequest("'stream' must be a boolean.", 'invalid_type', 'stream');
  if (Boolean(body.stream) !== streamRoute)
    throw badRequest(
      streamRoute ? 'StreamResponse needs "stream": true.' : 'Use StreamResponse for "stream": true.',
      'invalid_value',
      'stream',
    );
  const cap = body.max_output_tokens;
  if (cap !== undefined && cap !== null && !(Number.isSafeInteger(cap) && (cap as number) >= 1))
    throw badRequest("'max_output_tokens' must be a positive integer.", 'invalid_value', 'max_output_tokens');
}

function chatUsage(u: TokenUsage) {
  return {
    prompt_tokens: Number(u.inputTokens),
    completion_tokens: Number(u.outputTokens),
    total_tokens: Number(u.inputTokens + u.outputTokens),
    prompt_tokens_details: { cached_tokens: Number(u.cachedTokens) },
  };
}

function outputTextOfResponse(r: Json): string {
  let s = '';
  for (const item of (Array.isArray(r.output) ? r.output : []) as Json[]) {
    if (typeof item.arguments === 'string') s += item.arguments;
    if (typeof item.input === 'string') s += item.input;
    for (const part of (Array.isArray(item.content) ? item.content : []) as Json[])
      if (typeof part.text === 'string') s += part.text;
  }
  return s;
}

const TERMINAL = new Set(['response.completed', 'response.incomplete']);
const DELTAS = new Set([
  'response.output_text.delta',
  'response.function_call_arguments.delta',
  'response.custom_tool_call_input.delta',
  'response.reasoning_summary_text.delta',
  'response.refusal.delta',
]);

/**
 * Native Responses SSE events, passed on; usage and the charge ride on the terminal event.
 * With `record`, the ids of a stored response are recorded as read (the response's own at
 * response.created, its output items' at the end); `recording` says what an event waits for.
 */
class ResponsesEventProcessor implements StreamProcessor {
  private readonly model: string;
  private readonly record: ((response: Json) => Promise<void>) | undefined;
  private readonly pending = new Map<string, Promise<void>>();
  private delivered = '';

  constructor(model: string, record?: (response: Json) => Promise<void>) {
    this.model = model;
    this.record = record;
  }

  get records(): boolean {
    return this.record !== undefined;
  }

  /** The recording the event named `event` must wait for, if any. */
  recording(event: string): Promise<void> | undefined {
    return this.pending.get(event);
  }

  deliveredText(): string {
    return this.delivered;
  }

  step(ev: SseEvent): StepResult {
    if (ev.data === '[DONE]') return { done: true };
    let data: Json;
    try {
      data = JSON.parse(ev.data) as Json;
    } catch {
      return {};
    }
    const type = String(data.type ?? ev.event);
    const event = ev.event !== 'message' ? ev.event : type;
    if (type === 'error')
      return {
        error: {
          event: 'error',
          json: ev.data,
          message: errorMessage(data) || 'The upstream provider reported an error.',
        },
      };
    if (type === 'response.failed') {
      const r = (data.response ?? {}) as Json;
      return { error: { event, json: ev.data, message: errorMessage(r.error) || 'The response failed upstream.' } };
    }
    if (DELTAS.has(type) && typeof data.delta === 'string') this.delivered += data.delta;
    const response = data.response as Json | undefined;
    if (response && response.model !== undefined) response.model = this.model;
    if (this.record && response && (type === 'response.created' || TERMINAL.has(type)))
      this.pending.set(
        event,
        this.record(
          type === 'response.created'
            ? { id: response.id, store: response.store }
            : { output: response.output, store: response.store },
        ),
      );
    if (TERMINAL.has(type)) {
      const u = response?.usage;
      const usage = u && typeof u === 'object' ? usageFromOpenAIResponses(u as Json, response) : undefined;
      return { usage, finalUsage: usage !== undefined, out: [{ event, data, needsCharge: true }], done: true };
    }
    return { out: [response ? { event, data } : asIs(event, data, ev)] };
  }
}

/** Chat chunks from a chat-only upstream, rebuilt as Responses events. */
class ChatToResponsesProcessor implements StreamProcessor {
  private readonly t: ChatToResponsesStream;
  private delivered = '';
  private started = false;
  private usage: Json | undefined;
  private serviceTier: string | undefined;

  constructor(t: ChatToResponsesStream) {
    this.t = t;
  }

  deliveredText(): string {
    return this.delivered;
  }

  private wrap(events: Json[], needsCharge = false): OutEvent[] {
    return events.map((e) => ({
      event: String(e.type),
      data: e,
      ...(needsCharge && TERMINAL.has(String(e.type)) ? { needsCharge: true } : {}),
    }));
  }

  step(ev: SseEvent): StepResult {
    if (ev.data === '[DONE]') return { done: true };
    let chunk: Json;
    try {
      chunk = JSON.parse(ev.data) as Json;
    } catch {
      return {};
    }
    if (chunk.error !== undefined) {
      const e = chunk.error as Json;
      return {
        error: {
          event: 'error',
          json: JSON.stringify({
            type: 'error',
            code: e.code ?? null,
            message: errorMessage(e),
            param: e.param ?? null,
          }),
          message: errorMessage(e) || 'The upstream provider reported an error.',
        },
      };
    }
    const out: Json[] = [];
    if (!this.started) {
      this.started = true;
      out.push(...this.t.start());
    }
    for (const c of (Array.isArray(chunk.choices) ? chunk.choices : []) as Json[])
      this.delivered += deltaText(c.delta as Json | undefined);
    let usage: TokenUsage | undefined;
    if (typeof chunk.service_tier === 'string') this.serviceTier = chunk.service_tier;
    if (chunk.usage && typeof chunk.usage === 'object') {
      this.usage = chunk.usage as Json;
      usage = usageFromOpenAI(this.usage, this.serviceTier);
    }
    out.push(...this.t.push(chunk));
    return {
      out: this.wrap(out),
      usage,
      finalUsage: usage !== undefined && (chunk.choices as unknown[] | undefined)?.length === 0,
    };
  }

  finish(charge: ChargeInfo): OutEvent[] {
    const head = this.started ? [] : this.t.start();
    this.started = true;
    return this.wrap([...head, ...this.t.finish(this.usage ?? chatUsage(charge.usage))], true);
  }
}
