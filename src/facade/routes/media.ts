// The media routes of the facade: embeddings and image generation (JSON), image edits and
// transcriptions (multipart, read here into parts for the RPC), speech (binary audio out).
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import multipart from '@fastify/multipart';
import { type Client, createClient } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import type { Config } from '../../config/config.ts';
import {
  type FormPart,
  FormPartSchema,
  type InferenceResponse,
  InferenceService,
} from '../../gen/gateway/v1/inference_pb.js';
import { refuseUnread } from '../access.ts';
import { type Answers, type CallOptions, callOptions, failureOf, type InferenceRouteOptions } from '../answer.ts';
import { openAIError, sendGatewayError } from '../errors.ts';

export interface MediaRouteOptions extends InferenceRouteOptions {
  uploads: Config['media'];
}

type Inference = Client<typeof InferenceService>;
type PartsCall = (parts: FormPart[], opts: CallOptions) => Promise<InferenceResponse>;

export const mediaRoutes: FastifyPluginAsync<MediaRouteOptions> = async (app, { transport, answers, uploads }) => {
  const inference = createClient(InferenceService, transport);

  app.post('/v1/embeddings', (req, reply) =>
    answers.unary(req, reply, 'openai', (body, opts) => inference.createEmbedding({ body, requestId: req.id }, opts)),
  );
  app.post('/v1/images/generations', (req, reply) =>
    answers.unary(req, reply, 'openai', (body, opts) => inference.generateImage({ body, requestId: req.id }, opts)),
  );
  app.post('/v1/audio/speech', (req, reply) => answerSpeech(inference, answers, req, reply));

  // Multipart only in this scope: every other route keeps its raw body bytes.
  app.register(async (scope) => {
    await scope.register(multipart, {
      limits: {
        fileSize: uploads.uploadLimitBytes,
        files: uploads.maxFiles,
        fieldSize: uploads.fieldLimitBytes,
        fields: 64,
        parts: 128,
      },
      throwFileSizeLimit: true,
    });
    const upload = (req: FastifyRequest, reply: FastifyReply, call: PartsCall) =>
      answerMultipart(req, reply, uploads, answers, call);
    scope.post('/v1/images/edits', (req, reply) =>
      upload(req, reply, (parts, opts) => inference.editImage({ parts, requestId: req.id }, opts)),
    );
    scope.post('/v1/audio/transcriptions', (req, reply) =>
      upload(req, reply, (parts, opts) => inference.transcribe({ parts, requestId: req.id }, opts)),
    );
  });
};

// The caller's key was confirmed before this runs (access.ts): only key holders are read, and
// never more than UPLOAD_TOTAL_LIMIT_BYTES of one request.
async function answerMultipart(
  req: FastifyRequest,
  reply: FastifyReply,
  uploads: Config['media'],
  answers: Answers,
  call: PartsCall,
) {
  if (!req.isMultipart()) {
    return refuseUnread(
      req,
      reply,
      400,
      openAIError(
        `${req.routeOptions.url} takes multipart/form-data (as the OpenAI SDKs send it).`,
        'invalid_request_error',
        'invalid_content_type',
      ),
    );
  }
  if (Number(req.headers['content-length']) > uploads.uploadTotalLimitBytes)
    return refuseUnread(req, reply, 413, uploadTooLarge(uploads));
  const parts = await readParts(req, reply, uploads);
  if (!Array.isArray(parts)) return parts; // refused
  return answers.unary(req, reply, 'openai', (_body, opts) => call(parts, opts));
}

/** The form's parts, or the refusal already sent when a part is too large or the form is malformed. */
async function readParts(
  req: FastifyRequest,
  reply: FastifyReply,
  uploads: Config['media'],
): Promise<FormPart[] | FastifyReply> {
  const { uploadLimitBytes, uploadTotalLimitBytes, fieldLimitBytes } = uploads;
  const tooLarge = () => refuseUnread(req, reply, 413, uploadTooLarge(uploads));
  const parts: FormPart[] = [];
  let total = 0;
  try {
    for await (const part of req.parts()) {
      if (part.type === 'file') {
        const chunks: Buffer[] = [];
        for await (const chunk of part.file as AsyncIterable<Buffer>) {
          total += chunk.length;
          // Leaving the loop destroys the part: the parser stops, and the rest is drained unread.
          if (total > uploadTotalLimitBytes) return tooLarge();
          chunks.push(chunk);
        }
        if (part.file.truncated) return refuseUnread(req, reply, 413, fileTooLarge(uploadLimitBytes));
        parts.push(
          create(FormPartSchema, {
            name: part.fieldname,
            filename: part.filename || 'upload',
            contentType: part.mimetype,
            data: Buffer.concat(chunks),
          }),
        );
      } else {
        if (part.valueTruncated) {
          return refuseUnread(
            req,
            reply,
            413,
            openAIError(
              `The field '${part.fieldname}' is larger than the limit of ${fieldLimitBytes} bytes.`,
              'invalid_request_error',
              'field_too_large',
              part.fieldname,
            ),
          );
        }
        const data = Buffer.from(String(part.value ?? ''), 'utf8');
        total += data.length;
        if (total > uploadTotalLimitBytes) return tooLarge();
        parts.push(create(FormPartSchema, { name: part.fieldname, data }));
      }
    }
  } catch (err) {
    const [status, body] = malformedUpload(err, uploads);
    return refuseUnread(req, reply, status, body);
  }
  return parts;
}

const uploadTooLarge = (uploads: Config['media']) =>
  openAIError(
    `The upload is larger than the limit of ${uploads.uploadTotalLimitBytes} bytes per request.`,
    'invalid_request_error',
    'request_too_large',
  );

const fileTooLarge = (limit: number) =>
  openAIError(
    `An uploaded file is larger than the limit of ${limit} bytes.`,
    'invalid_request_error',
    'request_too_large',
  );

/** The status and body for a form the multipart parser gave up on: too large, too many parts, or malformed. */
function malformedUpload(err: unknown, uploads: Config['media']): [number, object] {
  const status = (err as { statusCode?: number }).statusCode === 413 ? 413 : 400;
  const code = (err as { code?: string }).code;
  const message =
    status === 413
      ? code === 'FST_REQ_FILE_TOO_LARGE'
        ? `An uploaded file is larger than the limit of ${uploads.uploadLimitBytes} bytes.`
        : `Too many parts in the upload (at most ${uploads.maxFiles} files).`
      : 'The multipart/form-data body is malformed or incomplete.';
  return [
    status,
    openAIError(message, 'invalid_request_error', status === 413 ? 'request_too_large' : 'invalid_multipart'),
  ];
}

async function answerSpeech(inference: Inference, answers: Answers, req: FastifyRequest, reply: FastifyReply) {
  const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
  const abort = new AbortController();
  const res = reply.raw;
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  const events = inference
    .createSpeech({ body, requestId: req.id }, callOptions(req, abort.signal))
    [Symbol.asyncIterator]();
  let first;
  try {
    first = await events.next();
  } catch (err) {
    if (abort.signal.aborted) return reply.hijack();
    return sendGatewayError(reply, failureOf(err, req), 'openai');
  }
  const start = first.value?.event.case === 'start' ? first.value.event.value : undefined;
  if (!start) return sendGatewayError(reply, failureOf(new Error('speech stream without a start'), req), 'openai');
  reply.hijack();
  res.writeHead(200, {
    'content-type': start.contentType,
    'x-request-id': start.requestId,
    'request-id': start.requestId,
    'x-gateway-cost-nano-usd': String(start.costNano),
  });
  try {
    for (let r = await events.next(); !r.done; r = await events.next()) {
      if (r.value.event.case === 'audio') await answers.write(reply, r.value.event.value);
    }
    res.end();
  } catch {
    // The audio broke off, or the caller left: cut the connection so the client sees an
    // incomplete body, not a short file, and let the speech call finish (it settles then).
    res.destroy();
    void events.return?.(undefined)?.catch(() => {});
  }
}
