// The console's pages on the HTTP port: index.html for /console and every page path under it
// (the script routes by path, e.g. /console/requests, /console/admin/accounts/<id>), and the
// bundled script and stylesheet under /console/assets/<content hash>.js|css, cached for good.
// The JSON API under /console/api/ is another plugin's (src/console/api.ts); an API path it does
// not know is answered 404 in the API's error shape here, never with the page, and so is an
// asset that does not exist (a name too long for the asset route would otherwise reach the page).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { ASSETS_PATH, startConsoleBuild, type BuiltAsset, type ConsoleAssets } from './assets.ts';
import { setConsoleHeaders } from './headers.ts';
import { consoleErrorHandler, consoleNotFound } from './refusals.ts';

export interface ConsolePagesDeps {
  log: Pick<Logger, 'info' | 'error'>;
  /** `npm start -- --demo`: every page carries a notice, above the app, that the answers are the demo provider's. */
  demo?: boolean;
  /** What builds the front-end (tests give a failing one); default: esbuild over src/console/web/. */
  build?: () => Promise<ConsoleAssets>;
}

export function registerConsolePages(app: FastifyInstance, deps: ConsolePagesDeps): void {
  const assets = startConsoleBuild(deps.log, deps.build);
  // Its own encapsulated scope: the headers hook runs for the console's answers only.
  app.register(async (scope) => {
    scope.addHook('onRequest', (_req, reply, done) => {
      setConsoleHeaders(reply);
      done();
    });
    scope.setErrorHandler(consoleErrorHandler(deps.log));

    const page = async (req: FastifyRequest, reply: FastifyReply) => {
      const built = await ready(assets, reply);
      if (!built) return reply;
      const html = deps.demo ? built.indexHtml.replace('<body>\n', `<body>\n${DEMO_NOTICE}\n`) : built.indexHtml;
      // Revalidated every time: it names the current hashed assets.
      return reply.header('cache-control', 'no-cache').type('text/html; charset=utf-8').send(html);
    };
    scope.get('/console', page);
    scope.get('/console/*', (req, reply) => {
      const rest = (req.params as { '*': string })['*'];
      if (rest === 'api' || rest.startsWith('api/') || rest.startsWith('assets/')) return consoleNotFound(req, reply);
      return page(req, reply);
    });

    scope.get<{ Params: { name: string } }>(`${ASSETS_PATH}:name`, async (req, reply) => {
      const built = await ready(assets, reply);
      if (!built) return reply;
      const file = built.byName.get(req.params.name);
      if (!file) return consoleNotFound(req, reply);
      return sendAsset(req, reply, file);
    });
  });
}

/**
 * Server-rendered, outside the app's element, so the page's script leaves it be; a landmark of its
 * own (every part of a page is in one), and <mark> shows it without a stylesheet of its own.
 */
export const DEMO_NOTICE =
  '<aside class="demo-notice" aria-label="Demo gateway"><p><mark><strong>Demo gateway.</strong> Started with <code>npm start -- --demo</code>: every model is answered by the built-in demo provider (made-up answers), and requests are charged at the real prices.</mark></p></aside>';

/** The built assets, or undefined after answering 503 (the build failed: the log says why). */
async function ready(assets: () => Promise<ConsoleAssets>, reply: FastifyReply): Promise<ConsoleAssets | undefined> {
  try {
    return await assets();
  } catch {
    reply
      .code(503)
      .header('cache-control', 'no-store')
      .header('retry-after', '60')
      .type('text/plain; charset=utf-8')
      .send('The console could not be built; the gateway log says why.');
    return undefined;
  }
}

function sendAsset(req: FastifyRequest, reply: FastifyReply, file: BuiltAsset): FastifyReply {
  const accepted = String(req.headers['accept-encoding'] ?? '');
  const [encoding, body] = /\bbr\b/.test(accepted)
    ? ['br', file.brotli]
    : /\bgzip\b/.test(accepted)
      ? ['gzip', file.gzip]
      : [undefined, file.identity];
  if (encoding) reply.header('content-encoding', encoding);
  return reply
    .header('vary', 'accept-encoding')
    .header('cache-control', 'public, max-age=31536000, immutable')
    .type(file.contentType)
    .send(body);
}
