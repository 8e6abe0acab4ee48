// Where one upstream call goes: a deployment's provider, the model's name there and the
// credential the call carries. Each dialect turns it into a URL and headers.
import type { ResolvedDeployment, ResolvedProvider } from '../../catalogue/catalogue.ts';

export interface Target {
  deployment: ResolvedDeployment;
  provider: ResolvedProvider;
  upstreamId: string;
  apiKey: string;
}

/** A route's call as the dialect builds it for one target; the router tries targets in turn. */
export type Endpoint = (t: Target) => { url: string; headers: Record<string, string> };

export function targetOf(deployment: ResolvedDeployment, apiKey: string): Target {
  return { deployment, provider: deployment.provider, upstreamId: deployment.upstreamId, apiKey };
}

/** The provider's extra headers from the book, under the dialect's own (which win). */
export function withProviderHeaders(t: Target, own: Record<string, string>): Record<string, string> {
  const extra = t.provider.headers;
  return Object.keys(extra).length === 0 ? own : { ...extra, ...own };
}

/** The credential as the dialect sends it (`name: value`); nothing to a provider the book says needs none. */
export function credentialHeader(t: Target, name: string, value: string = t.apiKey): Record<string, string> {
  return t.provider.auth === 'none' ? {} : { [name]: value };
}
