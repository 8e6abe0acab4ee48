// POST /v1/messages and /v1/messages/count_tokens: Anthropic's wire format, Claude models only.
// Bodies go upstream as the caller wrote them (system, content blocks, tools, cache_control,
// metadata…); the gateway owns only model -> upstream id, a lowered max_tokens and the max_uses
// of server tools the caller left uncapped. What changes the bill is priced, held for or
// refused by bill-policy.ts.
import { modelNotAvailable, type ResolvedModel } from '../../catalogue/catalogue.ts';
import type { Caller } from '../../billing/caller.ts';
import { usageFromAnthropic, type TokenUsage } from '../../billing/pricing.ts';
import { badRequest, unknownModel } from '../../errors/errors.ts';
import { anthropicInputUpperBound, countAnthropicInput, countedUsage } from '../tokens.ts';
import { anthropic, messagesEndpoint } from '../providers/anthropic.ts';
import { upstreamFailure } from '../upstream/upstream.ts';
import type { ChargeInfo, Json, Plan } from '../../metering/plan.ts';
import { asIs, type StepResult, type StreamEvent, type StreamProcessor } from '../streams/stream-types.ts';
import { messagesPolicy } from '../../metering/bill-policy.ts';
import { operatorObjectRefusal } from '../../tenancy/operator-objects.ts';
import { errorMessage, readJson, readUpstreamError, upstreamErrorOf } from '../upstream/replies.ts';
import { replyNamingModel } from '../upstream/reply-text.ts';
import { parseBody } from '../request-body.ts';
import { BodyRewrite, preparePriced, refusal, refuseIfRefused } from '../../metering/priced-request.ts';
import type { RouteDeps } from '../deps.ts';
import type { SseEvent } from '../streams/sse.ts';

export const MESSAGES_ROUTE = '/v1/messages';
const encoder = new TextEncoder();

export interface AnthropicHeaders {
  version?: string | null;
  beta?: string | null;
}

/** POST /v1/messages (unary and streamed) and /v1/messages/count_tokens. */
export class MessagesRoute {
  private readonly deps: RouteDeps;

  constructor(deps: RouteDeps) {
    this.deps = deps;
  }

  async create(
    caller: Caller,
    raw: Uint8Array,
    requestId: string,
    h: AnthropicHeaders,
  ): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const { plan, upstreamBody } = await this.prepare(caller, raw, requestId, false);
    const { metering, calls } = this.deps;
    return metering.run(plan, async () => {
      const res = await calls.post(plan, messagesEndpoint(h), upstreamBody);
      if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
      const reply = await readJson(res, plan.requestId);
      const { json } = reply;
      const usage =
        json.usage && typeof json.usage === 'object'
          ? { ...usageFromAnthropic(json.usage as Json), estimated: false }
          : { ...countedUsage(plan, outputTextOfMessage(json)), estimated: true };
      const charge = await metering.settle(plan, usage, 'ok', 200);
      return { body: replyNamingModel(reply, plan.model.id), charge };
    });
  }

  async *stream(
    caller: Caller,
    raw: Uint8Array,
    requestId: string,
    h: AnthropicHeaders,
    signal: AbortSignal,
  ): AsyncGenerator<StreamEvent> {
    const { plan, upstreamBody } = await this.prepare(caller, raw, requestId, true);
    const endpoint = messagesEndpoint(h);
    yield* this.deps.streams.start(plan, {
      send: (s, gone) => this.deps.calls.post(plan, endpoint, upstreamBody, s, gone),
      processor: new AnthropicEventProcessor(plan.model.id),
      countUsage: (d) => countedUsage(plan, d),
      brokenStreamEvent: (message) => ({
        event: 'error',
        json: JSON.stringify({ type: 'error', error: { type: 'api_error', message } }),
      }),
      signal,
    });
  }

  /** Free, but counted against the key's request rate: forwarded to the upstream's own counter. */
  async countTokens(
    caller: Caller,
    raw: Uint8Array,
    requestId: string,
    h: AnthropicHeaders,
  ): Promise<{ body: Uint8Array }> {
    const body = parseBody(raw);
    if (typeof body.model !== 'string' || body.model === '')
      throw badRequest('model: Field required', 'missing_required_parameter', 'model');
    if (!Array.isArray(body.messages))
      throw badRequest('messages: Field required', 'missing_required_parameter', 'messages');
    const model = this.claudeModel(body.model);
    // Counting reads the file too: an id of the operator's is not the caller's to measure.
    const owned = operatorObjectRefusal('messages', body, this.deps.sharedProviderObjects);
    if (owned) throw refusal(owned);
    await this.deps.metering.admit(caller, requestId);
    // Unpriced and never retried: the model's first deployment counts.
    const target = this.deps.calls.targetFor(model.served[0]!);
    const call = anthropic(target, h);
    const upstreamBody = body.model === target.upstreamId ? raw : JSON.stringify({ ...body, model: target.upstreamId });
    let res;
    try {
      res = await this.deps.upstream.post(call.countTokensUrl, call.headers, upstreamBody);
    } catch (err) {
      throw upstreamFailure(err, requestId);
    }
    const text = await res.body.text();
    if (res.statusCode < 200 || res.statusCode >= 300)
      throw upstreamErrorOf(res.statusCode, res.headers['retry-after'], text, requestId);
    return { body: encoder.encode(text) };
  }

  private async prepare(
    caller: Caller,
    raw: Uint8Array,
    requestId: string,
    streamRoute: boolean,
  ): Promise<{ plan: Plan; upstreamBody: string | Uint8Array }> {
    const startedAt = performance.now();
    const body = parseBody(raw);
    if (typeof body.model !== 'string' || body.model === '')
      throw badRequest('model: Field required', 'missing_required_parameter', 'model');
    if (!Array.isArray(body.messages) || body.messages.length === 0)
      throw badRequest('messages: Field required (at least one message)', 'missing_required_parameter', 'messages');
    if (!(Number.isSafeInteger(body.max_tokens) && (body.max_tokens as number) >= 1))
      throw badRequest('max_tokens: Field required (a positive integer)', 'invalid_value', 'max_tokens');
    if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean')
      throw badRequest('stream: Input should be a valid boolean', 'invalid_type', 'stream');
    if (Boolean(body.stream) !== streamRoute)
      throw badRequest(
        streamRoute ? 'StreamMessage needs "stream": true.' : 'Use StreamMessage for "stream": true.',
        'invalid_value',
        'stream',
      );
    const model = this.claudeModel(body.model);
    const policy = messagesPolicy(body, model, this.deps.sharedProviderObjects);
    refuseIfRefused(policy);
    const plan: Plan = {
      requestId,
      route: MESSAGES_ROUTE,
      caller,
      model,
      prices: policy.worst.prices,
      worst: policy.worst,
      body,
      inputUpper: BigInt(anthropicInputUpperBound(body, model)),
      countInput: () => BigInt(countAnthropicInput(body, model)),
      maxOutput: BigInt(body.max_tokens as number),
      choices: 1n,
      startedAt,
    };
    const upstream = new BodyRewrite(body, raw);
    await preparePriced(this.deps.metering, { plan, policy, upstream, capFields: ['max_tokens'] });
    return { plan, upstreamBody: upstream.bytes() };
  }

  private claudeModel(id: string): ResolvedModel {
    const model = this.deps.catalogue.get(id);
    if (!model) throw unknownModel(id, 'model: ');
    if (model.kind !== 'chat' || model.dialect !== 'anthropic') {
      throw badRequest(
        `model: '${model.id}' is not a Claude model. /v1/messages serves Claude models only; use POST /v1/chat/completions for ${model.id}.`,
        'model_not_supported',
        'model',
      );
    }
    if (!model.available) throw modelNotAvailable(model, 'model: ');
    return model;
  }
}

function outputTextOfMessage(msg: Json): string {
  const blocks = Array.isArray(msg.content) ? (msg.content as Json[]) : [];
  return blocks
    .map((b) =>
      typeof b.text === 'string'
        ? b.text
        : typeof b.thinking === 'string'
          ? b.thinking
          : b.input !== undefined
            ? JSON.stringify(b.input)
            : '',
    )
    .join('');
}

/**
 * Anthropic's SSE events, passed on as they are (model renamed in message_start); usage comes
 * from message_start (input, cache) and message_delta (output, final), and the charge rides on
 * message_delta.
 */
export class AnthropicEventProcessor implements StreamProcessor {
  private readonly model: string;
  private delivered = '';
  private usageSoFar: Json = {};

  constructor(model: string) {
    this.model = model;
  }

  deliveredText(): string {
    return this.delivered;
  }

  /** Usage only once the upstream reported some: an absent report is not a report of zero. */
  private reported(): TokenUsage | undefined {
    return Object.keys(this.usageSoFar).length > 0 ? usageFromAnthropic(this.usageSoFar) : undefined;
  }

  step(ev: SseEvent): StepResult {
    let data: Json;
    try {
      data = JSON.parse(ev.data) as Json;
    } catch {
      return {};
    }
    const type = (data.type as string | undefined) ?? ev.event;
    const event = ev.event !== 'message' ? ev.event : type;
    switch (type) {
      case 'error': {
        // Anthropic's error event shape, whatever the upstream wrote.
        const message = errorMessage(data.error) || errorMessage(data) || 'The upstream provider reported an error.';
        const type =
          typeof (data.error as Json | undefined)?.type === 'string' ? (data.error as Json).type : 'api_error';
        return {
          error: { event: 'error', json: JSON.stringify({ type: 'error', error: { type, message } }), message },
        };
      }
      case 'message_start': {
        const msg = (data.message ?? {}) as Json;
        if (msg.model !== undefined) msg.model = this.model;
        this.usageSoFar = { ...((msg.usage as Json | undefined) ?? {}) };
        return { usage: this.reported(), out: [{ event, data }] };
      }
      case 'content_block_delta': {
        const d = (data.delta ?? {}) as Json;
        for (const k of ['text', 'partial_json', 'thinking'] as const)
          if (typeof d[k] === 'string') this.delivered += d[k] as string;
        return { out: [asIs(event, data, ev)] };
      }
      case 'content_block_start': {
        const b = (data.content_block ?? {}) as Json;
        if (typeof b.text === 'string') this.delivered += b.text;
        return { out: [asIs(event, data, ev)] };
      }
      case 'message_delta': {
        // message_delta usage is cumulative; fields it carries replace those from message_start
        // (counts, and the cache_creation and server_tool_use breakdowns).
        const u = (data.usage ?? {}) as Json;
        for (const [k, v] of Object.entries(u))
          if (typeof v === 'number' || (v !== null && typeof v === 'object')) this.usageSoFar[k] = v;
        return {
          usage: this.reported(),
          finalUsage: data.usage !== undefined,
          out: [{ event, data, needsCharge: true }],
        };
      }
      case 'message_stop':
        return { out: [asIs(event, data, ev)], done: true };
      default:
        return { out: [asIs(event, data, ev)] };
    }
  }
}
