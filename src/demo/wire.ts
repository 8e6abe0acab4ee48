// How the demo provider answers on the wire: JSON, server-sent events, and each API's own error
// shape (OpenAI's, Anthropic's, Cohere's and Black Forest Labs'), as the providers write them.
import { randomBytes } from 'node:crypto';
import type http from 'node:http';

export type Json = Record<string, unknown>;

/** One request to the demo provider: its path, query and body as received. */
export interface DemoRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  /** The body as JSON (an object), or undefined when it is not one. */
  json: Json | undefined;
  /** This demo provider's own address, for the URLs it hands out (BFL's polling and image URLs). */
  baseUrl: string;
}

export type Handler = (req: DemoRequest, res: http.ServerResponse) => Promise<void> | void;

export const newId = (prefix: string) => `${prefix}${randomBytes(12).toString('hex')}`;
export const nowSeconds = () => Math.floor(Date.now() / 1000);

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Json = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...(headers as Record<string, string>),
  });
  res.end(text);
}

export function sendBytes(res: http.ServerResponse, contentType: string, bytes: Buffer): void {
  res.writeHead(200, { 'content-type': contentType, 'content-length': bytes.length }).end(bytes);
}

export function openAIError(res: http.ServerResponse, status: number, message: string, param: string | null = null) {
  const code = status === 401 ? 'invalid_api_key' : status === 404 ? 'not_found' : 'invalid_value';
  sendJson(res, status, { error: { message, type: 'invalid_request_error', param, code } });
}

export function anthropicError(res: http.ServerResponse, status: number, message: string) {
  const type = status === 401 ? 'authentication_error' : status === 404 ? 'not_found_error' : 'invalid_request_error';
  sendJson(res, status, { type: 'error', error: { type, message } }, { 'request-id': newId('req_demo') });
}

/** An event stream: headers now, then `event` lines (named, or data only as chat completions sends them). */
export function eventStream(res: http.ServerResponse) {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  res.flushHeaders();
  return {
    data(body: unknown): void {
      res.write(`data: ${typeof body === 'string' ? body : JSON.stringify(body)}\n\n`);
    },
    event(name: string, body: unknown): void {
      res.write(`event: ${name}\ndata: ${JSON.stringify(body)}\n\n`);
    },
    end(): void {
      res.end();
    },
  };
}

/** A multipart body as the Fetch API reads it; undefined when it is not one. */
export async function formOf(req: DemoRequest): Promise<FormData | undefined> {
  try {
    return await new Response(new Uint8Array(req.raw), {
      headers: { 'content-type': String(req.headers['content-type'] ?? '') },
    }).formData();
  } catch {
    return undefined;
  }
}
