// A local stand-in for the upstream providers, speaking OpenAI's chat completions wire format
// (JSON and SSE). Tests steer it per request with a directive in the last user message:
//   "hello [sim tokens=20 fault=reset after=3]"
// It records what it receives so tests can check what the gateway sent upstream.
//
// It bills as the providers do, not as the request body suggests: the prompt as each provider
// renders it, tools and schemas included (provider-tokens.ts), content referenced by URL or
// id counts as input (server-state.ts), images in the body as the provider bills them
// (vision.ts), reasoning tokens (`reasoning=N`) come only in the usage, after the visible text
// (`usage_delay=ms` holds the usage back), `service_tier` is echoed as the tier that served the
// request, and each provider keeps its own quirks: xAI reports reasoning tokens outside
// completion_tokens, DeepSeek honours `max_tokens` only and reports cache hits in its own fields.
//
// Several instances stand for several deployments of one model: `name` comes back on every
// answer as `x-sim-instance`, `azure: { apiVersion }` adds Azure OpenAI's URL scheme and api-key
// header (azure-api.ts), `apiKeys` (rotated at run time by setApiKeys) are accepted besides
// `apiKey`, and a test fails the whole instance through POST /__sim/mode or setMode()
// (deployment-faults.ts), or makes its port refuse connections with kill() until revive().
import http from 'node:http';
import type { Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { anthropicError, handleAnthropic } from './anthropic-api.ts';
import { handleResponses } from './responses-api.ts';
import { videoApi } from './video-api.ts';
import { formSummary, handleMedia } from './media-api.ts';
import { chatRefs, resolveRefs, seedRef, servedTier } from './server-state.ts';
import { chatImageTokens } from './vision.ts';
import { chatInputTokens } from './provider-tokens.ts';
import { azureRoute, servedBody } from './azure-api.ts';
import { deploymentFaults, parseMode, wireOf, type SimCounts, type SimMode } from './deployment-faults.ts';

export type { SimCounts, SimMode } from './deployment-faults.ts';

export interface RecordedRequest {
  method: string;
  path: string;
  /** The request target as received, query included (an Azure request's api-version). */
  url?: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  at: number;
  /** The usage the reply reported (what the provider bills for it), when it reported any. */
  usage?: unknown;
}

export interface Simulator {
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Forgets the recorded requests, the mode and the counters. */
  clear(): void;
  close(): Promise<void>;
  /** Fails the whole instance (deployment-faults.ts); replaces any mode set before. */
  setMode(mode: SimMode): void;
  clearMode(): void;
  /** Provider requests since the last clear(): received, answered 2xx, faulted by the mode. */
  counts(): SimCounts;
  /** Stops listening and destroys every open socket: the port refuses connections. */
  kill(): Promise<void>;
  /** Listens again on the same port after kill(). */
  revive(): Promise<void>;
  /** Replaces the keys accepted besides `apiKey`; a key no longer listed gets the provider's 401. */
  setApiKeys(keys: string[]): void;
}

export interface SimulatorOptions {
  port?: number;
  host?: string;
  apiKey?: string;
  /** Also accepted, besides `apiKey`; once given (or set by setApiKeys), keys are always checked. */
  apiKeys?: string[];
  /** `record: false` keeps no request log (the bench: 10,000 kept requests cost every later target memory and GC). */
  record?: boolean;
  /** Sent back on every answer as `x-sim-instance`, so a test sees which instance served. */
  name?: string;
  /** Serve Azure OpenAI's /openai/deployments/{deployment}/… URLs at this api-version (azure-api.ts). */
  azure?: { apiVersion: string };
}

type Json = Record<string, unknown>;
const MAX_RECORDED = 10_000;

/** `[sim a=1 b=x]` in the last user message -> { a: '1', b: 'x' }. */
export function parseDirectives(body: unknown): Record<string, string> {
  const messages = (body as Json | null)?.messages;
  if (!Array.isArray(messages)) return {};
  const lastUser = [...messages].reverse().find((m) => (m as Json)?.role === 'user') as Json | undefined;
  const m = /\[sim ([^\]]*)\]/.exec(textOf(lastUser?.content));
  const out: Record<string, string> = {};
  for (const pair of m?.[1]?.trim().split(/\s+/) ?? []) {
    const eq = pair.indexOf('=');
    if (eq > 0) out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((p) => ((p as Json)?.type === 'text' ? String((p as Json).text ?? '') : '')).join('');
  return '';
}

// Unref'd: a long stand-in pause (usage_delay) never keeps the test run alive.
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

function openAIError(
  res: http.ServerResponse,
  status: number,
  message: string,
  type: string,
  code: string | null,
  headers: Record<string, string> = {},
) {
  const body = JSON.stringify({ error: { message, type, param: null, code } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

const one = (h: string | string[] | undefined) => (typeof h === 'string' ? h : undefined);

export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const requests: RecordedRequest[] = [];
  const failCounts = new Map<string, number>();
  const sockets = new Set<Socket>();
  const faults = deploymentFaults();
  const videos = videoApi();
  let apiKeys = opts.apiKeys ? [...opts.apiKeys] : undefined;
  let selfUrl = '';
  // No key configured at all: any key, or none, is accepted, as the simulator always did.
  const keyOk = (key: string | undefined) =>
    (!opts.apiKey && apiKeys === undefined) ||
    (key !== undefined && ((!!opts.apiKey && key === opts.apiKey) || (apiKeys ?? []).includes(key)));

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks)).catch(() => res.destroy());
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  /** The simulator's own routes under /__sim/: never recorded, never faulted. */
  function control(req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer): void {
    if (url.pathname === '/__sim/refs' && req.method === 'POST') {
      const { ref, tokens } = JSON.parse(raw.toString('utf8')) as { ref: string; tokens: number };
      seedRef(ref, tokens);
      res.writeHead(204).end();
      return;
    }
    if (url.pathname === '/__sim/requests') {
      if (req.method === 'DELETE') {
        requests.length = 0;
        res.writeHead(204).end();
        return;
      }
      const since = Number(url.searchParams.get('since') ?? 0);
      const body = JSON.stringify(requests.filter((r) => r.at >= since));
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      return;
    }
    if (url.pathname === '/__sim/mode') {
      if (req.method === 'GET') {
        const body = JSON.stringify({ mode: faults.mode(), counts: faults.counts() });
        res.writeHead(200, { 'content-type': 'application/json' }).end(body);
        return;
      }
      if (req.method === 'DELETE') {
        faults.clearMode();
        res.writeHead(204).end();
        return;
      }
      if (req.method === 'POST') {
        const mode = parseMode(raw);
        if (typeof mode === 'string') return openAIError(res, 400, mode, 'invalid_request_error', null);
        faults.setMode(mode);
        res.writeHead(204).end();
        return;
      }
    }
    openAIError(res, 404, `Unknown request URL: ${req.method} ${url.pathname}`, 'invalid_request_error', 'unknown_url');
  }

  /** The key check of the OpenAI paths (Bearer); false when it answered the provider's 401. */
  function bearerOk(req: http.IncomingMessage, res: http.ServerResponse, fallbackDeployment: boolean): boolean {
    const bearer = /^Bearer (.*)$/.exec(req.headers.authorization ?? '')?.[1];
    const suffix = '-fallback';
    const key = !fallbackDeployment ? bearer : bearer?.endsWith(suffix) ? bearer.slice(0, -suffix.length) : undefined;
    if (keyOk(key)) return true;
    openAIError(res, 401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key');
    return false;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer): Promise<void> {
    // Before anything is written, so every answer (errors, JSON, SSE) says which instance served it.
    if (opts.name !== undefined) res.setHeader('x-sim-instance', opts.name);
    const url = new URL(req.url ?? '/', 'http://sim');
    // A second deployment of the same API under /fallback: its own key (`<key>-fallback`), and
    // it never fails, so tests can see a request move there.
    const fallbackDeployment = url.pathname.startsWith('/fallback/');
    if (fallbackDeployment) url.pathname = url.pathname.slice('/fallback'.length);
    // /__sim/videos… are the video stand-in's own (video-api.ts), further down.
    if (url.pathname.startsWith('/__sim/') && !url.pathname.startsWith('/__sim/videos'))
      return control(req, res, url, raw);

    let body: unknown = null;
    try {
      body = raw.length ? JSON.parse(raw.toString('utf8')) : null;
    } catch {
      body = null;
    }
    const multipart = String(req.headers['content-type'] ?? '').startsWith('multipart/form-data');
    if (multipart) body = await formSummary(req, raw);
    const recorded: RecordedRequest = {
      method: req.method ?? '',
      path: (fallbackDeployment ? '/fallback' : '') + url.pathname,
      url: req.url ?? '/',
      headers: req.headers,
      body,
      at: Date.now(),
    };
    const reported = (usage: unknown) => {
      recorded.usage = usage;
    };
    const azurePath = !!opts.azure && url.pathname.startsWith('/openai/');
    const provider = azurePath || /^\/(v1|cohere|bfl)\//.test(url.pathname);
    if (opts.record !== false && provider) {
      requests.push(recorded);
      if (requests.length > MAX_RECORDED) requests.splice(0, requests.length - MAX_RECORDED);
    }
    if (provider && (await faults.apply(res, wireOf(url.pathname), { path: url.pathname, headers: req.headers })))
      return;
    if (opts.azure && azurePath) {
      const route = azureRoute(req, res, url, opts.azure.apiVersion, keyOk);
      if (!route) return;
      // Served as the plain OpenAI operation; recorded above under the Azure path.
      url.pathname = route.path;
      const served = multipart ? body : servedBody(body, route.deployment);
      if (served !== body) raw = Buffer.from(JSON.stringify(served));
      body = served;
    }
    if (url.pathname.startsWith('/v1/messages')) {
      if (!keyOk(one(req.headers['x-api-key'])))
        return anthropicError(res, 401, 'authentication_error', 'invalid x-api-key');
      if (body === null || typeof body !== 'object')
        return anthropicError(res, 400, 'invalid_request_error', 'invalid JSON body');
      if (await handleAnthropic(res, url.pathname, body as Json, reported)) return;
    }
    // An Azure request was authenticated by its api-key header.
    if (!azurePath && url.pathname.startsWith('/v1/') && !bearerOk(req, res, fallbackDeployment)) return;
    if (await handleMedia(req, res, url, raw, { baseUrl: selfUrl, apiKey: opts.apiKey, keyOk, failCounts })) return;
    if (
      req.method === 'POST' &&
      body !== null &&
      typeof body === 'object' &&
      (await handleResponses(res, url.pathname, body as Json, reported))
    )
      return;
    if (await videos.handle(req, res, url.pathname, body)) return;

    if (req.method === 'GET' && url.pathname === '/v1/models') {
      const data = ['gpt-4o-mini', 'gpt-5.5', 'grok-4'].map((id) => ({
        id,
        object: 'model',
        created: 1_700_000_000,
        owned_by: 'sim',
      }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data }));
      return;
    }
    if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
      if (body === null || typeof body !== 'object')
        return openAIError(
          res,
          400,
          'We could not parse the JSON body of your request.',
          'invalid_request_error',
          null,
        );
      return chat(req, res, body as Json, fallbackDeployment, reported);
    }
    return openAIError(
      res,
      404,
      `Unknown request URL: ${req.method} ${url.pathname}`,
      'invalid_request_error',
      'unknown_url',
    );
  }

  async function chat(
    _req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Json,
    healthy = false,
    reported?: (usage: unknown) => void,
  ): Promise<void> {
    const d = parseDirectives(body);
    let fault = healthy ? undefined : d.fault;
    if (fault && d.fail && d.id) {
      const seen = failCounts.get(d.id) ?? 0;
      failCounts.set(d.id, seen + 1);
      if (seen >= Number(d.fail)) fault = undefined;
    }
    const delay = Number(d.delay ?? 0);
    const after = Number(d.after ?? 0);
    const stream = body.stream === true;
    if (delay > 0) await sleep(delay);

    switch (fault) {
      case '500':
      case '502':
      case '503':
        return openAIError(
          res,
          Number(fault),
          'The server had an error while processing your request.',
          'server_error',
          null,
        );
      case '400':
        return openAIError(
          res,
          400,
          "Invalid value for 'temperature': must be between 0 and 2.",
          'invalid_request_error',
          'invalid_value',
        );
      case '429':
        return openAIError(res, 429, 'Rate limit reached for requests.', 'requests', 'rate_limit_exceeded', {
          'retry-after': '1',
          'x-ratelimit-limit-requests': '60',
          'x-ratelimit-remaining-requests': '0',
          'x-ratelimit-reset-requests': '1s',
        });
      case 'odd_error': {
        // A provider (or a proxy in front of it) answering in a shape of its own.
        const text = JSON.stringify({
          detail: [
            { loc: ['body', 'messages', 0], msg: 'Input should be a valid list of content parts', type: 'list_type' },
          ],
        });
        res.writeHead(422, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
        return;
      }
      case 'text_error':
        res
          .writeHead(503, { 'content-type': 'text/plain' })
          .end('upstream connect error or disconnect/reset before headers. reset reason: overflow');
        return;
      case 'hang':
        return; // never answer; close() destroys the socket
      case 'reset':
        if (!stream || after === 0) {
          res.socket?.destroy();
          return;
        }
        break;
    }

    const refs = resolveRefs(chatRefs(body));
    if ('unknown' in refs)
      return openAIError(
        res,
        400,
        `Invalid file or URL '${refs.unknown.ref}'.`,
        'invalid_request_error',
        'invalid_value',
      );

    const model = String(body.model ?? '');
    const xai = model.startsWith('grok');
    const deepseek = model.startsWith('deepseek');
    const id = `chatcmpl-${randomBytes(12).toString('hex')}`;
    const created = Math.floor(Date.now() / 1000);
    // DeepSeek documents max_tokens only: a max_completion_tokens it is sent caps nothing.
    const cap = (deepseek ? body.max_tokens : (body.max_completion_tokens ?? body.max_tokens)) as number | undefined;
    const wanted = Number(d.tokens ?? 8);
    const n = typeof cap === 'number' ? Math.min(wanted, cap) : wanted;
    const finish = typeof cap === 'number' && cap < wanted ? 'length' : 'stop';
    // The cap bounds reasoning and visible tokens together.
    const reasoning = Math.max(0, Math.min(Number(d.reasoning ?? 0), typeof cap === 'number' ? cap - n : Infinity));
    const prompt = Number(d.prompt ?? chatInputTokens(body as Json)) + refs.tokens + chatImageTokens(body);
    const cached = Math.min(Number(d.cached ?? 0), prompt);
    const usage: Json = deepseek
      ? {
          prompt_tokens: prompt,
          completion_tokens: n + reasoning,
          total_tokens: prompt + n + reasoning,
          prompt_cache_hit_tokens: cached,
          prompt_cache_miss_tokens: prompt - cached,
          completion_tokens_details: { reasoning_tokens: reasoning },
        }
      : {
          // xAI counts reasoning outside completion_tokens (and inside total_tokens); OpenAI inside.
          prompt_tokens: prompt,
          completion_tokens: xai ? n : n + reasoning,
          total_tokens: prompt + n + reasoning,
          prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
          completion_tokens_details: {
            reasoning_tokens: reasoning,
            audio_tokens: 0,
            accepted_prediction_tokens: 0,
            rejected_prediction_tokens: 0,
          },
        };
    const serviceTier = servedTier(body.service_tier);
    const toolName = pickTool(body, d);
    const words = Array.from({ length: n }, (_, i) => `w${i + 1}`);
    const noUsage = fault === 'no_usage';
    const usageDelay = Number(d.usage_delay ?? 0);

    if (!stream) {
      const message = toolName
        ? {
            role: 'assistant',
            content: null,
            refusal: null,
            tool_calls: [
              {
                id: `call_${id.slice(-12)}`,
                type: 'function',
                function: { name: toolName, arguments: toolArgs(words) },
              },
            ],
          }
        : { role: 'assistant', content: words.join(' '), refusal: null, annotations: [] };
      const reply: Json = {
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message, logprobs: null, finish_reason: toolName ? 'tool_calls' : finish }],
        service_tier: serviceTier,
        system_fingerprint: 'fp_sim',
      };
      if (!noUsage) {
        reply.usage = usage;
        reported?.(usage);
      }
      const text = JSON.stringify(reply);
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(text),
        'x-request-id': `sim_${id}`,
      });
      res.end(text);
      return;
    }

    const includeUsage = (body.stream_options as Json | undefined)?.include_usage === true && !noUsage;
    const base = {
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      service_tier: serviceTier,
      system_fingerprint: 'fp_sim',
    };
    const send = (choices: unknown[], extra: Json = {}) => {
      const chunk: Json = { ...base, choices, ...extra };
      if (includeUsage && !('usage' in extra)) chunk.usage = null;
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    };
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.flushHeaders();

    if (fault === 'error_stream') {
      res.end(
        `data: ${JSON.stringify({ error: { message: 'The model is overloaded.', type: 'server_error', param: null, code: null } })}\n\n`,
      );
      return;
    }

    send([
      {
        index: 0,
        delta: { role: 'assistant', content: toolName ? null : '', refusal: null },
        logprobs: null,
        finish_reason: null,
      },
    ]);
    const pieces: Json[] = toolName
      ? toolDeltas(id, toolName, toolArgs(words), n)
      : words.map((w, i) => ({ content: i === 0 ? w : ` ${w}` }));
    for (let i = 0; i < pieces.length; i++) {
      if ((fault === 'reset' || fault === 'error_after') && i === after) break;
      if (delay > 0 && i > 0) await sleep(delay);
      // A long stream without delays still lets the headers and first chunks go out first.
      else if (i % 256 === 255) await new Promise((r) => setImmediate(r));
      if (res.destroyed) return;
      send([{ index: 0, delta: pieces[i], logprobs: null, finish_reason: null }]);
    }
    if (fault === 'reset') {
      // Let the chunks reach the peer first, as on a real network, then cut the connection.
      await sleep(50);
      res.socket?.destroy();
      return;
    }
    if (fault === 'error_after') {
      res.end(
        `data: ${JSON.stringify({ error: { message: 'The server had an error while processing your request.', type: 'server_error', param: null, code: null } })}\n\n`,
      );
      return;
    }
    send([{ index: 0, delta: {}, logprobs: null, finish_reason: toolName ? 'tool_calls' : finish }]);
    if (fault === 'stall') return; // the text is out; then silence, no usage, no end
    if (usageDelay > 0) await sleep(usageDelay);
    if (res.destroyed) return;
    if (includeUsage) {
      send([], { usage });
      reported?.(usage);
    }
    res.end('data: [DONE]\n\n');
  }

  const host = opts.host ?? '127.0.0.1';
  const listen = (p: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(p, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(opts.port ?? 0);
  const port = (server.address() as { port: number }).port;
  selfUrl = `http://${host}:${port}`;
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      if (!server.listening) return resolve(); // killed already
      server.close(() => resolve());
    });
  return {
    url: `http://${host}:${port}`,
    port,
    requests,
    clear: () => {
      requests.length = 0;
      faults.reset();
    },
    close: stop,
    setMode: (mode) => faults.setMode(mode),
    clearMode: () => faults.clearMode(),
    counts: () => faults.counts(),
    kill: stop,
    revive: () => (server.listening ? Promise.resolve() : listen(port)),
    setApiKeys: (keys) => {
      apiKeys = [...keys];
    },
  };
}

/** Which tool to call, if any: a `tool=` directive, a named tool_choice, or "required". */
function pickTool(body: Json, d: Record<string, string>): string | undefined {
  const tools = Array.isArray(body.tools) ? (body.tools as Json[]) : [];
  if (tools.length === 0) return undefined;
  const messages = Array.isArray(body.messages) ? (body.messages as Json[]) : [];
  if (messages.at(-1)?.role === 'tool') return undefined; // a tool result: answer in text
  if (d.tool) return d.tool;
  const choice = body.tool_choice as Json | string | undefined;
  if (choice && typeof choice === 'object') return String((choice.function as Json | undefined)?.name ?? '');
  if (choice === 'required') return String((tools[0]!.function as Json | undefined)?.name ?? '');
  return undefined;
}

function toolArgs(words: string[]): string {
  return JSON.stringify({ echo: words.join(' ') });
}

/** OpenAI's tool-call delta sequence: id, type and name first, then the arguments in pieces. */
function toolDeltas(id: string, name: string, args: string, parts: number): Json[] {
  const first = {
    tool_calls: [{ index: 0, id: `call_${id.slice(-12)}`, type: 'function', function: { name, arguments: '' } }],
  };
  const size = Math.max(1, Math.ceil(args.length / Math.max(1, parts)));
  const rest: Json[] = [];
  for (let i = 0; i < args.length; i += size)
    rest.push({ tool_calls: [{ index: 0, function: { arguments: args.slice(i, i + size) } }] });
  return [first, ...rest];
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const sim = await startSimulator({
    port: Number(process.env.PORT ?? 9090),
    ...(process.env.SIM_API_KEY ? { apiKey: process.env.SIM_API_KEY } : {}),
  });
  console.log(`upstream simulator on ${sim.url} (OpenAI base URL ${sim.url}/v1)`);
}
