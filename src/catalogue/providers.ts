// Providers and deployments as book data (docs/providers.md). A provider is an endpoint the
// gateway can call: a dialect (the wire format and how it authenticates), a base URL, extra
// headers and a timeout. Its credential is never here: it lives sealed in PostgreSQL
// (credentials.ts). A model is served by one or more deployments, each on a provider, with its
// own upstream model id, weight, priority, limits and, where they differ, provider prices.

/** The wire formats the gateway speaks upstream. */
export type Dialect = 'openai' | 'azure-openai' | 'anthropic' | 'cohere' | 'bfl';

export const DIALECTS: Record<Dialect, true> = {
  openai: true,
  'azure-openai': true,
  anthropic: true,
  cohere: true,
  bfl: true,
};

export interface ProviderDefinition {
  id: string;
  dialect: Dialect;
  /** Where its API is: `https://api.openai.com/v1`; an Azure resource's `https://<name>.openai.azure.com`. */
  baseUrl: string;
  /** azure-openai: the `api-version` query parameter every call carries. */
  apiVersion?: string;
  /** Sent on every call besides the dialect's own (never a credential: those are refused here). */
  headers?: Record<string, string>;
  /** Time to the provider's response headers, in ms, where it differs from UPSTREAM_HEADERS_TIMEOUT_MS. */
  timeoutMs?: number;
  /**
   * `none`: the provider needs no credential (a vLLM or Ollama server in the operator's own
   * network). It is served without one, and no credential header is ever sent to it.
   */
  auth?: ProviderAuth;
}

/** How a provider's calls authenticate beyond its dialect's own credential header: `none` sends none. */
export type ProviderAuth = 'none';

export const PROVIDER_AUTHS: Record<ProviderAuth, true> = { none: true };

/** How a model picks among its deployments. */
export type RoutingStrategy = 'weighted' | 'cheapest' | 'fastest';

export const ROUTING_STRATEGIES: Record<RoutingStrategy, true> = { weighted: true, cheapest: true, fastest: true };

/** The limits of the upstream key a deployment uses, held across every gateway instance. */
export interface DeploymentLimits {
  rpm?: number;
  tpm?: number;
  /** Requests in flight at once, on every instance together. */
  concurrency?: number;
}

/**
 * A deployment taken out of traffic by the operator: `draining` is tried only after every other
 * deployment of its model (so its traffic moves off it without a request turned away), `disabled`
 * takes none. Left out, it takes its share.
 */
export type DeploymentTraffic = 'draining' | 'disabled';

export const DEPLOYMENT_TRAFFIC: Record<DeploymentTraffic, true> = { draining: true, disabled: true };

export interface Deployment {
  /** Unique within its model: `azure-east`, `openai-key-2`. */
  id: string;
  provider: string;
  /** The provider's name for the model (Azure: the deployment name); the model's upstreamId when absent. */
  upstreamId?: string;
  /** Out of traffic (draining or disabled); left out: in traffic. */
  state?: DeploymentTraffic;
  /** Share of traffic within its priority (default 1); 0 takes traffic only when the others of its priority cannot. */
  weight?: number;
  /** 0 (the default) is tried first; 1 only when no deployment of priority 0 can serve, and so on. */
  priority?: number;
  limits?: DeploymentLimits;
  /** What this deployment costs the operator where it differs from the model's prices (keys of the model's prices). */
  prices?: Record<string, string>;
}

/** A model's kinds each dialect can serve. */
const SERVES: Record<Dialect, readonly string[]> = {
  openai: ['chat', 'embedding', 'image', 'transcription', 'speech', 'video'],
  'azure-openai': ['chat', 'embedding', 'image', 'transcription', 'speech'],
  anthropic: ['chat'],
  cohere: ['embedding'],
  bfl: ['image'],
};

export function dialectServes(dialect: Dialect, kind: string): boolean {
  return SERVES[dialect].includes(kind);
}

/** Dialects whose requests take the same body: a model's deployments all speak one family. */
export function sameFamily(a: Dialect, b: Dialect): boolean {
  const family = (d: Dialect) => (d === 'azure-openai' ? 'openai' : d);
  return family(a) === family(b);
}

/** A provider id: lower-case letters, digits, `-` and `_`. */
export const PROVIDER_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** A deployment id, within its model. */
export const DEPLOYMENT_ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** An HTTP header name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
/** Headers that carry a credential or that the gateway sets itself: never from the book. */
const RESERVED_HEADERS = new Set([
  'authorization',
  'api-key',
  'x-api-key',
  'x-key',
  'proxy-authorization',
  'cookie',
  'host',
  'content-length',
  'content-type',
  'transfer-encoding',
  'connection',
]);

export const PROVIDER_LIMITS = {
  headers: 32,
  headerValue: 1024,
  baseUrl: 2048,
  apiVersion: 64,
  deployments: 64,
} as const;

/** What is wrong with a provider's base URL, or undefined. */
export function baseUrlProblem(url: unknown): string | undefined {
  if (typeof url !== 'string') return 'must be a string';
  if (url.length > PROVIDER_LIMITS.baseUrl) return `is longer than ${PROVIDER_LIMITS.baseUrl} characters`;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `${JSON.stringify(url.slice(0, 64))} is not a URL`;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return `must be an http(s) URL, not ${u.protocol}`;
  if (u.username || u.password)
    return 'must not carry a user or password (a credential is set with providers set-credential)';
  if (u.search || u.hash) return 'must not carry a query or fragment';
  return undefined;
}

/** What is wrong with a provider's extra header, or undefined. */
export function headerProblem(name: string, value: unknown): string | undefined {
  if (!HEADER_NAME.test(name)) return `${JSON.stringify(name.slice(0, 64))} is not a header name`;
  if (RESERVED_HEADERS.has(name.toLowerCase()))
    return `${name} is the gateway's own or a credential's; a credential is set with providers set-credential, never in the book`;
  if (typeof value !== 'string') return `${name} must be a string`;
  if (value.length > PROVIDER_LIMITS.headerValue)
    return `${name} is longer than ${PROVIDER_LIMITS.headerValue} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(value)) return `${name} holds a control character`;
  return undefined;
}

/** A provider's base URL as calls join paths to it: no trailing slash. */
export const trimmedBase = (url: string) => url.replace(/\/+$/, '');

/** The model's deployments as listed, or the one it has when it lists none: its own provider and upstream id. */
export function deploymentsOf(model: { provider: string; deployments?: Deployment[] }): Deployment[] {
  return model.deployments ?? [{ id: model.provider, provider: model.provider }];
}
