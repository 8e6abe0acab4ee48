// The video routes: OpenAI's own (POST /v1/videos, GET /v1/videos[/{id}[/content]],
// DELETE /v1/videos/{id}, as the SDK's client.videos.create / list / retrieve /
// downloadContent / delete call them), the gateway's POST /v1/videos/generations (waits for
// the finished MP4, 202 when it is not ready in time) and POST /v1/videos/{id}/cancel. They
// translate to VideoService calls; nothing else.
import { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { type Client, createClient, type ContextValues, type Transport } from '@connectrpc/connect';
import { VideoService, type Video, type VideoContentChunk } from '../../gen/gateway/v1/video_pb.js';
import { failureHttpStatus, FORM_ERROR_FIELD } from '../../video/wire.ts';
import { callValues } from '../access.ts';
import { failureOf } from '../answer.ts';
import { openAIError, sendGatewayError } from '../errors.ts';

type CallOptions = { contextValues: ContextValues; signal?: AbortSignal };
type Videos = Client<typeof VideoService>;
type ById = { Params: { id: string } };

/** OpenAI's Video object, plus the gateway's billing facts under x_gateway. */
export function openAIVideo(v: Video) {
  const failed = v.status === 'failed' || v.status === 'cancelled';
  return {
    id: v.id,
    object: 'video',
    created_at: Number(v.createdAt),
    completed_at: v.completedAt > 0n ? Number(v.completedAt) : null,
    error: failed && v.error ? { code: v.error.code, message: v.error.message } : null,
    expires_at: null,
    model: v.model,
    progress: v.progress,
    prompt: v.prompt,
    remixed_from_video_id: null,
    seconds: String(v.seconds),
    size: v.size,
    // OpenAI knows no "cancelled": a cancelled job is failed with error code "cancelled".
    status: v.status === 'cancelled' ? 'failed' : v.status,
    x_gateway: {
      status: v.status,
      request_id: v.requestId,
      hold_nano_usd: String(v.holdNano),
      cost_nano_usd: String(v.costNano),
      produced_seconds: v.producedMs > 0n ? msToSeconds(v.producedMs) : null,
      content_bytes: Number(v.contentBytes),
    },
  };
}

/** 5500n -> "5.5": exact, no float. */
function msToSeconds(ms: bigint): string {
  const frac = (ms % 1000n).toString().padStart(3, '0').replace(/0+$/, '');
  return `${ms / 1000n}${frac ? `.${frac}` : ''}`;
}

export interface VideoRouteOptions {
  transport: Transport;
}

// These routes read the raw body (JSON or the SDK's multipart form) themselves.
export const videoRoutes: FastifyPluginAsync<VideoRouteOptions> = async (app, { transport }) => {
  const videos = createClient(VideoService, transport);

  app.post('/v1/videos/generations', (req, reply) => generateVideo(videos, req, reply));

  app.post('/v1/videos', async (req, reply) => {
    try {
      const body = await jsonBody(req);
      const v = await videos.createVideo(
        { body, requestId: req.id, waitMs: 0, openaiDefaults: true, idempotencyKey: idempotencyKey(req) },
        callOptions(req, reply),
      );
      billingHeaders(reply, v);
      return reply.type('application/json').send(openAIVideo(v));
    } catch (err) {
      return sendGatewayError(reply, failureOf(err, req), 'openai');
    }
  });

  app.get<ListQuery>('/v1/videos', (req, reply) => listVideos(videos, req, reply));

  app.get<ById>('/v1/videos/:id', async (req, reply) => {
    try {
      const v = await videos.getVideo({ id: req.params.id }, callOptions(req, reply));
      billingHeaders(reply, v);
      return reply.type('application/json').send(openAIVideo(v));
    } catch (err) {
      return sendGatewayError(reply, failureOf(err, req), 'openai');
    }
  });

  app.get<ById & { Querystring: { variant?: string } }>('/v1/videos/:id/content', async (req, reply) => {
    const variant = req.query.variant;
    if (variant !== undefined && variant !== 'video') {
      return reply
        .code(400)
        .send(
          openAIError(
            `Invalid value for 'variant': only 'video' is available on this gateway.`,
            'invalid_request_error',
            'invalid_value',
            'variant',
          ),
        );
    }
    return sendContent(videos, req, reply, req.params.id);
  });

  app.delete<ById>('/v1/videos/:id', async (req, reply) => {
    try {
      const r = await videos.deleteVideo({ id: req.params.id }, callOptions(req, reply));
      return reply
        .header('x-request-id', req.id)
        .header('x-gateway-cost-nano-usd', '0')
        .type('application/json')
        .send({ id: r.id, object: 'video.deleted', deleted: r.deleted });
    } catch (err) {
      return sendGatewayError(reply, failureOf(err, req), 'openai');
    }
  });

  app.post<ById>('/v1/videos/:id/cancel', async (req, reply) => {
    try {
      const v = await videos.cancelVideo({ id: req.params.id }, callOptions(req, reply));
      billingHeaders(reply, v);
      return reply.type('application/json').send(openAIVideo(v));
    } catch (err) {
      return sendGatewayError(reply, failureOf(err, req), 'openai');
    }
  });
};

/** POST /v1/videos/generations: waits for the finished MP4 (Prefer: wait=…), 202 when it is not ready in time. */
async function generateVideo(videos: Videos, req: FastifyRequest, reply: FastifyReply) {
  const preferMs = preferWaitMs(req.headers.prefer);
  try {
    const body = await jsonBody(req);
    const v = await videos.createVideo(
      {
        body,
        requestId: req.id,
        waitMs: preferMs ?? 0xffff_ffff,
        openaiDefaults: false,
        idempotencyKey: idempotencyKey(req),
      },
      callOptions(req, reply),
    );
    billingHeaders(reply, v);
    if (v.status === 'completed') return await sendContent(videos, req, reply, v.id);
    if (v.status === 'failed' || v.status === 'cancelled') {
      const code = v.error?.code ?? 'upstream_error';
      const status = failureHttpStatus(code);
      return reply
        .code(status)
        .type('application/json')
        .send(
          openAIError(
            v.error?.message ?? 'The video job failed.',
            status < 500 ? 'invalid_request_error' : 'server_error',
            code,
          ),
        );
    }
    // Still running when the wait ended: where to look, and when.
    return reply
      .code(202)
      .header('location', `/v1/videos/${v.id}`)
      .header('retry-after', '5')
      .type('application/json')
      .send(openAIVideo(v));
  } catch (err) {
    return sendGatewayError(reply, failureOf(err, req), 'openai');
  }
}

type ListQuery = { Querystring: { limit?: string; after?: string; order?: string } };

async function listVideos(videos: Videos, req: FastifyRequest<ListQuery>, reply: FastifyReply) {
  try {
    const limit = req.query.limit === undefined ? 0 : Number(req.query.limit);
    if (!Number.isInteger(limit) || limit < 0)
      return reply
        .code(400)
        .send(
          openAIError(
            "Invalid value for 'limit': an integer between 1 and 100.",
            'invalid_request_error',
            'invalid_value',
            'limit',
          ),
        );
    const r = await videos.listVideos(
      { limit, after: req.query.after ?? '', order: req.query.order ?? '' },
      callOptions(req, reply),
    );
    const data = r.videos.map(openAIVideo);
    reply.header('x-gateway-cost-nano-usd', '0');
    return {
      object: 'list',
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: r.hasMore,
    };
  } catch (err) {
    return sendGatewayError(reply, failureOf(err, req), 'openai');
  }
}

/** The MP4, streamed; errors before the first byte keep their status. */
async function sendContent(videos: Videos, req: FastifyRequest, reply: FastifyReply, id: string) {
  const abort = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  const chunks = videos
    .getVideoContent({ id }, { contextValues: callValues(req), signal: abort.signal })
    [Symbol.asyncIterator]();
  let first: IteratorResult<VideoContentChunk>;
  try {
    first = await chunks.next();
  } catch (err) {
    return sendGatewayError(reply, failureOf(err, req), 'openai');
  }
  const start = first.value?.part.case === 'start' ? first.value.part.value : undefined;
  // The job was charged when it completed; its download costs nothing (the generations route says what the job cost).
  if (!reply.hasHeader('x-gateway-cost-nano-usd')) reply.header('x-gateway-cost-nano-usd', '0');
  reply
    .header('x-request-id', req.id)
    .header('x-video-id', start?.videoId ?? id)
    .type(start?.contentType || 'video/mp4');
  if (start) reply.header('content-length', String(start.size));
  async function* bytes() {
    for (let r = await chunks.next(); !r.done; r = await chunks.next()) {
      if (r.value.part.case === 'data')
        yield Buffer.from(r.value.part.value.buffer, r.value.part.value.byteOffset, r.value.part.value.byteLength);
    }
  }
  return reply.send(Readable.from(bytes()));
}

function callOptions(req: FastifyRequest, reply: FastifyReply): CallOptions {
  const abort = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  // The caller the onRequest hook authenticated (access.ts): the video service reads no key.
  return { contextValues: callValues(req), signal: abort.signal };
}

function billingHeaders(reply: FastifyReply, v: Video): void {
  reply
    .header('x-request-id', v.requestId)
    .header('request-id', v.requestId)
    .header('x-video-id', v.id)
    .header('x-gateway-cost-nano-usd', String(v.costNano));
}

/**
 * The body as JSON bytes for the service: JSON as sent, or the SDK's multipart form turned
 * into an object field by field (a file part becomes a marker the service refuses).
 */
async function jsonBody(req: FastifyRequest): Promise<Uint8Array> {
  const raw = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data/i.test(type)) return raw;
  try {
    const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
    const out: Record<string, unknown> = {};
    for (const [name, value] of form) out[name] = typeof value === 'string' ? value : { file: value.name };
    return Buffer.from(JSON.stringify(out));
  } catch (err) {
    return Buffer.from(JSON.stringify({ [FORM_ERROR_FIELD]: (err as Error).message }));
  }
}

/** The caller's Idempotency-Key header ('' without one; the service checks its form). */
function idempotencyKey(req: FastifyRequest): string {
  const v = req.headers['idempotency-key'];
  return Array.isArray(v) ? v.join(',') : (v ?? '');
}

/** RFC 7240 `Prefer: wait=<seconds>`: how long the caller is willing to wait. */
function preferWaitMs(prefer: string | string[] | undefined): number | undefined {
  const text = Array.isArray(prefer) ? prefer.join(',') : prefer;
  const m = text ? /(?:^|[,;\s])wait\s*=\s*(\d{1,6})/i.exec(text) : null;
  return m ? Number(m[1]) * 1000 : undefined;
}
