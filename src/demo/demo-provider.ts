// `npm start -- --demo`: a stand-in for every shipped provider, so the gateway can be tried
// without a provider key. An HTTP server in the gateway's own process, on a loopback port of its
// own, that the shipped providers' base URLs point at (as `<NAME>_BASE_URL` would) with a demo
// credential (as `<NAME>_API_KEY` would). It speaks each provider's wire format (chat completions,
// Messages, Responses, JSON and SSE with their usage; embeddings, Cohere's too; gpt-image and
// FLUX images; transcriptions and speech; sora-2 videos), answers deterministically (the prompt's
// words repeated, media of the size or length asked) and reports usage as a provider would, which
// the gateway bills at the price book's prices like any other. Everything in between (keys,
// holds, rate limits, settlement, the console) is the real gateway.
//
// It is an edge of its own (scripts/import-layers.ts): a server, imported by the process alone,
// reading the gateway's token counter and audio reader so what it reports is what the gateway counts.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config, ProviderName } from '../config/config.ts';
import { speech, transcriptions } from './audio.ts';
import { chatCompletions } from './chat.ts';
import { cohereEmbed, embeddings } from './embeddings.ts';
import { fluxCreate, fluxImage, fluxResult, imageEdits, imageGenerations } from './images.ts';
import { countTokens, messages } from './messages.ts';
import { responses } from './responses.ts';
import { createVideo, videoJob } from './video.ts';
import { anthropicError, openAIError, type DemoRequest, type Handler, type Json } from './wire.ts';

/** Each shipped provider's base URL under the demo's address; the dialect adds its own paths. */
const BASE_PATHS: Record<ProviderName, string> = {
  openai: '/v1',
  anthropic: '',
  xai: '/v1',
  deepseek: '/v1',
  cohere: '',
  bfl: '/bfl/v1',
};

/** The providers the demo answers for: every shipped one. */
export const DEMO_PROVIDERS: readonly ProviderName[] = Object.keys(BASE_PATHS) as ProviderName[];

/** Method and path (a pattern where it holds an id) to the handler. */
const ROUTES: [string, RegExp, Handler][] = [
  ['POST', /^\/v1\/chat\/completions$/, chatCompletions],
  ['POST', /^\/v1\/responses$/, responses],
  ['POST', /^\/v1\/messages$/, messages],
  ['POST', /^\/v1\/messages\/count_tokens$/, countTokens],
  ['POST', /^\/v1\/embeddings$/, embeddings],
  ['POST', /^\/v2\/embed$/, cohereEmbed],
  ['POST', /^\/v1\/images\/generations$/, imageGenerations],
  ['POST', /^\/v1\/images\/edits$/, imageEdits],
  ['POST', /^\/v1\/audio\/transcriptions$/, transcriptions],
  ['POST', /^\/v1\/audio\/speech$/, speech],
  ['POST', /^\/v1\/videos$/, createVideo],
  ['GET', /^\/v1\/videos\/[^/]+(\/content)?$/, videoJob],
  ['DELETE', /^\/v1\/videos\/[^/]+$/, videoJob],
  ['GET', /^\/bfl\/v1\/get_result$/, fluxResult],
  ['POST', /^\/bfl\/v1\/[\w.-]+$/, fluxCreate],
  ['GET', /^\/bfl\/images\/\w+\.png$/, fluxImage],
];

/**
 * A credential in one of the headers providers take it in: Bearer (OpenAI, xAI, DeepSeek, Cohere),
 * x-api-key (Anthropic), x-key (BFL). Any value will do: nothing real is behind the demo, and a
 * credential stored for a shipped provider (`providers set-credential`) goes on working with it.
 */
function hasCredential(h: http.IncomingHttpHeaders): boolean {
  const bearer = /^Bearer (\S+)$/.exec(String(h.authorization ?? ''))?.[1];
  return [bearer, h['x-api-key'], h['x-key'], h['api-key']].some((v) => typeof v === 'string' && v !== '');
}

export interface DemoProvider {
  url: string;
  /** `config` with the shipped providers pointed at this server and its credential, their fallbacks dropped. */
  serving(config: Config): Config;
  close(): Promise<void>;
}

/** Starts the demo provider on a free loopback port. */
export async function startDemoProvider(): Promise<DemoProvider> {
  const credential = `demo-${randomBytes(16).toString('hex')}`;
  let baseUrl = '';
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      answer(req, res, Buffer.concat(chunks), baseUrl).catch(() => {
        if (!res.headersSent) openAIError(res, 500, 'The demo provider failed to answer.');
        else res.destroy();
      });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: baseUrl,
    serving: (config) => {
      const providers = { ...config.providers };
      for (const name of DEMO_PROVIDERS)
        providers[name] = { name, baseUrl: `${baseUrl}${BASE_PATHS[name]}`, baseUrlSet: true, apiKey: credential };
      return { ...config, providers };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function answer(req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer, baseUrl: string) {
  const url = new URL(req.url ?? '/', baseUrl);
  const route = ROUTES.find(([method, path]) => method === req.method && path.test(url.pathname));
  const anthropic = url.pathname.startsWith('/v1/messages');
  if (!route) return openAIError(res, 404, `Unknown request URL: ${req.method} ${url.pathname}`);
  // An image URL is signed, as BFL's are; every other call carries the provider's credential.
  if (!url.pathname.startsWith('/bfl/images/') && !hasCredential(req.headers))
    return anthropic
      ? anthropicError(res, 401, 'x-api-key header is required')
      : openAIError(res, 401, 'No API key provided.');
  let json: Json | undefined;
  if (String(req.headers['content-type'] ?? '').startsWith('application/json')) {
    try {
      const parsed = JSON.parse(raw.toString('utf8')) as unknown;
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) json = parsed as Json;
    } catch {
      return anthropic
        ? anthropicError(res, 400, 'The request body is not valid JSON.')
        : openAIError(res, 400, 'We could not parse the JSON body of your request.');
    }
  }
  const request: DemoRequest = {
    method: req.method ?? 'GET',
    path: url.pathname,
    query: url.searchParams,
    headers: req.headers,
    raw,
    json,
    baseUrl,
  };
  await route[2](request, res);
}
