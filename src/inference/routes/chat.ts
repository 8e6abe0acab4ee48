// POST /v1/chat/completions: OpenAI-format upstreams (OpenAI, xAI, DeepSeek) natively. The body
// goes upstream as the caller wrote it, except for fields the gateway owns (model -> upstream
// id, the output cap in the field the provider honours, a lowered cap, usage on streams). What
// changes the bill is priced, held for or refused by bill-policy.ts.
import { modelNotAvailable, type ResolvedModel } from '../../catalogue/catalogue.ts';
import type { Caller } from '../../billing/caller.ts';
import { usageFromAnthropic, usageFromOpenAI } from '../../billing/pricing.ts';
import { badRequest, unknownModel } from '../../errors/errors.ts';
import {
  anthropicInputUpperBound,
  countAnthropicInput,
  countedUsage,
  countInputTokens,
  inputTokensUpperBound,
} from '../tokens.ts';
import { capFieldsOf, CHAT_COMPLETIONS, type CapFields } from '../providers/openai-compatible.ts';
import { messagesEndpoint } from '../providers/anthropic.ts';
import {
  chatRequestToMessages,
  messagesResponseToChat,
  MessagesToChatStream,
  TranslationError,
} from '../translate/chat-messages.ts';
import { chargeField, type ChargeInfo, type Json, type Plan } from '../../metering/plan.ts';
import { type OutEvent, type StepResult, type StreamEvent, type StreamProcessor } from '../streams/stream-types.ts';
import { chatPolicy, messagesPolicy } from '../../metering/bill-policy.ts';
import { errorMessage, providerErrorFields, readJson, readUpstreamError } from '../upstream/replies.ts';
import { replyNamingModel, withTopLevelMember } from '../upstream/reply-text.ts';
import { parseBody } from '../request-body.ts';
import { BodyRewrite, preparePriced, refuseIfRefused } from '../../metering/priced-request.ts';
import type { RouteDeps } from '../deps.ts';
import { oneLine, type SseEvent } from '../streams/sse.ts';

export const CHAT_ROUTE = '/v1/chat/completions';
const encoder = new TextEncoder();

interface PreparedChat {
  plan: Plan;
  upstreamBody: string | Uint8Array;
  clientWantsUsage: boolean;
  /** Claude: the request went upstream translated to Anthropic messages. */
  viaMessages: boolean;
}

/** POST /v1/chat/completions, unary and streamed. */
export class ChatRoute {
  private readonly deps: RouteDeps;

  constructor(deps: RouteDeps) {
    this.deps = deps;
  }

  async complete(
    caller: Caller,
    raw: Uint8Array,
    requestId: string,
  ): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const { plan, upstreamBody, viaMessages } = await this.prepare(caller, raw, requestId, false);
    const { metering, calls } = this.deps;
    return metering.run(plan, async () => {
      if (viaMessages) return this.completeViaMessages(plan, upstreamBody as string);
      const res = await calls.post(plan, CHAT_COMPLETIONS, upstreamBody);
      if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
      const reply = await readJson(res, plan.requestId);
      const { json } = reply;
      const usage =
        json.usage && typeof json.usage === 'object'
          ? { ...usageFromOpenAI(json.usage as Json, json.service_tier), estimated: false }
          : { ...countedUsage(plan, outputTextOfReply(json)), estimated: true };
      const charge = await metering.settle(plan, usage, 'ok', 200);
      // The caller sees the model as they named it; everything else as the upstream sent it.
      return { body: replyNamingModel(reply, plan.model.id), charge };
    });
  }

  /** Claude on the chat route: the request translated to Anthropic messages and the reply back. */
  private async completeViaMessages(
    plan: Plan,
    upstreamBody: string,
  ): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const res = await this.deps.calls.post(plan, messagesEndpoint(), upstreamBody);
    if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
    const { json } = await readJson(res, plan.requestId);
    const reply = messagesResponseToChat(json, { model: plan.model.id, created: Math.floor(Date.now() / 1000) });
    const usage =
      json.usage && typeof json.usage === 'object'
        ? { ...usageFromAnthropic(json.usage as Json), estimated: false }
        : { ...countedUsage(plan, outputTextOfReply(reply)), estimated: true };
    const charge = await this.deps.metering.settle(plan, usage, 'ok', 200);
    return { body: encoder.encode(JSON.stringify(reply)), charge };
  }

  async *stream(caller: Caller, raw: Uint8Array, requestId: string, signal: AbortSignal): AsyncGenerator<StreamEvent> {
    const { plan, upstreamBody, clientWantsUsage, viaMessages } = await this.prepare(caller, raw, requestId, true);
    const { calls } = this.deps;
    const endpoint = viaMessages ? messagesEndpoint() : CHAT_COMPLETIONS;
    yield* this.deps.streams.start(plan, {
      send: (s, gone) => calls.post(plan, endpoint, upstreamBody, s, gone),
      processor: viaMessages
        ? new ClaudeChatProcessor(
            new MessagesToChatStream({
              model: plan.model.id,
              created: Math.floor(Date.now() / 1000),
              includeUsage: clientWantsUsage,
            }),
            clientWantsUsage,
          )
        : new ChatChunkProcessor(plan.model.id, clientWantsUsage),
      countUsage: (d) => countedUsage(plan, d),
      brokenStreamEvent: brokenChatStream,
      signal,
    });
  }

  private async prepare(
    caller: Caller,
    raw: Uint8Array,
    requestId: string,
    streamRoute: boolean,
  ): Promise<PreparedChat> {
    const startedAt = performance.now();
    const body = parseBody(raw);
    checkChatBody(body, streamRoute);
    const model = this.chatModel(body.model as string);
    const policy = chatPolicy(body, model, this.deps.sharedProviderObjects);
    refuseIfRefused(policy);
    const clientWantsUsage = streamRoute && (body.stream_options as Json | undefined)?.include_usage === true;
    const request = { caller, requestId, startedAt, body, model };
    if (model.dialect === 'anthropic') return { ...(await this.prepareClaude(request)), clientWantsUsage };
    const plan: Plan = {
      requestId,
      route: CHAT_ROUTE,
      caller,
      model,
      prices: policy.worst.prices,
      worst: policy.worst,
      body,
      inputUpper: BigInt(inputTokensUpperBound(body, model)),
      countInput: () => BigInt(countInputTokens(body, model)),
      maxOutput: BigInt(model.maxOutputTokens),
      choices: BigInt((body.n as number | undefined) ?? 1),
      startedAt,
    };
    const upstream = new BodyRewrite(body, raw);
    const capFields = honouredCap(plan, upstream, capFieldsOf(model));
    await preparePriced(this.deps.metering, { plan, policy, upstream, capFields });
    if (streamRoute && !clientWantsUsage) {
      // Usage asked for in front of the caller's bytes when nothing else changes: no re-encoding
      // of a large body per stream.
      if (!upstream.changed && body.stream_options === undefined)
        return {
          plan,
          upstreamBody: withLeadingMember(raw, '"stream_options":{"include_usage":true}'),
          clientWantsUsage,
          viaMessages: false,
        };
      upstream.set('stream_options', { ...(body.stream_options as Json | undefined), include_usage: true });
    }
    return { plan, upstreamBody: upstream.bytes(), clientWantsUsage, viaMessages: false };
  }

  /**
   * Claude on the chat route: the request translated to Anthropic messages, held under Claude's
   * own rules (images by URL, PDFs), its cap as translated (thinking may raise it) and its input
   * as Claude gets it (the tool-use tokens Anthropic adds).
   */
  private async prepareClaude(r: {
    caller: Caller;
    requestId: string;
    startedAt: number;
    body: Json;
    model: ResolvedModel;
  }): Promise<Omit<PreparedChat, 'clientWantsUsage'>> {
    const { body, model } = r;
    let messages: Json;
    try {
      messages = chatRequestToMessages(body, {
        upstreamModel: model.upstreamId,
        defaultMaxTokens: model.maxOutputTokens,
      });
    } catch (err) {
      if (err instanceof TranslationError)
        throw badRequest(err.message, 'unsupported_parameter', err.param ?? undefined);
      throw err;
    }
    const claude = messagesPolicy(messages, model, this.deps.sharedProviderObjects);
    refuseIfRefused(claude);
    const plan: Plan = {
      requestId: r.requestId,
      route: CHAT_ROUTE,
      caller: r.caller,
      model,
      prices: claude.worst.prices,
      worst: claude.worst,
      body,
      inputUpper: BigInt(anthropicInputUpperBound(messages, model)),
      countInput: () => BigInt(countAnthropicInput(messages, model)),
      maxOutput: BigInt(messages.max_tokens as number),
      choices: 1n,
      startedAt: r.startedAt,
    };
    const upstream = new BodyRewrite(messages);
    await preparePriced(this.deps.metering, {
      plan,
      policy: { worst: claude.worst },
      upstream,
      capFields: ['max_tokens'],
    });
    return { plan, upstreamBody: upstream.bytes(), viaMessages: true };
  }

  /** A chat model this route can serve now, or the 400 that says why not. */
  private chatModel(id: string): ResolvedModel {
    const model = this.deps.catalogue.get(id);
    if (!model) throw unknownModel(id);
    if (model.kind !== 'chat')
      throw badRequest(
        `The model '${model.id}' is a ${model.kind} model; it cannot be used on ${CHAT_ROUTE}.`,
        'model_not_supported',
        'model',
      );
    if (!model.available) throw modelNotAvailable(model);
    return model;
  }
}

/** The chat body's own rules, before its model is looked up: 400 naming the field. */
function checkChatBody(body: Json, streamRoute: boolean): void {
  if (typeof body.model !== 'string' || body.model === '')
    throw badRequest("Missing required parameter: 'model'.", 'missing_required_parameter', 'model');
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw badRequest("Missing required parameter: 'messages'.", 'missing_required_parameter', 'messages');
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean')
    throw badRequest("'stream' must be a boolean.", 'invalid_type', 'stream');
  if (Boolean(body.stream) !== streamRoute)
    throw badRequest(
      streamRoute ? 'StreamChatCompletion needs "stream": true.' : 'Use StreamChatCompletion for "stream": true.',
      'invalid_value',
      'stream',
    );
  for (const f of ['max_tokens', 'max_completion_tokens', 'n'] as const) {
    const v = body[f];
    if (v !== undefined && v !== null && !(Number.isSafeInteger(v) && (v as number) >= 1))
      throw badRequest(`'${f}' must be a positive integer.`, 'invalid_value', f);
  }
}

/**
 * The output cap the provider honours, as the plan's worst case, and the fields that carry it
 * upstream. A provider that reads max_tokens only (DeepSeek) gets a max_completion_tokens as
 * max_tokens; elsewhere the larger of the two is the worst case.
 */
function honouredCap(plan: Plan, upstream: BodyRewrite, provider: CapFields): string[] {
  const body = plan.body;
  const caps = (['max_completion_tokens', 'max_tokens'] as const).filter((f) => body[f] != null);
  const honoured = provider.readsMaxTokensOnly
    ? (body.max_tokens ?? body.max_completion_tokens)
    : caps.map((f) => body[f] as number).reduce((a, b) => Math.max(a, b), 0) || undefined;
  if (honoured != null) plan.maxOutput = BigInt(honoured as number);
  if (provider.readsMaxTokensOnly) {
    if (body.max_completion_tokens != null) {
      upstream.set('max_tokens', honoured);
      upstream.delete('max_completion_tokens');
    }
    return ['max_tokens'];
  }
  return caps.length ? caps : [provider.maxTokensField];
}

/**
 * `raw` (a JSON object with at least one member: engine.parse accepted it, and it has a model)
 * with `member` put first; the caller's bytes after it untouched.
 */
export function withLeadingMember(raw: Uint8Array, member: string): Uint8Array {
  let i = 0;
  while (raw[i] === 0x20 || raw[i] === 0x0a || raw[i] === 0x0d || raw[i] === 0x09) i++;
  const head = encoder.encode(`{${member},`);
  const out = new Uint8Array(head.length + raw.length - i - 1);
  out.set(head, 0);
  out.set(raw.subarray(i + 1), head.length);
  return out;
}

export function brokenChatStream(message: string) {
  return {
    json: JSON.stringify({ error: { message, type: 'server_error', param: null, code: 'upstream_stream_broken' } }),
  };
}

/**
 * OpenAI chat.completion.chunk stream, passed on. The upstream is always asked for usage; the usage chunk
 * reaches the caller only if they asked, and the charge rides on it, or otherwise on the
 * finishing chunk(s), held back until the charge is known.
 */
export class ChatChunkProcessor implements StreamProcessor {
  private readonly model: string;
  private readonly clientWantsUsage: boolean;
  private delivered = '';
  private meta: Json | undefined;
  /** The tier the provider reports serving at (each chunk carries it). */
  private serviceTier: string | undefined;

  constructor(model: string, clientWantsUsage: boolean) {
    this.model = model;
    this.clientWantsUsage = clientWantsUsage;
  }

  deliveredText(): string {
    return this.delivered;
  }

  step(ev: SseEvent): StepResult {
    if (ev.data === '[DONE]') return { done: true };
    let chunk: Json;
    try {
      chunk = JSON.parse(ev.data) as Json;
    } catch {
      return {}; // keep-alive noise some providers send
    }
    if (chunk.error !== undefined) {
      const f = providerErrorFields(JSON.stringify(chunk));
      const message = f.message || 'The upstream provider reported an error.';
      return {
        error: {
          json: JSON.stringify({
            error: { message, type: f.type ?? 'server_error', param: f.param ?? null, code: f.code ?? null },
          }),
          message,
        },
      };
    }
    const choices = Array.isArray(chunk.choices) ? (chunk.choices as Json[]) : [];
    if (typeof chunk.service_tier === 'string') this.serviceTier = chunk.service_tier;
    for (const c of choices) this.delivered += deltaText(c.delta as Json | undefined);
    // The chunk's own text goes on where the gateway's changes can be made in it (one SSE line).
    let text = oneLine(ev.data);
    if (chunk.model !== undefined && chunk.model !== this.model) {
      if (text !== undefined) text = withTopLevelMember(text, chunk, 'model', this.model);
      chunk.model = this.model;
    }
    this.meta ??= {
      id: chunk.id,
      object: chunk.object,
      created: chunk.created,
      model: this.model,
      system_fingerprint: chunk.system_fingerprint ?? null,
    };

    const hasUsage = chunk.usage !== null && typeof chunk.usage === 'object';
    const usage = hasUsage ? usageFromOpenAI(chunk.usage as Json, this.serviceTier) : undefined;
    // Some providers repeat running usage on every chunk; the final figure comes with the
    // usage-only chunk (choices: []) or the finishing one.
    const finishing = choices.some((c) => c.finish_reason != null);
    const finalUsage = hasUsage && (choices.length === 0 || finishing);

    if (!this.clientWantsUsage) {
      if (choices.length === 0) return { usage, finalUsage }; // the usage-only chunk they did not ask for
      if ('usage' in chunk) {
        if (text !== undefined) text = withTopLevelMember(text, chunk, 'usage', undefined);
        delete chunk.usage;
      }
    }
    const out: OutEvent = { data: chunk };
    if (text !== undefined) out.text = text;
    if (this.clientWantsUsage ? finalUsage : finishing) out.needsCharge = true;
    return { usage, finalUsage, out: [out] };
  }

  /** The caller asked for usage and the upstream sent none: give them our count. */
  finish(charge: ChargeInfo, usageReported: boolean): OutEvent[] {
    if (!this.clientWantsUsage || usageReported || !this.meta) return [];
    const u = charge.usage;
    const usage = {
      prompt_tokens: Number(u.inputTokens),
      completion_tokens: Number(u.outputTokens),
      total_tokens: Number(u.inputTokens + u.outputTokens),
      prompt_tokens_details: { cached_tokens: Number(u.cachedTokens) },
    };
    return [{ data: { ...this.meta, choices: [], usage, x_gateway: chargeField(charge) } }];
  }
}

/** Claude's Anthropic events, translated to chat chunks; the charge rides as on native chat. */
class ClaudeChatProcessor implements StreamProcessor {
  private readonly t: MessagesToChatStream;
  private readonly clientWantsUsage: boolean;
  private delivered = '';

  constructor(t: MessagesToChatStream, clientWantsUsage: boolean) {
    this.t = t;
    this.clientWantsUsage = clientWantsUsage;
  }

  deliveredText(): string {
    return this.delivered;
  }

  step(ev: SseEvent): StepResult {
    let data: Json;
    try {
      data = JSON.parse(ev.data) as Json;
    } catch {
      return {};
    }
    const type = String(data.type ?? ev.event);
    if (type === 'error') {
      const message = errorMessage(data.error) || 'The upstream provider reported an error.';
      return {
        error: {
          json: JSON.stringify({ error: { message, type: 'server_error', param: null, code: 'upstream_error' } }),
          message,
        },
      };
    }
    const chunks = this.t.push(ev.event !== 'message' ? ev.event : type, data);
    const out: OutEvent[] = [];
    for (const chunk of chunks) {
      const choices = Array.isArray(chunk.choices) ? (chunk.choices as Json[]) : [];
      for (const c of choices) this.delivered += deltaText(c.delta as Json | undefined);
      const carriesCharge = this.clientWantsUsage
        ? choices.length === 0 && chunk.usage != null
        : choices.some((c) => c.finish_reason != null);
      out.push({ data: chunk, ...(carriesCharge ? { needsCharge: true } : {}) });
    }
    const final = type === 'message_delta' || type === 'message_stop';
    const u = this.t.usage();
    const usage = Object.keys(u).length > 0 ? usageFromAnthropic(u) : undefined;
    return {
      out,
      usage,
      finalUsage: final && usage !== undefined && type === 'message_delta' && data.usage !== undefined,
      done: this.t.done,
    };
  }
}

export function deltaText(delta: Json | undefined): string {
  if (!delta) return '';
  let s = '';
  if (typeof delta.content === 'string') s += delta.content;
  if (typeof delta.refusal === 'string') s += delta.refusal;
  if (typeof delta.reasoning_content === 'string') s += delta.reasoning_content;
  if (Array.isArray(delta.tool_calls)) {
    for (const tc of delta.tool_calls as Json[]) {
      const fn = tc.function as Json | undefined;
      if (typeof fn?.name === 'string') s += fn.name;
      if (typeof fn?.arguments === 'string') s += fn.arguments;
    }
  }
  return s;
}

export function outputTextOfReply(reply: Json): string {
  const choices = Array.isArray(reply.choices) ? (reply.choices as Json[]) : [];
  return choices.map((c) => deltaText(c.message as Json | undefined)).join('');
}
