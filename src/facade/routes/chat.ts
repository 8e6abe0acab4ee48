// POST /v1/chat/completions: OpenAI's chat completions, JSON or SSE (with [DONE]), for every chat
// model; the service translates for the models that speak another format.
import type { FastifyPluginAsync } from 'fastify';
import { createClient } from '@connectrpc/connect';
import { InferenceService } from '../../gen/gateway/v1/inference_pb.js';
import { serverStream } from '../../rpc/server-stream.ts';
import type { InferenceRouteOptions } from '../answer.ts';
import { asksForStream } from '../stream-flag.ts';

export const chatRoutes: FastifyPluginAsync<InferenceRouteOptions> = async (app, { transport, answers }) => {
  const inference = createClient(InferenceService, transport);

  app.post('/v1/chat/completions', (req, reply) =>
    asksForStream(req.body as Buffer)
      ? answers.stream(req, reply, 'openai', (body, opts) =>
          serverStream(transport, InferenceService.method.streamChatCompletion, { body, requestId: req.id }, opts),
        )
      : answers.unary(req, reply, 'openai', (body, opts) =>
          inference.chatCompletion({ body, requestId: req.id }, opts),
        ),
  );
};
