// What in a request changes what the provider bills, per wire format. Each such field is one of:
// priced (the catalogue has the price, the settle bills what the provider reports), held for
// (the provider adds input the gateway cannot see: the hold takes the model's whole context
// window per pass), bounded (server tool calls get a cap the provider honours), rewritten to what
// the provider honours, or refused with a 400 that names it. Nothing that changes the bill passes
// through unpriced. docs/billing.md lists every field and what happens to it.
import type { ResolvedModel } from '../catalogue/catalogue.ts';
import {
  dearestInputPrice,
  PRICED_TIERS,
  variantPrices,
  WEB_SEARCH_FEE,
  type TokenPrices,
  type WorstCase,
} from '../billing/pricing.ts';
import type { PricedQuantity } from '../money/money.ts';
import {
  NOTHING_SHARED,
  operatorObjectRefusal,
  type SharedKind,
  type WireFormat,
} from '../tenancy/operator-objects.ts';
import { walk } from '../tenancy/json-walk.ts';

type Json = Record<string, unknown>;

/** A 400 naming the parameter the gateway cannot bill. */
export interface Refusal {
  message: string;
  param: string;
  code: string;
}

export interface BillPolicy {
  refusal?: Refusal;
  worst: WorstCase;
  /** Fields the upstream body must carry instead of the caller's (a cap on server tool calls). */
  set?: Json;
}

/** Server tool calls allowed when the caller sets no cap (max_tool_calls, max_uses): the hold grows with it. */
export const DEFAULT_SERVER_TOOL_CALLS = 3;

const refuse = (param: string, message: string, code = 'unsupported_parameter'): BillPolicy => ({
  refusal: { param, message, code },
  worst: undefined as unknown as WorstCase,
});
/** Ids of objects in the operator's provider account come first: refused unless shared (src/tenancy/operator-objects.ts). */
function notShared(format: WireFormat, body: Json, shared: ReadonlySet<SharedKind>): BillPolicy | undefined {
  const r = operatorObjectRefusal(format, body, shared);
  return r && refuse(r.param, r.message, r.code);
}
const isUrl = (v: unknown): boolean => typeof v === 'string' && !v.startsWith('data:');
const arr = (v: unknown): Json[] => (Array.isArray(v) ? (v as Json[]) : []);

/** The worst case of a request that adds nothing of its own: list prices, one pass, nothing unseen. */
export function baseWorst(model: ResolvedModel, prices: TokenPrices = listPrices(model)): WorstCase {
  const long = variantPrices(model.prices, 'long_');
  return {
    prices,
    window: BigInt(model.contextWindow),
    passes: 1n,
    outputPerPass: false,
    uncappedOutput: model.reasoningBeyondCap ? BigInt(model.maxOutputTokens) : 0n,
    fees: [],
    ...(long && model.longContextAboveTokens !== undefined
      ? { long: { aboveTokens: BigInt(model.longContextAboveTokens), prices: long } }
      : {}),
  };
}

export function listPrices(model: ResolvedModel): TokenPrices {
  return variantPrices(model.prices, '') ?? (model.prices as unknown as TokenPrices);
}

/**
 * OpenAI's service_tier (chat and Responses): default and auto at list prices; priority (also
 * asked as "fast") and flex at the catalogue's tier prices; anything else, or a tier the model
 * has no prices for, refused. Models that do not speak OpenAI's API take no tier; an OpenAI-API
 * model takes the tiers the book prices for it (whichever provider serves it).
 */
function tierPrices(model: ResolvedModel, value: unknown): TokenPrices | BillPolicy {
  if (value === undefined || value === null || value === 'auto' || value === 'default') return listPrices(model);
  const asked = String(value);
  if (model.dialect !== 'openai' && model.dialect !== 'azure-openai')
    return refuse('service_tier', `service_tier '${asked}' is not available for ${model.id} on this gateway; omit it.`);
  const tier = asked === 'fast' ? 'priority' : asked;
  const prices = (PRICED_TIERS as readonly string[]).includes(tier)
    ? variantPrices(model.prices, `${tier}_`)
    : undefined;
  if (prices) return prices;
  const priced = PRICED_TIERS.filter((t) => variantPrices(model.prices, `${t}_`));
  return refuse(
    'service_tier',
    `The gateway has no prices for service_tier '${asked}' on ${model.id}, so it cannot bill it; send 'auto' or 'default'${priced.length ? ` or one of: ${priced.join(', ')}` : ''}.`,
  );
}

/** POST /v1/chat/completions (OpenAI, xAI, DeepSeek; and the chat side of Claude through chat). */
export function chatPolicy(body: Json, model: ResolvedModel, shared = NOTHING_SHARED): BillPolicy {
  const owned = notShared('chat', body, shared);
  if (owned) return owned;
  if (body.web_search_options != null)
    return refuse(
      'web_search_options',
      'Web search in chat completions is billed per search, which this gateway does not price; use /v1/responses with the web_search tool on a passthrough model.',
    );
  if (body.search_parameters != null)
    return refuse(
      'search_parameters',
      "xAI's Live Search is billed per source, which this gateway does not price; omit search_parameters.",
    );
  const audioOut = Array.isArray(body.modalities) && (body.modalities as unknown[]).includes('audio');
  if (audioOut || body.audio != null)
    return refuse(
      audioOut ? 'modalities' : 'audio',
      'Audio output is billed at audio token prices, which this gateway does not price; ask for text only.',
    );
  const prices = tierPrices(model, body.service_tier);
  if ('refusal' in prices) return prices;
  const worst = baseWorst(model, prices as TokenPrices);
  let audio = false;
  walk(body.messages, (o) => {
    if (o.type === 'input_audio') audio = true;
    if (o.type === 'image_url' && isUrl((o.image_url as Json | undefined)?.url)) worst.unseen ??= 'an image by URL';
    if (o.type === 'file') worst.unseen ??= 'a file';
  });
  if (audio)
    return refuse(
      'messages',
      'Audio input (input_audio parts) is billed at audio token prices, which this gateway does not price.',
    );
  // Predicted output: rejected prediction tokens are billed as completion tokens.
  if (body.prediction != null) worst.uncappedOutput += BigInt(Buffer.byteLength(JSON.stringify(body.prediction)));
  return { worst };
}

const CLIENT_TOOL = /^(bash|text_editor|memory|computer)_\d{8}$/;
const SERVER_SEARCH = /^web_search_\d{8}$/;
const SERVER_FETCH = /^web_fetch_\d{8}$/;

/** POST /v1/messages (and the Anthropic body Claude gets through chat). */
export function messagesPolicy(body: Json, model: ResolvedModel, shared = NOTHING_SHARED): BillPolicy {
  const owned = notShared('messages', body, shared);
  if (owned) return owned;
  if (body.speed != null && body.speed !== 'standard')
    return refuse(
      'speed',
      "Fast mode is billed at premium prices this gateway does not price; omit speed or send 'standard'.",
    );
  if (body.inference_geo != null && body.inference_geo !== 'global')
    return refuse(
      'inference_geo',
      "Inference pinned to a region is billed above list prices, which this gateway does not price; omit inference_geo or send 'global'.",
    );
  if (body.service_tier != null && body.service_tier !== 'auto' && body.service_tier !== 'standard_only')
    return refuse('service_tier', "service_tier must be 'auto' or 'standard_only'.", 'invalid_value');
  if (body.container != null)
    return refuse('container', 'Code execution containers are billed by the hour, which this gateway does not price.');
  if (arr(body.mcp_servers).length > 0)
    return refuse('mcp_servers', "MCP connector calls run on Anthropic's side in a loop the gateway cannot bound.");

  const worst = baseWorst(model);
  let tools: Json[] | undefined;
  let calls = 0n;
  let searches = 0n;
  for (const [i, t] of arr(body.tools).entries()) {
    const type = typeof t?.type === 'string' ? t.type : 'custom';
    if (type === 'custom' || CLIENT_TOOL.test(type)) continue;
    const search = SERVER_SEARCH.test(type);
    if (!search && !SERVER_FETCH.test(type)) {
      return refuse(
        'tools',
        `The tool type '${type}' runs on Anthropic's side and is billed in a way this gateway cannot bill yet; it serves client tools, web search and web fetch.`,
      );
    }
    if (search && model.prices[WEB_SEARCH_FEE] === undefined)
      return refuse('tools', `Web search has no price for ${model.id} on this gateway.`);
    const uses = t.max_uses;
    if (uses != null && !(Number.isSafeInteger(uses) && (uses as number) >= 0))
      return refuse('tools', 'max_uses must be a non-negative integer.', 'invalid_value');
    const bound = uses == null ? DEFAULT_SERVER_TOOL_CALLS : (uses as number);
    if (uses == null) (tools ??= [...arr(body.tools)])[i] = { ...t, max_uses: bound };
    calls += BigInt(bound);
    if (search) searches += BigInt(bound);
  }
  if (calls > 0n) {
    // Each server tool call is another pass over the context (which now holds its results),
    // each able to write up to max_tokens: the hold counts every pass.
    worst.passes = 1n + calls;
    worst.outputPerPass = true;
    worst.unseen = 'server tools (web search, web fetch)';
  }
  if (searches > 0n)
    worst.fees.push({
      quantity: searches,
      priceUsd: model.prices[WEB_SEARCH_FEE]!,
      perUnits: 1n,
    } satisfies PricedQuantity);
  let writes: 'none' | '5m' | '1h' =
    body.cache_control != null ? ((body.cache_control as Json).ttl === '1h' ? '1h' : '5m') : 'none';
  walk([body.system, body.messages, body.tools], (o) => {
    const source = o.source as Json | undefined;
    if (source?.type === 'url') worst.unseen ??= `a ${String(o.type)} by URL`;
    else if (source?.type === 'file') worst.unseen ??= `a ${String(o.type)} by file id`;
    else if (o.type === 'document' && source?.type === 'base64' && source.media_type === 'application/pdf')
      worst.unseen ??= 'a PDF document'; // a page costs more than its bytes
    else if (o.type === 'container_upload') worst.unseen ??= 'a container upload';
    const cc = o.cache_control as Json | undefined;
    if (cc && typeof cc === 'object') writes = cc.ttl === '1h' || writes === '1h' ? '1h' : '5m';
  });

  // Cache writes cost more than plain input: the hold prices every input token at the dearest rate the request asks for.
  if (writes !== 'none') {
    worst.prices = { ...worst.prices, input_per_mtok: dearestInputPrice(worst.prices, writes) };
    if (worst.long)
      worst.long = {
        ...worst.long,
        prices: { ...worst.long.prices, input_per_mtok: dearestInputPrice(worst.long.prices, writes) },
      };
  }
  return { worst, ...(tools ? { set: { tools } } : {}) };
}

const RESPONSES_CLIENT_TOOLS = new Set([
  'function',
  'custom',
  'computer',
  'computer_use_preview',
  'local_shell',
  'apply_patch',
]);
const RESPONSES_WEB_SEARCH = new Set([
  'web_search',
  'web_search_2025_08_26',
  'web_search_preview',
  'web_search_preview_2025_03_11',
]);

/** POST /v1/responses on a passthrough model (the provider's own Responses API). */
export function responsesPolicy(body: Json, model: ResolvedModel, shared = NOTHING_SHARED): BillPolicy {
  const owned = notShared('responses', body, shared);
  if (owned) return owned;
  if (body.background === true) {
    return refuse(
      'background',
      "Background responses go on running on the provider's side after this request ends, where the gateway cannot see their usage to bill it; send the request without background (stream it for long tasks).",
    );
  }
  if (arr(body.context_management).length > 0)
    return refuse(
      'context_management',
      'Server-side compaction runs extra model calls the gateway cannot bound; omit context_management.',
    );
  const prices = tierPrices(model, body.service_tier);
  if ('refusal' in prices) return prices;
  const worst = baseWorst(model, prices as TokenPrices);

  let searchTool = false;
  const check = (t: Json): BillPolicy | undefined => {
    const type = String(t?.type);
    if (RESPONSES_CLIENT_TOOLS.has(type)) return undefined;
    if (type === 'shell' && (t.environment == null || (t.environment as Json).type === 'local')) return undefined;
    if (type === 'namespace') {
      for (const inner of arr(t.tools)) {
        const r = check(inner);
        if (r) return r;
      }
      return undefined;
    }
    if (type === 'tool_search' && t.execution === 'client') return undefined;
    if (RESPONSES_WEB_SEARCH.has(type)) {
      if (model.prices[WEB_SEARCH_FEE] === undefined)
        return refuse('tools', `Web search has no price for ${model.id} on this gateway.`);
      searchTool = true;
      return undefined;
    }
    return refuse(
      'tools',
      `The tool type '${type}' runs on the provider's side and is billed in a way this gateway cannot bill yet (per container, per image, per call or storage); it serves function, custom, computer, shell and apply_patch tools and web search.`,
    );
  };
  for (const t of arr(body.tools)) {
    const r = check(t);
    if (r) return r;
  }

  let set: Json | undefined;
  if (searchTool) {
    const cap = body.max_tool_calls;
    if (cap != null && !(Number.isSafeInteger(cap) && (cap as number) >= 0))
      return refuse('max_tool_calls', 'max_tool_calls must be a non-negative integer.', 'invalid_value');
    const calls = cap == null ? DEFAULT_SERVER_TOOL_CALLS : (cap as number);
    if (cap == null) set = { max_tool_calls: calls };
    if (calls > 0) {
      // Every search is another pass over the context (with the results it read); the fee is per call.
      worst.passes = 1n + BigInt(calls);
      worst.unseen = 'web search';
      worst.fees.push({ quantity: BigInt(calls), priceUsd: model.prices[WEB_SEARCH_FEE]!, perUnits: 1n });
    }
  }
  worst.unseen ??= unseenResponsesInput(body);
  return { worst, ...(set ? { set } : {}) };
}

/** State and content the provider reads on its side: stored responses, conversations, prompts, items by id, files, images by URL or id (wherever they sit: messages, tool outputs). */
function unseenResponsesInput(body: Json): string | undefined {
  for (const f of ['previous_response_id', 'conversation', 'prompt'] as const) if (body[f] != null) return f;
  let found: string | undefined;
  walk(body.input, (o) => {
    if (o.type === 'item_reference') found ??= 'an input item by id';
    if (o.type === 'input_file') found ??= 'an input file';
    if (o.type === 'input_image' && (o.file_id != null || isUrl(o.image_url)))
      found ??= 'an input image by URL or file id';
  });
  return found;
}
