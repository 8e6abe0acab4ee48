// The console's front-end (src/console/web/, TSX with Preact and uPlot) bundled by esbuild's JS
// API in memory when the gateway starts: one minified JS file and one CSS file, named by a hash
// of their content so they can be cached for good, plus the index.html that names them. Nothing
// is built by hand and nothing is written to disk. The build runs beside the gateway's start
// (about a second of one core); the first console request waits for it, and a failed build is
// logged once and answered 503 on the console's pages, never stopping the gateway.
import { createHash } from 'node:crypto';
import path from 'node:path';
import zlib from 'node:zlib';
import type { Logger } from 'pino';

/** One built file, kept in memory with its compressed forms (computed once, served many times). */
export interface BuiltAsset {
  /** `<hash>.js` or `<hash>.css`: the name under /console/assets/. */
  name: string;
  contentType: string;
  identity: Buffer;
  gzip: Buffer;
  brotli: Buffer;
}

export interface ConsoleAssets {
  js: BuiltAsset;
  css: BuiltAsset;
  /** The page every console path answers with; the script routes by path. */
  indexHtml: string;
  /** By name, for /console/assets/:name. */
  byName: ReadonlyMap<string, BuiltAsset>;
}

/** The path under which the page loads its assets. */
export const ASSETS_PATH = '/console/assets/';

const ENTRY = path.join(import.meta.dirname, 'web', 'main.tsx');

/** Bundles the front-end (the answer is a promise: the caller starts it and awaits it when a page is asked for). */
export async function buildConsoleAssets(): Promise<ConsoleAssets> {
  // Imported here, not at the top: the gateway's start does not wait for esbuild to load.
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    entryPoints: [ENTRY],
    bundle: true,
    minify: true,
    write: false,
    outdir: 'out', // names the outputs only (write: false)
    format: 'esm',
    target: ['es2022', 'chrome100', 'firefox100', 'safari15'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'none',
    logLevel: 'silent',
  });
  const js = result.outputFiles.find((f) => f.path.endsWith('.js'));
  const css = result.outputFiles.find((f) => f.path.endsWith('.css'));
  if (!js || !css) throw new Error('the console build wrote no JS or no CSS file');
  const jsAsset = asset(Buffer.from(js.contents), 'js', 'text/javascript; charset=utf-8');
  const cssAsset = asset(Buffer.from(css.contents), 'css', 'text/css; charset=utf-8');
  return {
    js: jsAsset,
    css: cssAsset,
    indexHtml: indexHtml(jsAsset.name, cssAsset.name),
    byName: new Map([
      [jsAsset.name, jsAsset],
      [cssAsset.name, cssAsset],
    ]),
  };
}

function asset(identity: Buffer, ext: 'js' | 'css', contentType: string): BuiltAsset {
  const hash = createHash('sha256').update(identity).digest('base64url').slice(0, 16);
  return {
    name: `${hash}.${ext}`,
    contentType,
    identity,
    gzip: zlib.gzipSync(identity, { level: 9 }),
    brotli: zlib.brotliCompressSync(identity, {
      params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: identity.length },
    }),
  };
}

/** No inline script or style: the CSP allows 'self' only. The script is a module (deferred by nature). */
function indexHtml(jsName: string, cssName: string): string {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="referrer" content="no-referrer">',
    '<title>Gateway console</title>',
    `<link rel="stylesheet" href="${ASSETS_PATH}${cssName}">`,
    `<script type="module" src="${ASSETS_PATH}${jsName}"></script>`,
    '</head>',
    '<body>',
    '<div id="app"><p class="boot">Loading the console…</p></div>',
    '<noscript><p class="boot">The console needs JavaScript.</p></noscript>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

/**
 * Starts the build now and returns what awaits it. A failure is logged once; every later ask
 * gets the same rejected promise (the pages answer 503 until the gateway is restarted).
 */
export function startConsoleBuild(
  log: Pick<Logger, 'info' | 'error'>,
  build: () => Promise<ConsoleAssets> = buildConsoleAssets,
): () => Promise<ConsoleAssets> {
  const started = Date.now();
  const built = build().then(
    (assets) => {
      log.info(
        {
          ms: Date.now() - started,
          jsBytes: assets.js.identity.length,
          jsGzipBytes: assets.js.gzip.length,
          cssBytes: assets.css.identity.length,
          cssGzipBytes: assets.css.gzip.length,
        },
        'console built',
      );
      return assets;
    },
    (err: unknown) => {
      log.error({ err }, 'console build failed: /console answers 503');
      throw err;
    },
  );
  built.catch(() => {}); // handled by whoever asks; not an unhandled rejection meanwhile
  return () => built;
}
