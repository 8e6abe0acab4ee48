// OpenAI chat completions <-> Anthropic messages, as pure functions, so OpenAI-SDK callers can
// reach Claude on /v1/chat/completions. No I/O here; the route does the calling and billing.

type Json = Record<string, unknown>;

export class TranslationError extends Error {
  readonly param: string | null;
  constructor(message: string, param: string | null = null) {
    super(message);
    this.param = param;
  }
}

const REASONING_BUDGET: Record<string, number> = { minimal: 1024, low: 1024, medium: 4096, high: 16384 };

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return (content as Json[]).map((p) => (typeof p?.text === 'string' ? p.text : '')).join('');
  return '';
}

function imageBlock(url: string): Json {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (m) return { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } };
  if (/^https?:\/\//.test(url)) return { type: 'image', source: { type: 'url', url } };
  throw new TranslationError('image_url must be an http(s) URL or a base64 data URL', 'messages');
}

function userBlocks(content: unknown): Json[] | string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content))
    throw new TranslationError('message content must be a string or an array of parts', 'messages');
  return (content as Json[]).map((p) => {
    if (p?.type === 'text') return { type: 'text', text: String(p.text ?? '') };
    if (p?.type === 'image_url') return imageBlock(String(((p.image_url ?? {}) as Json).url ?? ''));
    if (p?.type === 'file') {
      const f = (p.file ?? {}) as Json;
      const m = /^data:application\/pdf;base64,(.*)$/s.exec(String(f.file_data ?? ''));
      if (m) return { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: m[1] } };
    }
    throw new TranslationError(`content part type '${String(p?.type)}' is not supported for Claude models`, 'messages');
  });
}

const asBlocks = (c: Json[] | string): Json[] =>
  typeof c === 'string' ? (c === '' ? [] : [{ type: 'text', text: c }]) : c;

/** OpenAI chat request -> Anthropic messages request. */
export function chatRequestToMessages(chat: Json, opts: { upstreamModel: string; defaultMaxTokens: number }): Json {
  if (typeof chat.n === 'number' && chat.n > 1)
    throw new TranslationError('n > 1 is not supported for Claude models', 'n');
  const rf = chat.response_format as Json | undefined;
  if (rf && rf.type !== 'text')
    throw new TranslationError(
      'response_format is not supported for Claude models on this route; use /v1/messages',
      'response_format',
    );

  const system: Json[] = [];
  const out: { role: string; content: Json[] | string }[] = [];
  const push = (role: string, content: Json[] | string) => {
    const last = out.at(-1);
    if (last && last.role === role) last.content = [...asBlocks(last.content), ...asBlocks(content)];
    else out.push({ role, content });
  };

  for (const m of (Array.isArray(chat.messages) ? chat.messages : []) as Json[]) {
    const role = m?.role;
    if (role === 'system' || role === 'developer') {
      if (typeof m.content === 'string') system.push({ type: 'text', text: m.content });
      else
        for (const p of (Array.isArray(m.content) ? m.content : []) as Json[])
          system.push({ type: 'text', text: String(p?.text ?? '') });
    } else if (role === 'user') {
      push('user', userBlocks(m.content));
    } else if (role === 'assistant') {
      const blocks: Json[] = asBlocks(
        typeof m.content === 'string' || m.content == null ? String(m.content ?? '') : textOf(m.content),
      );
      for (const tc of (Array.isArray(m.tool_calls) ? m.tool_calls : []) as Json[]) {
        const fn = (tc.function ?? {}) as Json;
        let input: unknown;
        try {
          input = JSON.parse(String(fn.arguments ?? '{}') || '{}');
        } catch {
          throw new TranslationError(`tool call ${String(tc.id)} has arguments that are not JSON`, 'messages');
        }
        blocks.push({ type: 'tool_use', id: tc.id, name: fn.name, input });
      }
      push('assistant', blocks);
    } else if (role === 'tool') {
      push('user', [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: textOf(m.content) }]);
    } else {
      throw new TranslationError(`message role '${String(role)}' is not supported for Claude models`, 'messages');
    }
  }

  const req: Json = {
    model: opts.upstreamModel,
    max_tokens: (chat.max_completion_tokens ?? chat.max_tokens ?? opts.defaultMaxTokens) as number,
    messages: out,
  };
  if (system.length)
    req.system = system.every((b) => typeof b.text === 'string') && system.length === 1 ? system[0]!.text : system;
  if (typeof chat.temperature === 'number') req.temperature = Math.min(1, chat.temperature);
  if (typeof chat.top_p === 'number') req.top_p = chat.top_p;
  if (chat.stop != null) req.stop_sequences = Array.isArray(chat.stop) ? chat.stop : [chat.stop];
  if (chat.stream === true) req.stream = true;
  if (typeof chat.user === 'string') req.metadata = { user_id: chat.user };

  const tools = (Array.isArray(chat.tools) ? chat.tools : []) as Json[];
  if (tools.length) {
    req.tools = tools.map((t) => {
      const fn = (t.function ?? {}) as Json;
      if (t.type !== 'function')
        throw new TranslationError(`tool type '${String(t.type)}' is not supported for Claude models`, 'tools');
      return {
        name: fn.name,
        ...(fn.description ? { description: fn.description } : {}),
        input_schema: fn.parameters ?? { type: 'object', properties: {} },
      };
    });
  }
  let choice: Json | undefined;
  const tc = chat.tool_choice as Json | string | undefined;
  if (tc === 'auto') choice = { type: 'auto' };
  else if (tc === 'required') choice = { type: 'any' };
  else if (tc === 'none') choice = { type: 'none' };
  else if (tc && typeof tc === 'object') choice = { type: 'tool', name: (tc.function as Json | undefined)?.name };
  if (chat.parallel_tool_calls === false && tools.length)
    choice = { ...(choice ?? { type: 'auto' }), disable_parallel_tool_use: true };
  if (choice) req.tool_choice = choice;

  const effort = chat.reasoning_effort;
  if (typeof effort === 'string' && REASONING_BUDGET[effort]) {
    const budget = REASONING_BUDGET[effort]!;
    req.thinking = { type: 'enabled', budget_tokens: budget };
    if ((req.max_tokens as number) <= budget) req.max_tokens = budget + 1024;
    delete req.temperature; // extended thinking requires the default temperature
  }
  return req;
}

export function finishReason(stop: unknown): string | null {
  switch (stop) {
    case 'end_turn':
    case 'stop_sequence':
    case 'pause_turn':
      return 'stop';
    case 'max_tokens':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    case null:
    case undefined:
      return null;
    default:
      return 'stop';
  }
}

export function chatUsageOf(u: Json): Json {
  const input = Number(u.input_tokens ?? 0);
  const read = Number(u.cache_read_input_tokens ?? 0);
  const write = Number(u.cache_creation_input_tokens ?? 0);
  const output = Number(u.output_tokens ?? 0);
  return {
    prompt_tokens: input + read + write,
    completion_tokens: output,
    total_tokens: input + read + write + output,
    prompt_tokens_details: { cached_tokens: read },
  };
}

/** Anthropic Message -> OpenAI chat.completion. */
export function messagesResponseToChat(msg: Json, opts: { model: string; created: number }): Json {
  let text = '';
  let reasoning = '';
  const toolCalls: Json[] = [];
  for (const b of (Array.isArray(msg.content) ? msg.content : []) as Json[]) {
    if (b.type === 'text') text += String(b.text ?? '');
    else if (b.type === 'thinking') reasoning += String(b.thinking ?? '');
    else if (b.type === 'tool_use')
      toolCalls.push({
        id: b.id,
        type: 'function',
        function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
      });
  }
  const message: Json = { role: 'assistant', content: text === '' && toolCalls.length ? null : text, refusal: null };
  if (toolCalls.length) message.tool_calls = toolCalls;
  if (reasoning) message.reasoning_content = reasoning;
  const out: Json = {
    id: `chatcmpl-${String(msg.id ?? '')}`,
    object: 'chat.completion',
    created: opts.created,
    model: opts.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason(msg.stop_reason) }],
  };
  if (msg.usage && typeof msg.usage === 'object') out.usage = chatUsageOf(msg.usage as Json);
  return out;
}

/** Anthropic SSE events in, chat.completion.chunk objects out. */
export class MessagesToChatStream {
  private readonly opts: { model: string; created: number; includeUsage: boolean };
  private id = 'chatcmpl-';
  private readonly toolIndexByBlock = new Map<number, number>();
  private toolCount = 0;
  private usageSoFar: Record<string, number> = {};
  done = false;
  error: Json | undefined;

  constructor(opts: { model: string; created: number; includeUsage: boolean }) {
    this.opts = opts;
  }

  usage(): Record<string, number> {
    return { ...this.usageSoFar };
  }

  private chunk(delta: Json, finish: string | null = null): Json {
    const c: Json = {
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.opts.created,
      model: this.opts.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    };
    if (this.opts.includeUsage) c.usage = null;
    return c;
  }

  private absorbUsage(u: unknown) {
    if (!u || typeof u !== 'object') return;
    for (const [k, v] of Object.entries(u as Json)) if (typeof v === 'number') this.usageSoFar[k] = v;
  }

  push(event: string, data: Json): Json[] {
    const type = String(data.type ?? event);
    switch (type) {
      case 'message_start': {
        const msg = (data.message ?? {}) as Json;
        this.id = `chatcmpl-${String(msg.id ?? '')}`;
        this.absorbUsage(msg.usage);
        return [this.chunk({ role: 'assistant', content: '' })];
      }
      case 'content_block_start': {
        const b = (data.content_block ?? {}) as Json;
        if (b.type === 'tool_use') {
          const index = this.toolCount++;
          this.toolIndexByBlock.set(Number(data.index), index);
          return [
            this.chunk({
              tool_calls: [{ index, id: b.id, type: 'function', function: { name: b.name, arguments: '' } }],
            }),
          ];
        }
        if (b.type === 'text' && typeof b.text === 'string' && b.text) return [this.chunk({ content: b.text })];
        return [];
      }
      case 'content_block_delta': {
        const d = (data.delta ?? {}) as Json;
        if (d.type === 'text_delta') return [this.chunk({ content: d.text })];
        if (d.type === 'thinking_delta') return [this.chunk({ reasoning_content: d.thinking })];
        if (d.type === 'input_json_delta') {
          const index = this.toolIndexByBlock.get(Number(data.index)) ?? 0;
          return [this.chunk({ tool_calls: [{ index, function: { arguments: d.partial_json } }] })];
        }
        return [];
      }
      case 'message_delta': {
        this.absorbUsage(data.usage);
        const d = (data.delta ?? {}) as Json;
        return [this.chunk({}, finishReason(d.stop_reason) ?? 'stop')];
      }
      case 'message_stop': {
        this.done = true;
        if (!this.opts.includeUsage) return [];
        return [
          {
            id: this.id,
            object: 'chat.completion.chunk',
            created: this.opts.created,
            model: this.opts.model,
            choices: [],
            usage: chatUsageOf(this.usageSoFar),
          },
        ];
      }
      case 'error':
        this.error = (data.error ?? data) as Json;
        return [];
      default:
        return []; // ping, content_block_stop, signature deltas
    }
  }
}
