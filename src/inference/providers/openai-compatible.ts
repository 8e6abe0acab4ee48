// Providers that speak the OpenAI API: OpenAI, xAI, DeepSeek and any compatible endpoint
// (dialect `openai`), and Azure OpenAI (dialect `azure-openai`: the deployment in the URL, an
// `api-version` on every call, the key in `api-key`).
import type { ResolvedModel } from '../../catalogue/catalogue.ts';
import { withProviderHeaders, type Endpoint, type Target } from './target.ts';

export interface ChatProvider {
  chatUrl: string;
  headers: Record<string, string>;
  /** Another endpoint of the same API, e.g. url('/embeddings'). */
  url(path: string): string;
  /** Authorization only, for multipart bodies (the form sets its own content type). */
  authHeaders: Record<string, string>;
}

export interface CapFields {
  /** Field that caps output tokens when the gateway must lower or set it. */
  maxTokensField: 'max_tokens' | 'max_completion_tokens';
  /** Honours max_tokens only, not max_completion_tokens (DeepSeek): a cap goes to it as max_tokens. */
  readsMaxTokensOnly: boolean;
}

/** How a model's requests cap output: by its own provider, as every deployment of it takes the same body. */
export function capFieldsOf(model: Pick<ResolvedModel, 'provider' | 'dialect'>): CapFields {
  // OpenAI's reasoning models refuse max_tokens (Azure's too); xAI, DeepSeek and most compatible hosts read max_tokens.
  const completion = model.provider === 'openai' || model.dialect === 'azure-openai';
  return {
    maxTokensField: completion ? 'max_completion_tokens' : 'max_tokens',
    readsMaxTokensOnly: model.provider === 'deepseek',
  };
}

export function openAICompatible(t: Target): ChatProvider {
  const p = t.provider;
  const azure = p.dialect === 'azure-openai';
  const url = azure
    ? (path: string) =>
        `${p.baseUrl}/openai/deployments/${encodeURIComponent(t.upstreamId)}${path}?api-version=${encodeURIComponent(p.apiVersion ?? '')}`
    : (path: string) => `${p.baseUrl}${path}`;
  const auth: Record<string, string> = azure ? { 'api-key': t.apiKey } : { authorization: `Bearer ${t.apiKey}` };
  return {
    chatUrl: url('/chat/completions'),
    // Only what the upstream needs; nothing of the caller's request headers is passed on.
    headers: withProviderHeaders(t, {
      ...auth,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    }),
    url,
    authHeaders: withProviderHeaders(t, auth),
  };
}

/** A JSON call to `path` of an OpenAI-API deployment. */
export const openAIJson =
  (path: string): Endpoint =>
  (t) => {
    const p = openAICompatible(t);
    return { url: p.url(path), headers: p.headers };
  };

/** A multipart call to `path` (the form sets its own content type). */
export const openAIForm =
  (path: string): Endpoint =>
  (t) => {
    const p = openAICompatible(t);
    return { url: p.url(path), headers: p.authHeaders };
  };
