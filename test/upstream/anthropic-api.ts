// The simulator's Anthropic Messages API: POST /v1/messages (JSON and SSE) and
// /v1/messages/count_tokens, steered by the same `[sim …]` directives as the chat API.
// `tool=<name> input=<base64url JSON>` answers with that tool call; the turn after its
// tool_result is answered in text. It bills
// as Anthropic does: documents and images with a `url` or `file` source are read on its side and
// count as input (server-state.ts), base64 images as Claude bills them (vision.ts); the web
// search server tool runs there (`searches=N`, at most the tool's max_uses), counted in
// usage.server_tool_use; cache writes are split by TTL in usage.cache_creation (`cache_write=`
// 5-minute, `cache_write_1h=` 1-hour); thinking tokens
// (`reasoning=N`) show only in output_tokens; the final usage rides on message_delta, which
// `usage_delay=ms` holds back.
import type http from 'node:http';
import { randomBytes } from 'node:crypto';
import { anthropicRefs, resolveRefs } from './server-state.ts';
import { anthropicImageTokens } from './vision.ts';
import { messagesInputTokens } from './provider-tokens.ts';

type Json = Record<string, unknown>;
// Unref'd: a long stand-in pause (usage_delay) never keeps the test run alive.
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

export function anthropicError(
  res: http.ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
) {
  const body = JSON.stringify({ type: 'error', error: { type, message } });
  res.writeHead(status, {
    'content-type': 'application/json',
    'request-id': `req_sim_${randomBytes(6).toString('hex')}`,
    ...headers,
  });
  res.end(body);
}

function blocksText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Json[])
    .map((b) => (b?.type === 'text' ? String(b.text ?? '') : b?.type === 'tool_result' ? blocksText(b.content) : ''))
    .join('');
}

/** 3 per message + ceil(text bytes / 4), plus 3, the system prompt counted as a message. */
export function anthropicDirectives(body: Json): Record<string, string> {
  const messages = (Array.isArray(body.messages) ? body.messages : []) as Json[];
  const lastUser = [...messages].reverse().find((m) => m?.role === 'user');
  const match = /\[sim ([^\]]*)\]/.exec(blocksText(lastUser?.content));
  const out: Record<string, string> = {};
  for (const pair of match?.[1]?.trim().split(/\s+/) ?? []) {
    const eq = pair.indexOf('=');
    if (eq > 0) out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

const failCounts = new Map<string, number>();

/** Handles the Anthropic paths; false for any other path. `reported` is told the usage the reply reports. */
export async function handleAnthropic(
  res: http.ServerResponse,
  path: string,
  body: Json,
  reported?: (usage: Json) => void,
): Promise<boolean> {
  if (path !== '/v1/messages' && path !== '/v1/messages/count_tokens') return false;
  const d = anthropicDirectives(body);
  let fault = d.fault;
  if (fault && d.fail && d.id) {
    const seen = failCounts.get(d.id) ?? 0;
    failCounts.set(d.id, seen + 1);
    if (seen >= Number(d.fail)) fault = undefined;
  }
  const delay = Number(d.delay ?? 0);
  const after = Number(d.after ?? 0);
  const stream = body.stream === true && path === '/v1/messages';
  if (delay > 0) await sleep(delay);

  switch (fault) {
    case '500':
      return anthropicError(res, 500, 'api_error', 'Internal server error'), true;
    case '502':
    case '503':
      return anthropicError(res, Number(fault), 'api_error', 'Upstream unavailable'), true;
    case '529':
      return anthropicError(res, 529, 'overloaded_error', 'Overloaded'), true;
    case '400':
      return anthropicError(res, 400, 'invalid_request_error', 'messages: roles must alternate'), true;
    case '429':
      return (
        anthropicError(
          res,
          429,
          'rate_limit_error',
          'Number of request tokens has exceeded your per-minute rate limit',
          { 'retry-after': '1' },
        ),
        true
      );
    case 'odd_error':
      // A proxy in front of the API answering in OpenAI's shape.
      res.writeHead(400, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          error: { message: 'messages.0.content: document source not allowed', code: 'bad_document' },
        }),
      );
      return true;
    case 'hang':
      return true;
    case 'reset':
      if (!stream || after === 0) {
        res.socket?.destroy();
        return true;
      }
  }

  const refs = resolveRefs(anthropicRefs(body));
  if ('unknown' in refs)
    return anthropicError(res, 404, 'not_found_error', `File not found: ${refs.unknown.ref}`), true;
  const tools = (Array.isArray(body.tools) ? body.tools : []) as Json[];
  const searchTool = tools.find((t) => String(t?.type).startsWith('web_search_'));
  const serverTools = tools.some((t) => /^(web_search|web_fetch|code_execution|tool_search)_/.test(String(t?.type)));
  const searches = searchTool
    ? Math.min(Number(d.searches ?? 0), typeof searchTool.max_uses === 'number' ? searchTool.max_uses : Infinity)
    : 0;
  const visible = Number(d.prompt ?? messagesInputTokens(body)) + refs.tokens + anthropicImageTokens(body);
  // Each search is another pass over the context, plus the results it read.
  const prompt = visible * (1 + searches) + searches * 2_000;
  if (path === '/v1/messages/count_tokens') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ input_tokens: prompt }));
    return true;
  }

  const cacheRead = Number(d.cached ?? 0);
  const write5m = Number(d.cache_write ?? 0);
  const write1h = Number(d.cache_write_1h ?? 0);
  const usage: Json = {
    input_tokens: prompt,
    cache_creation_input_tokens: write5m + write1h,
    cache_read_input_tokens: cacheRead,
    cache_creation: { ephemeral_5m_input_tokens: write5m, ephemeral_1h_input_tokens: write1h },
    output_tokens: 0,
    service_tier: 'standard',
  };
  if (serverTools) usage.server_tool_use = { web_search_requests: searches, web_fetch_requests: 0 };
  const cap = typeof body.max_tokens === 'number' ? body.max_tokens : Infinity;
  const wanted = Number(d.tokens ?? 8);
  const n = Math.min(wanted, cap);
  // Thinking tokens are billed output; the caller sees (a summary of) them or nothing.
  const thinking = Math.max(0, Math.min(Number(d.reasoning ?? 0), cap - n));
  const words = Array.from({ length: n }, (_, i) => `w${i + 1}`);
  const toolName = pickTool(body, d);
  const stopReason = toolName ? 'tool_use' : cap < wanted ? 'max_tokens' : 'end_turn';
  const id = `msg_sim${randomBytes(10).toString('hex')}`;
  const model = String(body.model ?? '');
  const toolId = `toolu_${id.slice(-14)}`;
  // `input=<base64url JSON>` gives the tool call's input (e.g. a Bash command for Claude Code).
  const toolInput = d.input
    ? (JSON.parse(Buffer.from(d.input, 'base64url').toString('utf8')) as Json)
    : { echo: words.join(' ') };
  const noUsage = fault === 'no_usage';

  const searchBlocks: Json[] = [];
  for (let i = 0; i < searches; i++) {
    const useId = `srvtoolu_${id.slice(-10)}${i}`;
    searchBlocks.push({ type: 'server_tool_use', id: useId, name: 'web_search', input: { query: `query ${i + 1}` } });
    searchBlocks.push({
      type: 'web_search_tool_result',
      tool_use_id: useId,
      content: [
        {
          type: 'web_search_result',
          url: `https://example.com/${i}`,
          title: `Result ${i + 1}`,
          encrypted_content: 'c2lt',
          page_age: null,
        },
      ],
    });
  }
  const finalUsage: Json = { ...usage, output_tokens: n + thinking };
  if (fault === undefined) reported?.(finalUsage);

  if (!stream) {
    const content = [
      ...searchBlocks,
      ...(toolName
        ? [{ type: 'tool_use', id: toolId, name: toolName, input: toolInput }]
        : [{ type: 'text', text: words.join(' ') }]),
    ];
    const msg: Json = {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content,
      stop_reason: stopReason,
      stop_sequence: null,
    };
    if (!noUsage) msg.usage = finalUsage;
    res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${id}` }).end(JSON.stringify(msg));
    return true;
  }

  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'request-id': `req_${id}`,
  });
  res.flushHeaders();
  const send = (event: string, data: Json) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const errorEvent = () =>
    res.end(
      `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })}\n\n`,
    );
  if (fault === 'error_stream') {
    errorEvent();
    return true;
  }

  const startMsg: Json = {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: [],
    stop_reason: null,
    stop_sequence: null,
  };
  // message_start reports the input as known before any server tool ran.
  if (!noUsage)
    startMsg.usage = {
      ...usage,
      input_tokens: visible,
      output_tokens: 1,
      ...(serverTools ? { server_tool_use: { web_search_requests: 0, web_fetch_requests: 0 } } : {}),
    };
  send('message_start', { type: 'message_start', message: startMsg });
  send('ping', { type: 'ping' });
  searchBlocks.forEach((block, i) => {
    send('content_block_start', { type: 'content_block_start', index: i, content_block: block });
    send('content_block_stop', { type: 'content_block_stop', index: i });
  });
  const at = searchBlocks.length;
  if (toolName) {
    send('content_block_start', {
      type: 'content_block_start',
      index: at,
      content_block: { type: 'tool_use', id: toolId, name: toolName, input: {} },
    });
    const json = JSON.stringify(toolInput);
    const size = Math.max(1, Math.ceil(json.length / Math.max(1, n)));
    for (let i = 0; i < json.length; i += size) {
      if (delay > 0) await sleep(delay);
      send('content_block_delta', {
        type: 'content_block_delta',
        index: at,
        delta: { type: 'input_json_delta', partial_json: json.slice(i, i + size) },
      });
    }
  } else {
    send('content_block_start', { type: 'content_block_start', index: at, content_block: { type: 'text', text: '' } });
    for (let i = 0; i < words.length; i++) {
      if ((fault === 'reset' || fault === 'error_after') && i === after) break;
      if (delay > 0 && i > 0) await sleep(delay);
      if (res.destroyed) return true;
      send('content_block_delta', {
        type: 'content_block_delta',
        index: at,
        delta: { type: 'text_delta', text: i === 0 ? words[i] : ` ${words[i]}` },
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
  }
  send('content_block_stop', { type: 'content_block_stop', index: at });
  if (fault === 'stall') return true; // the text is out; then silence, no usage, no end
  if (Number(d.usage_delay ?? 0) > 0) await sleep(Number(d.usage_delay));
  if (res.destroyed) return true;
  // message_delta carries the cumulative usage: input grown by server tools, all output.
  const delta: Json = { type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null } };
  if (!noUsage)
    delta.usage = {
      input_tokens: finalUsage.input_tokens,
      cache_creation_input_tokens: finalUsage.cache_creation_input_tokens,
      cache_read_input_tokens: finalUsage.cache_read_input_tokens,
      output_tokens: finalUsage.output_tokens,
      ...(serverTools ? { server_tool_use: finalUsage.server_tool_use } : {}),
    };
  send('message_delta', delta);
  send('message_stop', { type: 'message_stop' });
  res.end();
  return true;
}

function pickTool(body: Json, d: Record<string, string>): string | undefined {
  const tools = (Array.isArray(body.tools) ? body.tools : []) as Json[];
  if (tools.length === 0) return undefined;
  const messages = (Array.isArray(body.messages) ? body.messages : []) as Json[];
  const last = messages.at(-1);
  if (Array.isArray(last?.content) && (last.content as Json[]).some((b) => b?.type === 'tool_result')) return undefined;
  if (d.tool) return d.tool;
  const choice = body.tool_choice as Json | undefined;
  if (choice?.type === 'tool') return String(choice.name);
  if (choice?.type === 'any') return String(tools[0]!.name);
  return undefined;
}
