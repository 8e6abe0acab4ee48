// Providers that speak the OpenAI API: OpenAI, xAI, DeepSeek and any compatible endpoint
// (dialect `openai`), and Azure OpenAI (dialect `azure-openai`: the deployment in the URL, an
// `api-version` on every call, the key in `api-key`).
import type { ResolvedModel } from '../../catalogue/catalogue.ts';
import { credentialHeader, withProviderHeaders, type Endpoint, type Target } from './target.ts';

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

/** `path` on the deployment (Azure: under its deployment, with the api-version), and its credential as the dialect sends it. */
function urlAndAuth(t: Target, path: string): { url: string; auth: Record<string, string> } {
  const p = t.provider;
  if (p.dialect === 'azure-openai')
    return {
      url: `${p.baseUrl}/openai/deployments/${encodeURIComponent(t.upstreamId)}${path}?api-version=${encodeURIComponent(p.apiVersion ?? '')}`,
      auth: credentialHeader(t, 'api-key'),
    };
  return { url: `${p.baseUrl}${path}`, auth: credentialHeader(t, 'authorization', `Bearer ${t.apiKey}`) };
}

/**
 * A call to `path` of an OpenAI-API deployment: a JSON body answered as JSON or SSE (`accept`
 * otherwise), or a multipart form, which sets its own content type. Only what the upstream needs:
 * nothing of the caller's request headers is passed on.
 */
function openAIEndpoint(
  path: string,
  body: 'json' | 'form' = 'json',
  accept = 'application/json, text/event-stream',
): Endpoint {
  return (t) => {
    const { url, auth } = urlAndAuth(t, path);
    const own = body === 'form' ? auth : { ...auth, 'content-type': 'application/json', accept };
    return { url, headers: withProviderHeaders(t, own) };
  };
}

export const CHAT_COMPLETIONS = openAIEndpoint('/chat/completions');
export const RESPONSES = openAIEndpoint('/responses');
export const EMBEDDINGS = openAIEndpoint('/embeddings');
export const IMAGE_GENERATIONS = openAIEndpoint('/images/generations');
export const IMAGE_EDITS = openAIEndpoint('/images/edits', 'form');
export const TRANSCRIPTIONS = openAIEndpoint('/audio/transcriptions', 'form');
/** Speech answers audio of whatever type the caller asked for. */
export const SPEECH = openAIEndpoint('/audio/speech', 'json', '*/*');
