// The media routes of the facade: embeddings and image generation (JSON), image edits and
// transcriptions (multipart, read here into parts for the RPC), speech (binary audio out).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import multipart from '@fastify/multipart';
import type { Client } from '@connectrpc/connect';
import type { Config } from '../config/config.ts';
import { InferenceService, type FormPart, type InferenceResponse } from '../gen/gateway/v1/inference_pb.js';
import { create } from '@bufbuild/protobuf';
import { FormPartSchema } from '../gen/gateway/v1/inference_pb.js';
import { keyFromHeaders, isWellFormedKey } from '../billing/keys.ts';
import { toGatewayError, UNAUTHORIZED_MESSAGE } from '../rpc/errors.ts';
import { openAIError, sendGatewayError } from './errors.ts';
import { writeChunk } from './write.ts';

type CallOptions = { headers: Record<string, string>; signal?: AbortSignal };

export interface MediaRouteDeps {
  inference: Client<typeof InferenceService>;
  uploads: Config['media'];
  relayUnary: (req: FastifyRequest, reply: FastifyReply, shape: 'openai', call: (body: Buffer, opts: CallOptions) => Promise<InferenceResponse>) => Promise<FastifyReply>;
  callHeaders: (req: FastifyRequest) => Record<string, string>;
}

export function registerMediaRoutes(app: FastifyInstance, deps: MediaRouteDeps): void {
  const { inference, relayUnary } = deps;

  app.post('/v1/embeddings', (req, reply) => relayUnary(req, reply, 'openai', (body, opts) => inference.createEmbedding({ body, requestId: req.id }, opts)));
  app.post('/v1/images/generations', (req, reply) => relayUnary(req, reply, 'openai', (body, opts) => inference.generateImage({ body, requestId: req.id }, opts)));
  app.post('/v1/audio/speech', (req, reply) => relaySpeech(req, reply));

  // Multipart only in this scope: every other route keeps its raw body bytes.
  app.register(async (scope) => {
    await scope.register(multipart, {
      limits: { fileSize: deps.uploads.uploadLimitBytes, files: deps.uploads.maxFiles, fieldSize: deps.uploads.fieldLimitBytes, fields: 64, parts: 128 },
      throwFileSizeLimit: true,
    });
    scope.post('/v1/images/edits', (req, reply) => relayMultipart(req, reply, (parts, opts) => inference.editImage({ parts, requestId: req.id }, opts)));
    scope.post('/v1/audio/transcriptions', (req, reply) => relayMultipart(req, reply, (parts, opts) => inference.transcribe({ parts, requestId: req.id }, opts)));
  });

  async function relayMultipart(req: FastifyRequest, reply: FastifyReply, call: (parts: FormPart[], opts: CallOptions) => Promise<InferenceResponse>) {
    reply.header('x-request-id', req.id);
    // Nothing is read from a caller without a well-formed key: uploads are large.
    const key = keyFromHeaders(str(req.headers.authorization), str(req.headers['x-api-key']));
    if (!key || !isWellFormedKey(key)) return refuse(req, reply, 401, openAIError(UNAUTHORIZED_MESSAGE, 'invalid_request_error', 'invalid_api_key'));
    if (!req.isMultipart()) {
      return refuse(req, reply, 400, openAIError(`${req.routeOptions.url} takes multipart/form-data (as the OpenAI SDKs send it).`, 'invalid_request_error', 'invalid_content_type'));
    }
    const parts: FormPart[] = [];
    try {
      for await (const part of req.parts()) {
        if (part.type === 'file') {
          const data = await part.toBuffer();
          parts.push(create(FormPartSchema, { name: part.fieldname, filename: part.filename || 'upload', contentType: part.mimetype, data }));
        } else {
          if (part.valueTruncated) {
            return refuse(req, reply, 413, openAIError(`The field '${part.fieldname}' is larger than the limit of ${deps.uploads.fieldLimitBytes} bytes.`, 'invalid_request_error', 'field_too_large', part.fieldname));
          }
          parts.push(create(FormPartSchema, { name: part.fieldname, data: Buffer.from(String(part.value ?? ''), 'utf8') }));
        }
      }
    } catch (err) {
      const status = (err as { statusCode?: number }).statusCode === 413 ? 413 : 400;
      const code = (err as { code?: string }).code;
      const message = status === 413
        ? code === 'FST_REQ_FILE_TOO_LARGE' ? `An uploaded file is larger than the limit of ${deps.uploads.uploadLimitBytes} bytes.` : `Too many parts in the upload (at most ${deps.uploads.maxFiles} files).`
        : 'The multipart/form-data body is malformed or incomplete.';
      return refuse(req, reply, status, openAIError(message, 'invalid_request_error', status === 413 ? 'request_too_large' : 'invalid_multipart'));
    }
    return relayUnary(req, reply, 'openai', (_body, opts) => call(parts, opts));
  }

  async function relaySpeech(req: FastifyRequest, reply: FastifyReply) {
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    const abort = new AbortController();
    const res = reply.raw;
    res.on('close', () => { if (!res.writableFinished) abort.abort(); });
    const events = inference.createSpeech({ body, requestId: req.id }, { headers: deps.callHeaders(req), signal: abort.signal })[Symbol.asyncIterator]();
    let first;
    try {
      first = await events.next();
    } catch (err) {
      if (abort.signal.aborted) return reply.hijack();
      return sendGatewayError(reply, withRequestId(toGatewayError(err), req.id), 'openai');
    }
    const start = first.value?.event.case === 'start' ? first.value.event.value : undefined;
    if (!start) return sendGatewayError(reply, withRequestId(toGatewayError(new Error('speech stream without a start')), req.id), 'openai');
    reply.hijack();
    res.writeHead(200, {
      'content-type': start.contentType,
      'x-request-id': start.requestId,
      'request-id': start.requestId,
      'x-gateway-cost-nano-usd': String(start.costNano),
    });
    try {
      for (let r = await events.next(); !r.done; r = await events.next()) {
        if (r.value.event.case === 'audio') await writeChunk(res, r.value.event.value);
      }
      res.end();
    } catch {
      // The audio broke off, or the caller left: cut the connection so the client sees an
      // incomplete body, not a short file, and let the speech call finish (it settles then).
      res.destroy();
      void events.return?.(undefined)?.catch(() => {});
    }
  }
}

/** Answers without reading the upload, then drains it for a while so the client reads the answer. */
function refuse(req: FastifyRequest, reply: FastifyReply, status: number, body: object) {
  req.raw.resume();
  setTimeout(() => { if (!req.raw.complete) req.raw.socket?.destroy(); }, 5_000).unref();
  return reply.code(status).type('application/json').send(body);
}

const str = (v: string | string[] | undefined) => (typeof v === 'string' ? v : undefined);

function withRequestId<T extends { requestId: string }>(ge: T, id: string): T {
  if (!ge.requestId) ge.requestId = id;
  return ge;
}
