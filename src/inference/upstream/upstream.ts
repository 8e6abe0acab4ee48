// HTTP to the providers: one keep-alive undici Agent for all of them, with the three timeouts
// that matter (connect, first byte, silence between body chunks).
import type { Span } from '../../tracing/spans.ts';
import { Agent, errors, request, type Dispatcher, type FormData } from 'undici';
import type { Config } from '../../config/config.ts';
import { gatewayError } from '../../errors/errors.ts';

/** An upstream POST's answer: the status and headers, and a body to read once. */
export interface UpstreamResponse {
  statusCode: number;
  headers: Dispatcher.ResponseData['headers'];
  body: ReplyBody;
  /** The attempt's span (tracing on): the answer's model, id and finish reasons go on it as it is read. */
  span?: Span;
}
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

  /**
   * POST on the dispatcher itself, not undici's request(): its answer body is a Node Readable in
   * an async-hooks scope, a cost on every call (docs/benchmark.md); ReplyBody hands the
   * chunks over as they come. Aborting `signal` stops the call (with the signal's reason) at
   * any point, as request() does.
   */
  post(
    url: string,
    headers: Record<string, string>,
    body: UpstreamBody,
    signal?: AbortSignal,
    headersTimeoutMs?: number,
  ): Promise<UpstreamResponse> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const { origin, path } = originAndPath(url);
    const call = new ReplyBody(signal);
    const answered = call.answered();
    this.agent.dispatch(
      {
        origin,
        path,
        method: 'POST',
        headers,
        body: body as Dispatcher.DispatchOptions['body'],
        // A provider's own timeout (the book's timeoutMs) over the agent's.
        ...(headersTimeoutMs !== undefined ? { headersTimeout: headersTimeoutMs } : {}),
      },
      call,
    );
    return answered;
  }

  get(url: string, headers: Record<string, string>, signal?: AbortSignal): Promise<Dispatcher.ResponseData> {
    return request(url, { method: 'GET', headers, signal, dispatcher: this.agent });
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

const splitUrls = new Map<string, { origin: string; path: string }>();

/** Provider URLs are a handful of constant strings: each is split once. */
function originAndPath(url: string): { origin: string; path: string } {
  let s = splitUrls.get(url);
  if (!s) {
    const u = new URL(url);
    s = { origin: u.origin, path: u.pathname + u.search };
    if (splitUrls.size < 1_000) splitUrls.set(url, s);
  }
  return s;
}

/** Body bytes a slow reader may leave unread before the upstream socket is paused. */
const HIGH_WATER = 64 * 1024;
/** What dump() reads to keep the connection; past it the call is cut. */
const DUMP_LIMIT = 128 * 1024;
const READER_LEFT = Object.assign(new Error('the reader stopped reading the upstream answer'), { name: 'AbortError' });

type Waiter<T> = { resolve: (v: T) => void; reject: (e: unknown) => void };

/**
 * One upstream call: undici's handler for it and its answer's body. The body is read once, as
 * chunks (async iteration, paused upstream while HIGH_WATER bytes wait unread), as a whole
 * (bytes, text), or dropped (dump).
 */
export class ReplyBody implements Dispatcher.DispatchHandler, AsyncIterator<Buffer>, AsyncIterable<Buffer> {
  private readonly signal: AbortSignal | undefined;
  private controller: Dispatcher.DispatchController | undefined;
  /** Set when the signal fired before undici started the call. */
  private reason: unknown;
  private head: Waiter<UpstreamResponse> | undefined;
  private readonly chunks: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private failed: { err: unknown } | undefined;
  private reader: Waiter<IteratorResult<Buffer>> | undefined;
  /** Whole-body reads and dump(): wait for the end, keep reading meanwhile. */
  private whole: Waiter<void> | undefined;
  private discarding = false;
  private discarded = 0;
  private readonly onAbort = () => {
    const reason = this.signal!.reason;
    if (this.controller) this.controller.abort(reason);
    else this.reason = reason;
  };

  constructor(signal: AbortSignal | undefined) {
    this.signal = signal;
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  answered(): Promise<UpstreamResponse> {
    return new Promise((resolve, reject) => {
      this.head = { resolve, reject };
    });
  }

  // undici's side.
  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.reason !== undefined) controller.abort(this.reason as Error);
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    headers: Dispatcher.ResponseData['headers'],
  ): void {
    if (statusCode < 200) return; // 1xx: the answer is still to come
    const head = this.head!;
    this.head = undefined;
    head.resolve({ statusCode, headers, body: this });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.discarding) {
      this.discarded += chunk.length;
      if (this.discarded > DUMP_LIMIT) controller.abort(READER_LEFT);
      return;
    }
    const r = this.reader;
    if (r) {
      this.reader = undefined;
      r.resolve({ value: chunk, done: false });
      return;
    }
    this.chunks.push(chunk);
    this.queued += chunk.length;
    if (this.queued >= HIGH_WATER && !this.whole) controller.pause();
  }

  onResponseEnd(): void {
    this.ended = true;
    this.wakeWaiters();
  }

  onResponseError(_c: Dispatcher.DispatchController | null, err: Error): void {
    if (this.head) {
      const head = this.head;
      this.head = undefined;
      this.signal?.removeEventListener('abort', this.onAbort);
      head.reject(err);
      return;
    }
    this.failed ??= { err };
    this.wakeWaiters();
  }

  /** The call is over: wake whoever waits. */
  private wakeWaiters(): void {
    this.signal?.removeEventListener('abort', this.onAbort);
    const r = this.reader;
    this.reader = undefined;
    if (r) {
      if (this.failed) r.reject(this.failed.err);
      else r.resolve({ value: undefined, done: true });
    }
    const w = this.whole;
    this.whole = undefined;
    if (w) {
      if (this.failed && !this.discarding) w.reject(this.failed.err);
      else w.resolve();
    }
  }

  // The reader's side.
  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return this;
  }

  next(): Promise<IteratorResult<Buffer>> {
    const chunk = this.chunks.shift();
    if (chunk) {
      this.queued -= chunk.length;
      if (this.queued === 0 && this.controller?.paused) this.controller.resume();
      return Promise.resolve({ value: chunk, done: false });
    }
    if (this.failed) return Promise.reject(this.failed.err);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.reader = { resolve, reject };
    });
  }

  /** The reader stopped early (a `break` out of `for await`): the rest is not wanted. */
  return(): Promise<IteratorResult<Buffer>> {
    if (!this.ended && !this.failed) this.controller?.abort(READER_LEFT);
    return Promise.resolve({ value: undefined, done: true });
  }

  private untilEnd(): Promise<void> {
    if (this.ended || (this.failed && this.discarding)) return Promise.resolve();
    if (this.failed) return Promise.reject(this.failed.err);
    const done = new Promise<void>((resolve, reject) => {
      this.whole = { resolve, reject };
    });
    if (this.controller?.paused) this.controller.resume();
    return done;
  }

  async bytes(): Promise<Buffer> {
    await this.untilEnd();
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks.length = 0;
    this.queued = 0;
    return all;
  }

  /** As undici's text(): UTF-8, a BOM skipped, invalid sequences replaced. */
  async text(): Promise<string> {
    const b = await this.bytes();
    return b.toString('utf8', bomLength(b));
  }

  /** Drops the body, reading up to DUMP_LIMIT so the connection can be used again; never fails. */
  dump(): Promise<void> {
    this.discarding = true;
    this.discarded = this.queued;
    this.chunks.length = 0;
    this.queued = 0;
    if (this.discarded > DUMP_LIMIT) this.controller?.abort(READER_LEFT);
    return this.untilEnd();
  }
}

/** 3 when `b` starts with a UTF-8 byte order mark (which text decoding skips), else 0. */
export function bomLength(b: Uint8Array): number {
  return b.length > 2 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf ? 3 : 0;
}

/** Maps a transport failure talking to the upstream to the status the caller gets. */
export function upstreamFailure(err: unknown, requestId: string) {
  if (
    err instanceof errors.HeadersTimeoutError ||
    err instanceof errors.BodyTimeoutError ||
    err instanceof errors.ConnectTimeoutError
  ) {
    return gatewayError({
      httpStatus: 504,
      type: 'server_error',
      code: 'upstream_timeout',
      message: 'The upstream provider did not answer in time.',
      requestId,
    });
  }
  return gatewayError({
    httpStatus: 502,
    type: 'server_error',
    code: 'upstream_unreachable',
    message: 'The upstream provider connection failed.',
    requestId,
  });
}
