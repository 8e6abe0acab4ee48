// POST /v1/messages and /v1/messages/count_tokens: Anthropic's messages, JSON or SSE, and its
// free token count; errors in Anthropic's shape.
import type { FastifyPluginAsync } from 'fastify';
import { createClient } from '@connectrpc/connect';
import { InferenceService } from '../../gen/gateway/v1/inference_pb.js';
import { serverStream } from '../../rpc/server-stream.ts';
import type { InferenceRouteOptions } from '../answer.ts';
import { asksForStream } from '../stream-flag.ts';

export const messagesRoutes: FastifyPluginAsync<InferenceRouteOptions> = async (app, { transport, answers }) => {
  const inference = createClient(InferenceService, transport);

  app.post('/v1/messages', (req, reply) =>
    asksForStream(req.body as Buffer)
      ? answers.stream(req, reply, 'anthropic', (body, opts) =>
          serverStream(transport, InferenceService.method.streamMessage, { body, requestId: req.id }, opts),
        )
      : answers.unary(req, reply, 'anthropic', (body, opts) =>
          inference.createMessage({ body, requestId: req.id }, opts),
        ),
  );
  app.post('/v1/messages/count_tokens', (req, reply) =>
    answers.unary(req, reply, 'anthropic', (body, opts) =>
      inference.countMessageTokens({ body, requestId: req.id }, opts),
    ),
  );
};
