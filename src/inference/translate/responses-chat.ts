// OpenAI Responses API <-> chat completions, as pure functions, so chat-only models can be
// served on /v1/responses. Stateless: what needs stored responses is refused.
import { createHash } from 'node:crypto';

type Json = Record<string, unknown>;

export class TranslationError extends Error {
  readonly param: string | null;
  readonly code: string;
  constructor(message: string, code: string, param: string | null = null) {
    super(message);
    this.code = code;
    this.param = param;
  }
}

const isCallable = (t: Json | undefined) => t?.type === 'function' || t?.type === 'custom';

/**
 * Hosted tool types a chat-only model cannot run: anything but function and custom tools, and
 * namespaces of them (a namespace is a named group of function/custom tools, e.g. Codex's
 * multi_agent_v1; one holding anything else counts as `namespace`).
 */
export function builtinToolTypes(req: Json): string[] {
  const tools = (Array.isArray(req.tools) ? req.tools : []) as Json[];
  const bad = tools.filter(
    (t) =>
      !isCallable(t) && !(t?.type === 'namespace' && Array.isArray(t.tools) && (t.tools as Json[]).every(isCallable)),
  );
  return [...new Set(bad.map((t) => String(t?.type)))];
}

/** A tool as the Responses caller knows it. */
export interface ToolRef {
  name: string;
  namespace?: string;
  custom: boolean;
}

const CHAT_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * Chat completions has one flat list of functions; Responses also has namespaces. Top-level
 * tools keep their names; a namespaced tool becomes `<namespace>__<name>`, or, when that is
 * taken, too long or not a valid chat name, a name with a hash of both parts. Names depend only
 * on the request's tools (then on the order history names them), so every turn of a
 * conversation that sends the same tools gets the same names, and two tools never share one.
 */
export class ChatToolNames {
  private readonly byChat = new Map<string, ToolRef>();
  private readonly byRef = new Map<string, string>();

  constructor(req: Json) {
    const tools = (Array.isArray(req.tools) ? req.tools : []) as Json[];
    for (const t of tools)
      if (isCallable(t)) this.add(String(t.name), { name: String(t.name), custom: t.type === 'custom' });
    for (const ns of tools) {
      if (ns?.type !== 'namespace' || !Array.isArray(ns.tools)) continue;
      for (const t of ns.tools as Json[])
        if (isCallable(t)) this.chatName(String(t.name), String(ns.name), t.type === 'custom');
    }
  }

  private add(chat: string, ref: ToolRef): void {
    if (!this.byChat.has(chat)) this.byChat.set(chat, ref);
    this.byRef.set(refKey(ref.name, ref.namespace), chat);
  }

  /** The chat function name of a tool; a namespaced one not declared (only in history) gets one now. */
  chatName(name: string, namespace?: string, custom = false): string {
    const known = this.byRef.get(refKey(name, namespace));
    if (known !== undefined) return known;
    if (!namespace) return name;
    let chat = `${namespace}__${name}`;
    if (!CHAT_NAME.test(chat) || this.byChat.has(chat)) {
      const hash = createHash('sha256').update(`${namespace}\0${name}`).digest('hex');
      const stem = chat.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 47);
      for (let n = 0; !CHAT_NAME.test(chat) || this.byChat.has(chat); n++) chat = `${stem}_${hash.slice(n, n + 16)}`;
    }
    this.add(chat, { name, namespace, custom });
    return chat;
  }

  /** The tool a chat function name stands for (a name the model made up stays as it is). */
  ref(chat: string): ToolRef {
    return this.byChat.get(chat) ?? { name: chat, custom: false };
  }
}

const refKey = (name: string, namespace?: string) => (namespace === undefined ? `\0${name}` : `${namespace}\0${name}`);
const nsOf = (item: Json) => (typeof item.namespace === 'string' && item.namespace !== '' ? item.namespace : undefined);

function chatToolDef(t: Json, name: string): Json {
  return t.type === 'custom'
    ? {
        type: 'function',
        function: {
          name,
          description: t.description ?? 'Free-form input',
          parameters: {
            type: 'object',
            properties: { input: { type: 'string', description: 'The tool input' } },
            required: ['input'],
          },
        },
      }
    : {
        type: 'function',
        function: {
          name,
          ...(t.description ? { description: t.description } : {}),
          parameters: t.parameters ?? { type: 'object', properties: {} },
          ...(t.strict !== undefined ? { strict: t.strict } : {}),
        },
      };
}

function partsToChat(content: unknown): unknown {
  if (typeof content === 'string') return content;
  const parts = (Array.isArray(content) ? content : []) as Json[];
  const out = parts.map((p) => {
    if (p?.type === 'input_text' || p?.type === 'output_text' || p?.type === 'text')
      return { type: 'text', text: String(p.text ?? '') };
    if (p?.type === 'input_image') {
      if (typeof p.image_url !== 'string')
        throw new TranslationError(
          'input_image by file_id needs a passthrough model',
          'unsupported_parameter',
          'input',
        );
      return { type: 'image_url', image_url: { url: p.image_url, ...(p.detail ? { detail: p.detail } : {}) } };
    }
    throw new TranslationError(
      `input part type '${String(p?.type)}' needs a passthrough model`,
      'unsupported_parameter',
      'input',
    );
  });
  return out.length === 1 && out[0]!.type === 'text' ? (out[0] as Json).text : out;
}

function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  return ((Array.isArray(output) ? output : []) as Json[]).map((p) => String(p?.text ?? '')).join('');
}

/** Responses request -> chat completions request. */
export function responsesRequestToChat(req: Json, opts: { upstreamModel: string }): Json {
  refuseWhatChatCannotDo(req);
  const names = new ChatToolNames(req);
  const chat: Json = { model: opts.upstreamModel, messages: inputToMessages(req, names) };
  const tools = toolsToChat(req, names);
  if (tools.length) chat.tools = tools;
  const tc = req.tool_choice as Json | string | undefined;
  if (typeof tc === 'string') chat.tool_choice = tc;
  else if (tc && (tc.type === 'function' || tc.type === 'custom'))
    chat.tool_choice = {
      type: 'function',
      function: { name: names.chatName(String(tc.name), nsOf(tc), tc.type === 'custom') },
    };
  if (typeof req.max_output_tokens === 'number') chat.max_completion_tokens = req.max_output_tokens;
  for (const k of ['temperature', 'top_p', 'parallel_tool_calls', 'metadata', 'user'] as const)
    if (req[k] !== undefined && req[k] !== null) chat[k] = req[k];
  const effort = (req.reasoning as Json | undefined)?.effort;
  if (typeof effort === 'string') chat.reasoning_effort = effort;
  const format = ((req.text as Json | undefined)?.format ?? undefined) as Json | undefined;
  if (format?.type === 'json_schema')
    chat.response_format = {
      type: 'json_schema',
      json_schema: {
        name: format.name,
        schema: format.schema,
        ...(format.strict !== undefined ? { strict: format.strict } : {}),
      },
    };
  else if (format?.type === 'json_object') chat.response_format = { type: 'json_object' };
  if (req.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  return chat;
}

/** What only the provider's own Responses API can do: stored state and built-in tools. */
function refuseWhatChatCannotDo(req: Json): void {
  if (req.previous_response_id)
    throw new TranslationError(
      'previous_response_id needs a passthrough model (chat-only models keep no stored responses)',
      'unsupported_parameter',
      'previous_response_id',
    );
  for (const f of ['conversation', 'prompt'] as const) {
    if (req[f] != null)
      throw new TranslationError(
        `${f} needs a passthrough model (chat-only models keep no stored ${f}s)`,
        'unsupported_parameter',
        f,
      );
  }
  const builtins = builtinToolTypes(req);
  if (builtins.length)
    throw new TranslationError(
      `built-in tools (${builtins.join(', ')}) need a passthrough model`,
      'unsupported_responses_tools',
      'tools',
    );
}

/** Instructions and input items as chat messages (tool calls joined to the assistant turn before them). */
function inputToMessages(req: Json, names: ChatToolNames): Json[] {
  const messages: Json[] = [];
  if (typeof req.instructions === 'string' && req.instructions)
    messages.push({ role: 'system', content: req.instructions });
  const addToolCall = (call: Json) => {
    const last = messages.at(-1);
    if (last && last.role === 'assistant')
      (last.tool_calls = (last.tool_calls as Json[] | undefined) ?? []) && (last.tool_calls as Json[]).push(call);
    else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
  };
  if (typeof req.input === 'string') messages.push({ role: 'user', content: req.input });
  for (const item of (Array.isArray(req.input) ? req.input : []) as Json[]) {
    const type = item?.type ?? (item && 'role' in item ? 'message' : undefined);
    if (type === 'message') {
      messages.push({ role: String(item.role), content: partsToChat(item.content) });
    } else if (type === 'function_call') {
      addToolCall({
        id: item.call_id,
        type: 'function',
        function: { name: names.chatName(String(item.name), nsOf(item)), arguments: String(item.arguments ?? '') },
      });
    } else if (type === 'custom_tool_call') {
      addToolCall({
        id: item.call_id,
        type: 'function',
        function: {
          name: names.chatName(String(item.name), nsOf(item), true),
          arguments: JSON.stringify({ input: item.input ?? '' }),
        },
      });
    } else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: outputText(item.output) });
    } else if (type === 'reasoning') {
      continue; // reasoning items of an earlier turn carry nothing a chat model can use
    } else {
      throw new TranslationError(
        `input item type '${String(type)}' needs a passthrough model`,
        'unsupported_parameter',
        'input',
      );
    }
  }

  return messages;
}

/** The tools as chat functions: namespaces flattened into the one list chat completions has. */
function toolsToChat(req: Json, names: ChatToolNames): Json[] {
  const tools: Json[] = [];
  for (const t of (Array.isArray(req.tools) ? req.tools : []) as Json[]) {
    if (t.type === 'namespace')
      for (const inner of t.tools as Json[])
        tools.push(chatToolDef(inner, names.chatName(String(inner.name), String(t.name), inner.type === 'custom')));
    else tools.push(chatToolDef(t, String(t.name)));
  }
  return tools;
}

/** The Responses usage object, with every field OpenAI's schema requires (strict clients validate them). */
function responsesUsage(u: Json | undefined): Json | null {
  if (!u) return null;
  const input = Number(u.prompt_tokens ?? 0);
  const completion = Number(u.completion_tokens ?? 0);
  const reasoning = Number(((u.completion_tokens_details ?? {}) as Json).reasoning_tokens ?? 0);
  // Responses count reasoning inside output_tokens; xAI reports it beside completion_tokens.
  const output =
    reasoning > 0 && Number(u.total_tokens ?? 0) >= input + completion + reasoning
      ? completion + reasoning
      : completion;
  const details = (u.prompt_tokens_details ?? {}) as Json;
  return {
    input_tokens: input,
    input_tokens_details: {
      cached_tokens: Number(details.cached_tokens ?? u.prompt_cache_hit_tokens ?? 0),
      cache_write_tokens: Number(details.cache_write_tokens ?? 0),
    },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

interface Ctx {
  model: string;
  request: Json;
  responseId: string;
  createdAt: number;
}

function suffix(responseId: string): string {
  return responseId.replace(/^resp_/, '');
}

/** A call item under the name (and namespace) the caller declared; arguments and input left to the caller. */
function callItem(id: string, callId: string, ref: ToolRef, status: string): Json {
  return {
    id,
    type: ref.custom ? 'custom_tool_call' : 'function_call',
    status,
    call_id: callId,
    name: ref.name,
    ...(ref.namespace !== undefined ? { namespace: ref.namespace } : {}),
  };
}

function outputItems(
  ctx: Ctx,
  text: string,
  calls: { id: string; name: string; arguments: string }[],
  names = new ChatToolNames(ctx.request),
): Json[] {
  const items: Json[] = [];
  if (text)
    items.push({
      id: `msg_${suffix(ctx.responseId)}`,
      type: 'message',
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
    });
  calls.forEach((c, i) => {
    const ref = names.ref(c.name);
    const item = callItem(`fc_${suffix(ctx.responseId)}_${i}`, c.id, ref, 'completed');
    if (ref.custom) {
      let input = '';
      try {
        input = String((JSON.parse(c.arguments) as Json).input ?? '');
      } catch {
        input = c.arguments;
      }
      items.push({ ...item, input });
    } else {
      items.push({ ...item, arguments: c.arguments });
    }
  });
  return items;
}

function responseObject(ctx: Ctx, output: Json[], finish: string | null, usage: Json | null): Json {
  const r = ctx.request;
  const incomplete = finish === 'length' ? 'max_output_tokens' : finish === 'content_filter' ? 'content_filter' : null;
  return {
    id: ctx.responseId,
    object: 'response',
    created_at: ctx.createdAt,
    status: incomplete ? 'incomplete' : 'completed',
    error: null,
    incomplete_details: incomplete ? { reason: incomplete } : null,
    instructions: r.instructions ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    model: ctx.model,
    output,
    parallel_tool_calls: r.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: r.reasoning ?? { effort: null, summary: null },
    store: false,
    temperature: r.temperature ?? 1,
    text: r.text ?? { format: { type: 'text' } },
    tool_choice: r.tool_choice ?? 'auto',
    tools: r.tools ?? [],
    top_p: r.top_p ?? 1,
    truncation: 'disabled',
    usage,
    metadata: r.metadata ?? {},
  };
}

/** Non-streamed chat.completion -> Response object. */
export function chatResponseToResponses(chat: Json, ctx: Ctx): Json {
  const choice = ((Array.isArray(chat.choices) ? chat.choices : []) as Json[])[0] ?? {};
  const message = (choice.message ?? {}) as Json;
  const calls = ((Array.isArray(message.tool_calls) ? message.tool_calls : []) as Json[]).map((tc) => {
    const fn = (tc.function ?? {}) as Json;
    return { id: String(tc.id), name: String(fn.name), arguments: String(fn.arguments ?? '') };
  });
  const text = typeof message.content === 'string' ? message.content : '';
  return responseObject(
    ctx,
    outputItems(ctx, text, calls),
    (choice.finish_reason as string | null) ?? null,
    responsesUsage(chat.usage as Json | undefined),
  );
}

/** chat.completion.chunk objects in, Responses streaming events out. */
export class ChatToResponsesStream {
  private readonly ctx: Ctx;
  private readonly names: ChatToolNames;
  private seq = 0;
  private text = '';
  private messageOpen = false;
  private readonly calls: { id: string; name: string; arguments: string; outputIndex: number }[] = [];
  private nextOutputIndex = 0;
  private messageIndex = -1;
  private finishReason: string | null = null;
  private usage: Json | undefined;

  constructor(ctx: Ctx) {
    this.ctx = ctx;
    this.names = new ChatToolNames(ctx.request);
  }

  private ev(type: string, fields: Json): Json {
    return { type, sequence_number: this.seq++, ...fields };
  }

  private snapshot(status: string): Json {
    return { ...responseObject(this.ctx, [], null, null), status, incomplete_details: null };
  }

  start(): Json[] {
    return [
      this.ev('response.created', { response: this.snapshot('in_progress') }),
      this.ev('response.in_progress', { response: this.snapshot('in_progress') }),
    ];
  }

  private get messageId(): string {
    return `msg_${suffix(this.ctx.responseId)}`;
  }

  push(chunk: Json): Json[] {
    const out: Json[] = [];
    if (chunk.usage && typeof chunk.usage === 'object') this.usage = chunk.usage as Json;
    for (const c of (Array.isArray(chunk.choices) ? chunk.choices : []) as Json[]) {
      const delta = (c.delta ?? {}) as Json;
      if (typeof delta.content === 'string' && delta.content !== '') {
        if (!this.messageOpen) {
          this.messageOpen = true;
          this.messageIndex = this.nextOutputIndex++;
          out.push(
            this.ev('response.output_item.added', {
              output_index: this.messageIndex,
              item: { id: this.messageId, type: 'message', status: 'in_progress', role: 'assistant', content: [] },
            }),
          );
          out.push(
            this.ev('response.content_part.added', {
              item_id: this.messageId,
              output_index: this.messageIndex,
              content_index: 0,
              part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
            }),
          );
        }
        this.text += delta.content;
        out.push(
          this.ev('response.output_text.delta', {
            item_id: this.messageId,
            output_index: this.messageIndex,
            content_index: 0,
            delta: delta.content,
            logprobs: [],
          }),
        );
      }
      for (const tc of (Array.isArray(delta.tool_calls) ? delta.tool_calls : []) as Json[]) {
        const index = Number(tc.index ?? 0);
        const fn = (tc.function ?? {}) as Json;
        let call = this.calls[index];
        if (!call) {
          call = {
            id: String(tc.id ?? `call_${index}`),
            name: String(fn.name ?? ''),
            arguments: '',
            outputIndex: this.nextOutputIndex++,
          };
          this.calls[index] = call;
          const ref = this.names.ref(call.name);
          const item = {
            ...callItem(this.callItemId(index), call.id, ref, 'in_progress'),
            ...(ref.custom ? { input: '' } : { arguments: '' }),
          };
          out.push(this.ev('response.output_item.added', { output_index: call.outputIndex, item }));
        }
        if (typeof fn.arguments === 'string' && fn.arguments !== '') {
          call.arguments += fn.arguments;
          // A custom tool's input arrives whole at the end (it is one field of the arguments).
          if (!this.names.ref(call.name).custom)
            out.push(
              this.ev('response.function_call_arguments.delta', {
                item_id: this.callItemId(index),
                output_index: call.outputIndex,
                delta: fn.arguments,
              }),
            );
        }
      }
      if (c.finish_reason != null) this.finishReason = String(c.finish_reason);
    }
    return out;
  }

  private callItemId(i: number): string {
    return `fc_${suffix(this.ctx.responseId)}_${i}`;
  }

  finish(usage?: Json): Json[] {
    const out: Json[] = [];
    const items = outputItems(this.ctx, this.text, this.calls.filter(Boolean), this.names);
    if (this.messageOpen) {
      const part = { type: 'output_text', text: this.text, annotations: [], logprobs: [] };
      out.push(
        this.ev('response.output_text.done', {
          item_id: this.messageId,
          output_index: this.messageIndex,
          content_index: 0,
          text: this.text,
          logprobs: [],
        }),
      );
      out.push(
        this.ev('response.content_part.done', {
          item_id: this.messageId,
          output_index: this.messageIndex,
          content_index: 0,
          part,
        }),
      );
      out.push(this.ev('response.output_item.done', { output_index: this.messageIndex, item: items[0] }));
    }
    this.calls.forEach((call, i) => {
      if (!call) return;
      const item = items.find((it) => it.id === this.callItemId(i))!;
      if (item.type === 'function_call')
        out.push(
          this.ev('response.function_call_arguments.done', {
            item_id: item.id,
            output_index: call.outputIndex,
            arguments: call.arguments,
          }),
        );
      out.push(this.ev('response.output_item.done', { output_index: call.outputIndex, item }));
    });
    const response = responseObject(this.ctx, items, this.finishReason, responsesUsage(this.usage ?? usage));
    out.push(this.ev(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response }));
    return out;
  }
}
