// HTTP to the providers: one keep-alive undici Agent for all of them, with the three timeouts
// that matter (connect, first byte, silence between body chunks).
import { Agent, errors, request, type Dispatcher, type FormData } from 'undici';
import type { Config } from '../config/config.ts';
import { gatewayError } from '../rpc/errors.ts';

export type UpstreamResponse = Dispatcher.ResponseData;
/** JSON text, bytes, or a multipart form (undici writes the boundary and content type). */
export type UpstreamBody = string | Uint8Array | FormData;

export class Upstream {
  readonly agent: Agent;

  constructor(config: Config) {
    this.agent = new Agent({
      connect: { timeout: config.upstream.connectTimeoutMs },
      headersTimeout: config.upstream.headersTimeoutMs,
      bodyTimeout: config.upstream.bodyTimeoutMs,
      keepAliveTimeout: 30_000,
      connections: 512,
    });
  }

  async post(url: string, headers: Record<string, string>, body: UpstreamBody, signal?: AbortSignal): Promise<UpstreamResponse> {
    return request(url, { method: 'POST', headers, body, signal, dispatcher: this.agent });
  }

  async get(url: string, headers: Record<string, string>, signal?: AbortSignal): Promise<UpstreamResponse> {
    return request(url, { method: 'GET', headers, signal, dispatcher: this.agent });
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** True for errors that mean the caller went away, not the upstream. */
export function isAbort(err: unknown): boolean {
  const e = err as { name?: string; code?: string };
  return e?.name === 'AbortError' || e?.code === 'UND_ERR_ABORTED' || e?.code === 'ABORT_ERR';
}

/** Maps a transport failure talking to the upstream to the status the caller gets. */
export function upstreamFailure(err: unknown, requestId: string) {
  if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError || err instanceof errors.ConnectTimeoutError) {
    return gatewayError({ httpStatus: 504, type: 'server_error', code: 'upstream_timeout', message: 'The upstream provider did not answer in time.', requestId });
  }
  return gatewayError({ httpStatus: 502, type: 'server_error', code: 'upstream_unreachable', message: 'The upstream provider connection failed.', requestId });
}
