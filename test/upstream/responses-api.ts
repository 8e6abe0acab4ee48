// The simulator's OpenAI Responses API: POST /v1/responses (JSON and SSE), steered by the same
// `[sim …]` directives as the chat API, read from the last user input. Like the real API it
// keeps state: stored responses, conversations, prompts and files add their tokens to the input
// (server-state.ts), images in the body as OpenAI bills them (vision.ts); built-in web search
// runs on its side (`searches=N`, at most max_tool_calls), each call a `web_search_call` output
// item; reasoning tokens (`reasoning=N`) show only in the usage; `background: true` answers
// `queued` with no usage.
import type http from 'node:http';
import { randomBytes } from 'node:crypto';
import { resolveRefs, responsesRefs, seedRef, servedTier } from './server-state.ts';
import { responsesImageTokens } from './vision.ts';
import { responsesInputTokens } from './provider-tokens.ts';

type Json = Record<string, unknown>;
// Unref'd: a long stand-in pause (usage_delay) never keeps the test run alive.
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

function openAIError(
  res: http.ServerResponse,
  status: number,
  message: string,
  type: string,
  code: string | null,
  headers: Record<string, string> = {},
) {
  res
    .writeHead(status, { 'content-type': 'application/json', ...headers })
    .end(JSON.stringify({ error: { message, type, param: null, code } }));
}

function partsText(content: unknown): string {
  if (typeof content === 'string') return content;
  return ((Array.isArray(content) ? content : []) as Json[]).map((p) => String(p?.text ?? '')).join('');
}

function lastUserText(body: Json): string {
  if (typeof body.input === 'string') return body.input;
  const items = (Array.isArray(body.input) ? body.input : []) as Json[];
  const last = [...items].reverse().find((i) => i?.role === 'user');
  return partsText(last?.content);
}

const failCounts = new Map<string, number>();

/**
 * `reported` is told the usage the reply reports (what the provider bills). When the request
 * asks for `reasoning.encrypted_content` (Codex does, with store: false), the reply starts with
 * a reasoning item carrying opaque encrypted content, as the real API's does, and its
 * `reasoning=N` tokens (default 4) count as output.
 */
export async function handleResponses(
  res: http.ServerResponse,
  path: string,
  body: Json,
  reported?: (usage: Json) => void,
): Promise<boolean> {
  if (path !== '/v1/responses') return false;
  const m = /\[sim ([^\]]*)\]/.exec(lastUserText(body));
  const d: Record<string, string> = {};
  for (const pair of m?.[1]?.trim().split(/\s+/) ?? []) {
    const eq = pair.indexOf('=');
    if (eq > 0) d[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  let fault = d.fault;
  if (fault && d.fail && d.id) {
    const seen = failCounts.get(d.id) ?? 0;
    failCounts.set(d.id, seen + 1);
    if (seen >= Number(d.fail)) fault = undefined;
  }
  const delay = Number(d.delay ?? 0);
  const after = Number(d.after ?? 0);
  const stream = body.stream === true;
  if (delay > 0) await sleep(delay);
  switch (fault) {
    case '500':
    case '502':
    case '503':
      return (
        openAIError(res, Number(fault), 'The server had an error while processing your request.', 'server_error', null),
        true
      );
    case '400':
      return openAIError(res, 400, 'Invalid input.', 'invalid_request_error', 'invalid_value'), true;
    case '429':
      return (
        openAIError(res, 429, 'Rate limit reached.', 'requests', 'rate_limit_exceeded', { 'retry-after': '1' }), true
      );
    case 'odd_error':
      return (
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: 'input: unsupported item', status: 400 })),
        true
      );
    case 'hang':
      return true;
    case 'reset':
      if (!stream || after === 0) {
        res.socket?.destroy();
        return true;
      }
  }
  const refs = resolveRefs(responsesRefs(body));
  if ('unknown' in refs) {
    // As OpenAI answers: 400 previous_response_not_found for a response, 404 for anything else.
    const { ref, param } = refs.unknown;
    if (param === 'previous_response_id') {
      res.writeHead(400, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          error: {
            message: `Previous response with id '${ref}' not found.`,
            type: 'invalid_request_error',
            param,
            code: 'previous_response_not_found',
          },
        }),
      );
      return true;
    }
    const what = param === 'conversation' ? 'Conversation' : param === 'prompt' ? 'Prompt' : 'Item';
    const unstored =
      param === 'input' && body.store === false
        ? ' Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.'
        : '';
    res.writeHead(404, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        error: {
          message: `${what} with id '${ref}' not found.${unstored}`,
          type: 'invalid_request_error',
          param,
          code: null,
        },
      }),
    );
    return true;
  }

  const id = `resp_sim${randomBytes(12).toString('hex')}`;
  const created = Math.floor(Date.now() / 1000);
  const cap = typeof body.max_output_tokens === 'number' ? body.max_output_tokens : Infinity;
  const wanted = Number(d.tokens ?? 8);
  const n = Math.min(wanted, cap);
  // Codex asks for its reasoning back encrypted (store: false): a few reasoning tokens by default then.
  const wantsReasoning = Array.isArray(body.include) && body.include.includes('reasoning.encrypted_content');
  const reasoning = Math.max(0, Math.min(Number(d.reasoning ?? (wantsReasoning ? 4 : 0)), cap - n));
  const words = Array.from({ length: n }, (_, i) => `w${i + 1}`);
  const tools = (Array.isArray(body.tools) ? body.tools : []) as Json[];
  const searchTool = tools.some((t) => String(t?.type).startsWith('web_search'));
  const maxCalls = typeof body.max_tool_calls === 'number' ? body.max_tool_calls : Infinity;
  const searches = searchTool ? Math.min(Number(d.searches ?? 0), maxCalls) : 0;
  // Every search is another pass over the context, plus the results it read.
  const visible = Number(d.prompt ?? responsesInputTokens(body)) + refs.tokens + responsesImageTokens(body);
  const prompt = visible * (1 + searches) + searches * SEARCH_RESULT_TOKENS;
  const cached = Math.min(Number(d.cached ?? 0), prompt);
  const usage =
    fault === 'no_usage'
      ? null
      : {
          input_tokens: prompt,
          input_tokens_details: { cached_tokens: cached, cache_write_tokens: 0 },
          output_tokens: n + reasoning,
          output_tokens_details: { reasoning_tokens: reasoning },
          total_tokens: prompt + n + reasoning,
        };
  if (usage && fault === undefined) reported?.(usage);
  const tool = pickTool(body, d);
  const incomplete = !tool && cap < wanted;
  const text = words.join(' ');
  const reasoningItems: Json[] =
    reasoning > 0
      ? [
          {
            id: `rs_${id.slice(5)}`,
            type: 'reasoning',
            summary: [],
            ...(wantsReasoning ? { encrypted_content: randomBytes(48).toString('base64') } : {}),
          },
        ]
      : [];
  const searchItems: Json[] = Array.from({ length: searches }, (_, i) => ({
    id: `ws_${id.slice(8)}_${i}`,
    type: 'web_search_call',
    status: 'completed',
    action: { type: 'search', query: `query ${i + 1}` },
  }));
  const msgItem = {
    id: `msg_${id.slice(5)}`,
    type: 'message',
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
  const callItem = tool
    ? {
        id: `fc_${id.slice(5)}`,
        type: 'function_call',
        status: 'completed',
        call_id: `call_${id.slice(-12)}`,
        name: tool,
        arguments: JSON.stringify({ echo: text }),
      }
    : undefined;
  const base = (status: string, output: Json[], u: Json | null) => ({
    id,
    object: 'response',
    created_at: created,
    status,
    background: body.background === true,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: body.max_tool_calls ?? null,
    model: body.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    service_tier: servedTier(body.service_tier),
    store: body.store !== false,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: 1,
    truncation: 'disabled',
    usage: u,
    metadata: {},
  });
  const final = base(
    incomplete ? 'incomplete' : 'completed',
    [...reasoningItems, ...searchItems, ...(callItem ? [callItem] : [msgItem])],
    usage,
  );
  // Stored, the response is the conversation so far for a later previous_response_id.
  // Its output items can be named by id later (item_reference, reasoning without its encrypted content).
  if (body.store !== false && usage) {
    seedRef(id, prompt + n + reasoning);
    for (const item of final.output as Json[]) seedRef(String(item.id), item.type === 'reasoning' ? reasoning : n);
  }

  if (body.background === true && !stream) {
    // Accepted to run on the provider's side; the usage comes with the finished response, later.
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(base('queued', [], null)));
    return true;
  }
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(final));
    return true;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  res.flushHeaders();
  let seq = 0;
  const send = (type: string, fields: Json) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...fields })}\n\n`);
  const errorEvent = () =>
    res.end(
      `event: error\ndata: ${JSON.stringify({ type: 'error', code: 'server_error', message: 'The server had an error.', param: null, sequence_number: seq++ })}\n\n`,
    );
  if (fault === 'error_stream') {
    errorEvent();
    return true;
  }
  send('response.created', { response: base(body.background === true ? 'queued' : 'in_progress', [], null) });
  if (body.background === true) send('response.queued', { response: base('queued', [], null) });
  send('response.in_progress', { response: base('in_progress', [], null) });
  let index = 0;
  for (const item of [...reasoningItems, ...searchItems]) {
    send('response.output_item.added', { output_index: index, item: { ...item, status: 'in_progress' } });
    send('response.output_item.done', { output_index: index++, item });
  }
  if (callItem) {
    send('response.output_item.added', {
      output_index: index,
      item: { ...callItem, status: 'in_progress', arguments: '' },
    });
    const args = callItem.arguments;
    const size = Math.max(1, Math.ceil(args.length / 4));
    for (let i = 0; i < args.length; i += size)
      send('response.function_call_arguments.delta', {
        item_id: callItem.id,
        output_index: index,
        delta: args.slice(i, i + size),
      });
    send('response.function_call_arguments.done', { item_id: callItem.id, output_index: index, arguments: args });
    send('response.output_item.done', { output_index: index, item: callItem });
  } else {
    send('response.output_item.added', {
      output_index: index,
      item: { ...msgItem, status: 'in_progress', content: [] },
    });
    send('response.content_part.added', {
      item_id: msgItem.id,
      output_index: index,
      content_index: 0,
      part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
    });
    for (let i = 0; i < words.length; i++) {
      if ((fault === 'reset' || fault === 'error_after') && i === after) break;
      if (delay > 0 && i > 0) await sleep(delay);
      if (res.destroyed) return true;
      send('response.output_text.delta', {
        item_id: msgItem.id,
        output_index: index,
        content_index: 0,
        delta: i === 0 ? words[i] : ` ${words[i]}`,
        logprobs: [],
      });
    }
    if (fault === 'reset') {
      await sleep(50);
      res.socket?.destroy();
      return true;
    }
    if (fault === 'error_after') {
      errorEvent();
      return true;
    }
    send('response.output_text.done', {
      item_id: msgItem.id,
      output_index: index,
      content_index: 0,
      text,
      logprobs: [],
    });
    send('response.content_part.done', {
      item_id: msgItem.id,
      output_index: index,
      content_index: 0,
      part: msgItem.content[0],
    });
    send('response.output_item.done', { output_index: index, item: msgItem });
  }
  if (fault === 'stall') return true; // the text is out; then silence, no usage, no end
  if (Number(d.usage_delay ?? 0) > 0) await sleep(Number(d.usage_delay));
  if (res.destroyed) return true;
  send(incomplete ? 'response.incomplete' : 'response.completed', { response: final });
  res.end();
  return true;
}

/** Tokens of search results each web search adds to the context. */
const SEARCH_RESULT_TOKENS = 2_000;

function pickTool(body: Json, d: Record<string, string>): string | undefined {
  const tools = (Array.isArray(body.tools) ? body.tools : []) as Json[];
  const fnTools = tools.filter((t) => t?.type === 'function');
  if (fnTools.length === 0) return undefined;
  const items = (Array.isArray(body.input) ? body.input : []) as Json[];
  if (items.at(-1)?.type === 'function_call_output') return undefined;
  if (d.tool) return d.tool;
  const choice = body.tool_choice as Json | string | undefined;
  if (choice && typeof choice === 'object' && choice.type === 'function') return String(choice.name);
  if (choice === 'required') return String(fnTools[0]!.name);
  return undefined;
}
