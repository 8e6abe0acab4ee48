// Azure OpenAI's classic (dated api-version) URL scheme, for an instance started with
// `azure: { apiVersion }`:
//   POST /openai/deployments/{deployment}/chat/completions?api-version=2024-10-21
// and the same for embeddings, images/generations, audio/transcriptions, audio/speech and
// responses; and GET /openai/models?api-version=… (the resource's models: what `providers test`
// asks for). The key rides in an `api-key` header, never `Authorization: Bearer` (Entra ID
// tokens are out of scope): without it, or with a key the instance does not accept, Azure's 401.
// A missing or different api-version is Azure's 404 "Resource not found", as is any other path
// under /openai/. The request is then served by the plain OpenAI handler of its operation
// (/v1/chat/completions …) and recorded under its real path.
//
// The model served is the deployment: real Azure ignores the body's `model` and answers the
// underlying model's name, which the simulator does not know, so a body's own `model` is kept
// (and echoed) and a body without one is served as if it named the deployment.
import type http from 'node:http';

export const AZURE_OPERATIONS = [
  'chat/completions',
  'embeddings',
  'images/generations',
  'audio/transcriptions',
  'audio/speech',
  'responses',
] as const;

const ROUTE = new RegExp(`^/openai/deployments/([^/]+)/(${AZURE_OPERATIONS.join('|')})$`);

export function azureError(res: http.ServerResponse, status: number, code: string, message: string): void {
  const text = JSON.stringify({ error: { code, message } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export interface AzureRoute {
  deployment: string;
  /** The plain OpenAI path that serves it, e.g. /v1/chat/completions. */
  path: string;
}

/** Authenticates and maps an Azure request; undefined when it answered with Azure's error. */
export function azureRoute(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  url: URL,
  apiVersion: string,
  keyOk: (key: string | undefined) => boolean,
): AzureRoute | undefined {
  const key = req.headers['api-key'];
  if (typeof key !== 'string' || !keyOk(key)) {
    azureError(
      res,
      401,
      '401',
      'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.',
    );
    return undefined;
  }
  const versionOk = url.searchParams.get('api-version') === apiVersion;
  if (req.method === 'GET' && url.pathname === '/openai/models' && versionOk)
    return { deployment: '', path: '/v1/models' };
  const m = ROUTE.exec(url.pathname);
  if (!m || req.method !== 'POST' || !versionOk) {
    azureError(res, 404, '404', 'Resource not found');
    return undefined;
  }
  return { deployment: decodeURIComponent(m[1]!), path: `/v1/${m[2]}` };
}

/** A JSON body as served: the deployment as its model when it names none. */
export function servedBody(body: unknown, deployment: string): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body;
  const b = body as Record<string, unknown>;
  return b.model === undefined ? { ...b, model: deployment } : b;
}
