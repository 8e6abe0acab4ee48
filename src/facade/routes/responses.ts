// POST /v1/responses: OpenAI's Responses API, JSON or SSE framed with event names (no [DONE]);
// errors in OpenAI's shape.
import type { FastifyPluginAsync } from 'fastify';
import { createClient } from '@connectrpc/connect';
import { InferenceService } from '../../gen/gateway/v1/inference_pb.js';
import { serverStream } from '../../rpc/server-stream.ts';
import type { InferenceRouteOptions } from '../answer.ts';
import { asksForStream } from '../stream-flag.ts';

export const responsesRoutes: FastifyPluginAsync<InferenceRouteOptions> = async (app, { transport, answers }) => {
  const inference = createClient(InferenceService, transport);

  app.post('/v1/responses', (req, reply) =>
    asksForStream(req.body as Buffer)
      ? answers.stream(req, reply, 'openai-events', (body, opts) =>
          serverStream(transport, InferenceService.method.streamResponse, { body, requestId: req.id }, opts),
        )
      : answers.unary(req, reply, 'openai', (body, opts) =>
          inference.createResponse({ body, requestId: req.id }, opts),
        ),
  );
};
