// What the facade's routes share: one service call answered in the route's wire format. A unary
// call's reply is written as the service gave it; a stream's events are framed as SSE once the
// first one has arrived; a failure is the route's error body with its status, request id and a
// cost of 0. The routes themselves (routes/) only say which call, in which format. A stream
// whose client takes in nothing of what waits for it for STREAM_STALL_TIMEOUT_MS is cut: the
// service sees a caller who left (billed as one, its slots given back when it settles).
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ConnectError, type ContextValues, type Transport } from '@connectrpc/connect';
import type { InferenceEvent, InferenceResponse, SseEvent } from '../gen/gateway/v1/inference_pb.js';
import { toGatewayError } from '../errors/errors.ts';
import { callHeaders, callValues } from './access.ts';
import { errorBody, sendGatewayError, type WireShape } from './errors.ts';
import { scrub } from '../secrets/scrub.ts';

export type CallOptions = { headers: Headers; contextValues: ContextValues; signal?: AbortSignal };
export type UnaryCall = (body: Buffer, opts: CallOptions) => Promise<InferenceResponse>;
export type StreamCall = (body: Buffer, opts: CallOptions) => AsyncIterator<InferenceEvent>;
/** A stream's format: the Responses API speaks OpenAI errors but frames its stream with event names and no [DONE]. */
export type StreamFormat = WireShape | 'openai-events';

/** The catalogue id that serves a model name (itself, or an alias's model), or undefined. */
export type ServedModel = (name: string) => string | undefined;

export interface Answers {
  /** One call; its reply as the service wrote it, with the request id, served model and cost. */
  unary: (req: FastifyRequest, reply: FastifyReply, shape: WireShape, call: UnaryCall) => Promise<FastifyReply>;
  /** One streaming call, framed as SSE; errors before its first event keep their status. */
  stream: (
    req: FastifyRequest,
    reply: FastifyReply,
    format: StreamFormat,
    call: StreamCall,
  ) => Promise<FastifyReply | undefined>;
  /** Writes a chunk of a streamed answer with backpressure, cutting a client that takes in nothing (writeChunk). */
  write: (reply: FastifyReply, chunk: string | Uint8Array) => Promise<void>;
}

/** How long a stream's client may take in nothing before it is cut, and who is told. */
export interface StreamStall {
  /** STREAM_STALL_TIMEOUT_MS; 0: never. */
  ms: number;
  /** Told of each stream cut (a metric). */
  cut?: () => void;
}

/** What each inference route plugin is handed (routes/chat.ts, messages.ts, responses.ts, media.ts). */
export interface InferenceRouteOptions {
  transport: Transport;
  answers: Answers;
}

const DATA_FIELD = Buffer.from('data: ');
const EVENT_END = Buffer.from('\n\n');

/** `deploymentHeader`: answers name the deployment that served them (DEPLOYMENT_HEADER; off by default, as it tells callers the operator's suppliers). */
export function createAnswers(
  servedModel: ServedModel,
  deploymentHeader = false,
  stall: StreamStall = { ms: 0 },
): Answers {
  const write = (reply: FastifyReply, chunk: string | Uint8Array) =>
    writeChunk(reply.raw, chunk, stall.ms, () => {
      stall.cut?.();
      reply.request.log.warn(
        { requestId: reply.request.id, stallMs: stall.ms },
        'stream cut: its client took in nothing of it for STREAM_STALL_TIMEOUT_MS',
      );
    });

  async function unary(req: FastifyRequest, reply: FastifyReply, shape: WireShape, call: UnaryCall) {
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    try {
      const r = await call(body, { headers: callHeaders(req), contextValues: callValues(req) });
      const requestId = r.charge?.requestId || req.id;
      reply.header('x-request-id', requestId).header('request-id', requestId);
      const served = servedModelOf(req, servedModel);
      if (served) reply.header('x-gateway-model', served);
      if (r.charge) reply.header('x-gateway-cost-nano-usd', String(r.charge.costNano));
      if (deploymentHeader && r.charge?.deployment) reply.header('x-gateway-deployment', r.charge.deployment);
      return reply
        .type(r.contentType || 'application/json')
        .send(Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength));
    } catch (err) {
      return answerFailure(req, reply, err, shape);
    }
  }

  // Waits for the first event before committing to a 200, so an upstream that fails before its
  // first chunk still gets a real error status.
  async function stream(req: FastifyRequest, reply: FastifyReply, format: StreamFormat, call: StreamCall) {
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    const abort = new AbortController();
    const res = reply.raw;
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const shape: WireShape = format === 'anthropic' ? 'anthropic' : 'openai';
    const events = call(body, { headers: callHeaders(req), contextValues: callValues(req), signal: abort.signal });
    let first: IteratorResult<InferenceEvent>;
    try {
      first = await events.next();
    } catch (err) {
      if (abort.signal.aborted) return reply.hijack();
      return answerFailure(req, reply, err, shape);
    }
    reply.hijack();
    const requestId = first.value?.event.case === 'requestId' ? first.value.event.value : req.id;
    const deployment = deploymentHeader ? first.value?.deployment : undefined;
    const served = servedModelOf(req, servedModel);
    res.writeHead(200, {
      ...(served ? { 'x-gateway-model': served } : {}),
      ...(deployment ? { 'x-gateway-deployment': deployment } : {}),
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-request-id': requestId,
      'request-id': requestId,
      'x-accel-buffering': 'no',
    });
    await writeEvents(res, (chunk) => write(reply, chunk), first, events, format, abort.signal);
    // The onResponse hook counts and logs this request too (it runs for hijacked replies).
  }

  return { unary, stream, write };
}

/** The stream's events from the first on, as SSE, then [DONE] where the format has it; the response ends here. */
async function writeEvents(
  res: ServerResponse,
  write: (chunk: string | Uint8Array) => Promise<void>,
  first: IteratorResult<InferenceEvent>,
  events: AsyncIterator<InferenceEvent>,
  format: StreamFormat,
  aborted: AbortSignal,
): Promise<void> {
  let ended = false;
  try {
    for (let r = first; !r.done; r = await events.next()) {
      const ev = r.value.event;
      if (ev.case === 'data') await write(frame(ev.value));
      else if (ev.case === 'error') {
        await write(frame(ev.value));
        ended = true;
      }
    }
    if (!ended && format === 'openai') await write('data: [DONE]\n\n');
  } catch (err) {
    if (!aborted.aborted) {
      const ge = toGatewayError(err);
      const data = errorBody(
        format === 'anthropic' ? 'anthropic' : 'openai',
        500,
        ge.message,
        ge.type,
        ge.code || null,
      );
      const line = scrub(data);
      await write(format === 'openai' ? `data: ${line}\n\n` : `event: error\ndata: ${line}\n\n`).catch(() => {});
    }
  } finally {
    res.end();
  }
}

/** The event's bytes as they are (no decode to a string and encode back per chunk). */
const frame = (e: SseEvent) =>
  Buffer.concat([e.event ? Buffer.from(`event: ${e.event}\ndata: `) : DATA_FIELD, e.data, EVENT_END]);

/** A failed call, in the route's shape, with the upstream's rate-limit headers. */
export function answerFailure(req: FastifyRequest, reply: FastifyReply, err: unknown, shape: WireShape): FastifyReply {
  copyRateLimitHeaders(err, reply);
  return sendGatewayError(reply, failureOf(err, req), shape);
}

/** The gateway error a failure is answered with, carrying this request's id when it has none. */
export function failureOf(err: unknown, req: FastifyRequest) {
  const ge = toGatewayError(err);
  if (!ge.requestId) ge.requestId = req.id;
  return ge;
}

function copyRateLimitHeaders(err: unknown, reply: FastifyReply): void {
  ConnectError.from(err).metadata.forEach((value, name) => {
    if (name.startsWith('x-ratelimit-')) reply.header(name, value);
  });
}

/** The call options of a request: its headers and its authenticated caller (access.ts). */
export function callOptions(req: FastifyRequest, signal?: AbortSignal): CallOptions {
  return { headers: callHeaders(req), contextValues: callValues(req), signal };
}

/**
 * Writes to a raw HTTP response with backpressure: waits for 'drain', fails once the client is
 * gone. A client that takes in nothing for `stallMs` (the send buffer full and no 'drain': it
 * read less than the buffer's worth meanwhile) is cut: the connection is destroyed, so the call
 * sees a caller who left, and `stalled` is told. The timer exists only while a write waits.
 */
export function writeChunk(
  res: ServerResponse,
  chunk: string | Uint8Array,
  stallMs = 0,
  stalled?: () => void,
): Promise<void> {
  if (res.destroyed) return Promise.reject(new Error('client gone'));
  if (res.write(chunk)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const done = (err?: Error) => {
      clearTimeout(timer);
      res.off('drain', ok);
      res.off('close', gone);
      err ? reject(err) : resolve();
    };
    const ok = () => done();
    const gone = () => done(new Error('client gone'));
    res.once('drain', ok);
    res.once('close', gone);
    if (stallMs > 0)
      timer = setTimeout(() => {
        stalled?.();
        done(new Error('client stalled'));
        res.destroy();
      }, stallMs);
  });
}

/** The model named in a JSON body ('' when none); bounded, for labels and headers only. */
export function modelOf(req: FastifyRequest): string {
  // Asked twice per request (a header, the metric label): the scan runs once.
  return (req.modelName ??= scanModel(req.body));
}

function scanModel(body: unknown): string {
  if (!Buffer.isBuffer(body) || body.length === 0) return '';
  const m = /"model"\s*:\s*"([A-Za-z0-9._-]{1,64})"/.exec(body.toString('latin1', 0, Math.min(body.length, 4096)));
  return m ? m[1]! : '';
}

declare module 'fastify' {
  interface FastifyRequest {
    /** modelOf's answer, once asked (null until then); declared by app.ts. */
    modelName: string | null;
  }
}

/**
 * The catalogue model that serves the model a request names: the alias target, or the model
 * itself. Undefined for names the catalogue does not know (their metric label is 'other').
 */
export function servedModelOf(req: FastifyRequest, servedModel: ServedModel): string | undefined {
  const name = modelOf(req);
  if (name === '') return undefined;
  return servedModel(name);
}
