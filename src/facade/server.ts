// The HTTP facade: OpenAI/Anthropic wire formats in, RPC calls to the services, the same wire
// formats out. It owns translation only: no money, no upstreams, no database.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { createClient, type Transport } from '@connectrpc/connect';
import { InferenceService } from '../gen/gateway/v1/inference_pb.js';
import { CatalogueService } from '../gen/gateway/v1/catalogue_pb.js';
import { toGatewayError } from '../rpc/errors.ts';
import { newRequestId } from '../inference/engine.ts';
import { openAIError, sendGatewayError } from './errors.ts';

export interface FacadeDeps {
  transport: Transport;
  log: Logger;
  bodyLimitBytes: number;
  /** Throws when a dependency (database, …) is not reachable. */
  ready: () => Promise<void>;
}

const CREATED = Math.floor(Date.parse('2026-01-01T00:00:00Z') / 1000);

export function buildFacade(deps: FacadeDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    // One log line per request, written by the onResponse hook below.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    bodyLimit: deps.bodyLimitBytes,
    // Our own ids, never the caller's: an echoed header is a log-injection vector.
    genReqId: () => newRequestId(),
    return503OnClosing: true,
  });
  const inference = createClient(InferenceService, deps.transport);
  const catalogue = createClient(CatalogueService, deps.transport);

  // Bodies stay bytes: the services parse them once, and forward them untouched.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  app.addHook('onResponse', (req, reply, done) => {
    req.log.info({ method: req.method, url: req.routeOptions.url ?? req.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request');
    done();
  });

  app.setErrorHandler((err: { statusCode?: number; code?: string; message: string }, req, reply) => {
    const status = err.statusCode ?? 500;
    reply.header('x-request-id', req.id);
    if (status === 413) return reply.code(413).send(openAIError(`The request body is larger than the limit of ${deps.bodyLimitBytes} bytes.`, 'invalid_request_error', 'request_too_large'));
    if (status >= 400 && status < 500) return reply.code(status).send(openAIError(err.message, 'invalid_request_error', err.code ?? null));
    req.log.error({ err }, 'unhandled facade error');
    return reply.code(500).send(openAIError('Internal gateway error.', 'server_error'));
  });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send(openAIError(`Unknown route: ${req.method} ${req.url.split('?')[0]}`, 'invalid_request_error', 'unknown_route')),
  );

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    try {
      await deps.ready();
      return { status: 'ready' };
    } catch (err) {
      return reply.code(503).send({ status: 'not_ready', reason: (err as Error).message });
    }
  });

  app.get('/v1/models', async () => {
    const { models } = await catalogue.listModels({ availableOnly: true });
    return { object: 'list', data: models.map((m) => ({ id: m.id, object: 'model', created: CREATED, owned_by: m.provider })) };
  });
  app.get<{ Params: { id: string } }>('/v1/models/:id', async (req, reply) => {
    try {
      const { model } = await catalogue.getModel({ id: req.params.id });
      if (!model?.available) throw new Error('unavailable');
      return { id: model.id, object: 'model', created: CREATED, owned_by: model.provider };
    } catch {
      return reply.code(404).send(openAIError(`The model '${req.params.id}' does not exist`, 'invalid_request_error', 'model_not_found', 'model'));
    }
  });

  app.post('/v1/chat/completions', async (req, reply) => chatCompletions(req, reply));

  async function chatCompletions(req: FastifyRequest, reply: FastifyReply) {
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    const headers = authHeaders(req);
    if (!wantsStream(body)) {
      try {
        const r = await inference.chatCompletion({ body, requestId: req.id }, { headers });
        return reply
          .header('x-request-id', r.charge?.requestId ?? req.id)
          .header('x-gateway-cost-nano-usd', String(r.charge?.costNano ?? 0n))
          .type('application/json')
          .send(Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength));
      } catch (err) {
        return sendGatewayError(reply, withRequestId(toGatewayError(err), req.id));
      }
    }

    // Streamed: wait for the first event before committing to a 200, so an upstream that fails
    // before its first chunk still gets a real error status.
    const abort = new AbortController();
    const res = reply.raw;
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const events = inference.streamChatCompletion({ body, requestId: req.id }, { headers, signal: abort.signal })[Symbol.asyncIterator]();
    let first: IteratorResult<Awaited<ReturnType<typeof events.next>>['value']>;
    try {
      first = await events.next();
    } catch (err) {
      const ge = withRequestId(toGatewayError(err), req.id);
      if (abort.signal.aborted) return reply.hijack();
      return sendGatewayError(reply, ge);
    }
    reply.hijack();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-request-id': first.value?.event.case === 'requestId' ? first.value.event.value : req.id,
      'x-accel-buffering': 'no',
    });
    let ended = false;
    try {
      for (let r = first; !r.done; r = await events.next()) {
        const ev = r.value.event;
        if (ev.case === 'data') await write(res, `data: ${Buffer.from(ev.value).toString('utf8')}\n\n`);
        else if (ev.case === 'error') { await write(res, `data: ${Buffer.from(ev.value).toString('utf8')}\n\n`); ended = true; }
      }
      if (!ended) await write(res, 'data: [DONE]\n\n');
    } catch (err) {
      if (!abort.signal.aborted) {
        const ge = toGatewayError(err);
        await write(res, `data: ${JSON.stringify(openAIError(ge.message, ge.type, ge.code || null))}\n\n`).catch(() => {});
      }
    } finally {
      res.end();
    }
    req.log.info({ method: req.method, url: '/v1/chat/completions', status: 200, ms: Math.round(reply.elapsedTime), stream: true }, 'request');
  }

  return app;
}

function authHeaders(req: FastifyRequest): Record<string, string> {
  const h: Record<string, string> = {};
  const a = req.headers.authorization;
  const x = req.headers['x-api-key'];
  if (typeof a === 'string') h.authorization = a;
  if (typeof x === 'string') h['x-api-key'] = x;
  return h;
}

/** Only a parsable body with "stream": true takes the streaming RPC; all else the unary one, which reports what is wrong. */
function wantsStream(body: Buffer): boolean {
  if (body.length === 0 || body.indexOf('"stream"') === -1) return false;
  try {
    return (JSON.parse(body.toString('utf8')) as { stream?: unknown })?.stream === true;
  } catch {
    return false;
  }
}

function withRequestId<T extends { requestId: string }>(ge: T, id: string): T {
  if (!ge.requestId) ge.requestId = id;
  return ge;
}

function write(res: import('node:http').ServerResponse, chunk: string): Promise<void> {
  if (res.destroyed) return Promise.reject(new Error('client gone'));
  if (res.write(chunk)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => { res.off('drain', ok); res.off('close', gone); err ? reject(err) : resolve(); };
    const ok = () => done();
    const gone = () => done(new Error('client gone'));
    res.once('drain', ok);
    res.once('close', gone);
  });
}
