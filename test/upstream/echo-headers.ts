// A provider (or the proxy or self-hosted server in front of it) that quotes the request's headers
// in its errors, credentials included: the instance mode `echoHeaders` (deployment-faults.ts).
//   POST /__sim/mode {"status":400,"echoHeaders":{"body":"json"}}   400 in the wire's error shape, the headers in its message
//   POST /__sim/mode {"status":503,"echoHeaders":{"body":"text"}}   503 text/plain, the headers in the text
//   POST /__sim/mode {"echoHeaders":{"stream":"first"}}             a 200 stream whose first event is an error quoting them
//   POST /__sim/mode {"echoHeaders":{"stream":"after"}}             the same error event after some text
// `encoding` says how the headers are quoted: `plain` (name: value; …), `percent` (name=value&…, the
// values percent-encoded) or `json` (the values JSON-escaped: every character as \uXXXX, `/` as
// \/; decoded by a JSON reader, as they are in a text/plain body). The message always has
// ECHO_PHRASE before the headers and ECHO_TAIL after, so a test can see the provider's words survive;
// `quote` adds words of the test's after the headers (a key the request no longer carries).
import type http from 'node:http';
import type { Wire } from './deployment-faults.ts';

export interface EchoHeaders {
  /** A status answer's body: the wire's JSON error shape (default) or text/plain. */
  body?: 'json' | 'text';
  encoding?: 'plain' | 'percent' | 'json';
  /** Instead of a status answer, a 200 stream with an error event quoting the headers: first, or after some text. */
  stream?: 'first' | 'after';
  /** Words quoted after the headers as they are (a value from an earlier request, e.g. a key since replaced). */
  quote?: string;
}

export const ECHO_PHRASE = 'Echo of your request for support: it came with the headers';
export const ECHO_TAIL = 'and nothing else we could use.';

/** What the mode is answering: the request's path (chat, responses or messages) and headers. */
export interface EchoedRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
}

/** Why `e` is not an echo mode, or undefined. */
export function echoProblem(e: unknown): string | undefined {
  if (e === null || typeof e !== 'object' || Array.isArray(e)) return 'echoHeaders must be an object';
  const { body, encoding, stream, quote } = e as Record<string, unknown>;
  if (quote !== undefined && typeof quote !== 'string') return 'echoHeaders.quote must be a string';
  if (body !== undefined && body !== 'json' && body !== 'text') return 'echoHeaders.body must be json or text';
  if (encoding !== undefined && !['plain', 'percent', 'json'].includes(encoding as string))
    return 'echoHeaders.encoding must be plain, percent or json';
  if (stream !== undefined && stream !== 'first' && stream !== 'after')
    return 'echoHeaders.stream must be first or after';
  return undefined;
}

/** Every character as \uXXXX, `/` as \/: valid inside a JSON string, and decoded by any JSON reader. */
function jsonEscaped(s: string): string {
  return [...s].map((c) => (c === '/' ? '\\/' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)).join('');
}

/** The request's headers as the message quotes them. */
function quoted(headers: http.IncomingHttpHeaders, encoding: EchoHeaders['encoding']): string {
  const pairs = Object.entries(headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v ?? '')]);
  if (encoding === 'percent') return pairs.map(([k, v]) => `${k}=${encodeURIComponent(v!)}`).join('&');
  if (encoding === 'json') return pairs.map(([k, v]) => `${k}: ${jsonEscaped(v!)}`).join('; ');
  return pairs.map(([k, v]) => `${k}: ${v}`).join('; ');
}

/** The message as text (a text/plain body: JSON escapes stay as they are written). */
function messageText(req: EchoedRequest, e: EchoHeaders): string {
  return `${ECHO_PHRASE} ${quoted(req.headers, e.encoding)}${e.quote ? ` ${e.quote}` : ''} ${ECHO_TAIL}`;
}

/** The message as a JSON string literal, its escapes (encoding json) written into the JSON. */
function messageJson(req: EchoedRequest, e: EchoHeaders): string {
  const q = quoted(req.headers, e.encoding);
  const extra = e.quote ? ` ${JSON.stringify(e.quote).slice(1, -1)}` : '';
  return `"${ECHO_PHRASE} ${e.encoding === 'json' ? q : JSON.stringify(q).slice(1, -1)}${extra} ${ECHO_TAIL}"`;
}

/** The error object of `wire`, written as JSON text around the message literal. */
function errorJson(wire: Wire, message: string): string {
  if (wire === 'anthropic') return `{"type":"error","error":{"type":"invalid_request_error","message":${message}}}`;
  if (wire === 'cohere') return `{"message":${message}}`;
  if (wire === 'bfl') return `{"detail":${message}}`;
  return `{"error":{"message":${message},"type":"invalid_request_error","param":null,"code":"echo"}}`;
}

/** Answers `status` quoting the request's headers, in the wire's error shape or as text. */
export function echoStatus(
  res: http.ServerResponse,
  status: number,
  headers: Record<string, string>,
  wire: Wire,
  req: EchoedRequest,
  e: EchoHeaders,
): void {
  const text = e.body === 'text' ? messageText(req, e) : errorJson(wire, messageJson(req, e));
  const type = e.body === 'text' ? 'text/plain; charset=utf-8' : 'application/json';
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** A 200 stream in the format of the request's path whose error event quotes its headers, first or after some text. */
export function echoStream(res: http.ServerResponse, wire: Wire, req: EchoedRequest, e: EchoHeaders): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  const message = messageJson(req, e);
  const event = (name: string | undefined, data: string) =>
    res.write(`${name ? `event: ${name}\n` : ''}data: ${data}\n\n`);
  if (wire === 'anthropic') {
    if (e.stream === 'after') {
      event(
        'message_start',
        '{"type":"message_start","message":{"id":"msg_echo","type":"message","role":"assistant","model":"claude-echo","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}',
      );
      event(
        'content_block_start',
        '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
      );
      event(
        'content_block_delta',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}',
      );
    }
    event('error', `{"type":"error","error":{"type":"api_error","message":${message}}}`);
  } else if (req.path.endsWith('/responses')) {
    if (e.stream === 'after') {
      event(
        'response.created',
        '{"type":"response.created","sequence_number":0,"response":{"id":"resp_echo","object":"response","status":"in_progress","model":"gpt-echo","output":[],"store":false}}',
      );
      event(
        'response.output_text.delta',
        '{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_echo","output_index":0,"content_index":0,"delta":"Hello"}',
      );
    }
    event('error', `{"type":"error","sequence_number":2,"code":"echo","message":${message},"param":null}`);
  } else {
    if (e.stream === 'after')
      event(
        undefined,
        '{"id":"chatcmpl-echo","object":"chat.completion.chunk","created":1,"model":"gpt-echo","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}',
      );
    event(undefined, `{"error":{"message":${message},"type":"server_error","param":null,"code":null}}`);
  }
  res.end();
}
