// What a model in the catalogue is: its id, kind, provider, limits, prices and how it bills an
// input image. The models themselves are data: the price book in PostgreSQL, which an empty
// database fills from the shipped book (src/catalogue/shipped-book.json; docs/price-book.md).
// Prices are decimal USD strings; the key names the unit.
//
// Chat prices: input/cached_input/output per 1M tokens; cache_write (5-minute) and
// cache_write_1h where the provider charges writes; a variant prefix for the prices a request
// can be billed at instead: `priority_` and `flex_` (OpenAI service tiers), `long_` (the whole
// request past longContextAboveTokens input tokens). Server tool fees are per call
// (web_search_per_call). A request that could be billed at anything not priced here is refused
// (docs/billing.md), so these keys are the whole list of what the gateway can bill
// (PRICE_KEYS in price-rules.ts).
import type { Deployment, RoutingStrategy } from './providers.ts';

export type ModelKindName = 'chat' | 'embedding' | 'image' | 'transcription' | 'speech' | 'video';

/**
 * How the provider bills an input image (chat `image_url`, Responses `input_image`, Claude
 * `image` blocks) in input tokens: the hold takes it for every image part
 * (src/inference/media/image-tokens.ts, docs/billing.md#images). From the providers' vision
 * guides; where their figures and what callers measure differ, the larger.
 */
export type VisionBilling =
  /** OpenAI's 512-px tiles: the image fitted in 2048×2048, its short side down to 768, then `baseTokens` + `tileTokens` per tile; detail `low` is `baseTokens` alone. */
  | { kind: 'tiles'; baseTokens: number; tileTokens: number }
  /**
   * OpenAI's 32-px patches times `multiplier` (a decimal, rounded up): at detail `high` the image
   * fitted in `high`; `original` (detail `original`, and what `auto` may mean) keeps more of it.
   * Detail `low` is not documented to lower it, so it does not.
   */
  | { kind: 'patches'; multiplier: string; high: PatchBudget; original?: PatchBudget }
  /** Claude: the image fitted in `maxEdge` px and `maxPatches` 28-px patches; the larger of w·h/750 and its patch count. */
  | { kind: 'claude'; maxEdge: number; maxPatches: number }
  /** The provider documents no rule: an image may fill the context window, so the request holds at least that. */
  | { kind: 'window' }
  /** The model reads no images (its provider refuses them): an image part counts by its bytes, as any other part. */
  | { kind: 'none' };

/**
 * What the provider adds to the input of a request that carries tools, in tokens, where it
 * documents it per model (Anthropic's tool-use system prompt and its own tools' definitions).
 * A Claude model without it is held at the dearest figures published (src/inference/tokens.ts).
 */
export interface ToolUseTokens {
  /** The tool-use system prompt: `auto` for tool_choice auto, none or unset; `any` for any or a named tool. */
  systemPrompt: { auto: number; any: number };
  /** Per tool type the provider defines, by its name without the date (`bash_20250124` is `bash`); computer's own system prompt included. */
  tools: Record<string, number>;
}

/** The most patches an image keeps, after fitting its long side in `maxEdge` px. */
export interface PatchBudget {
  patches: number;
  maxEdge: number;
}

export interface CatalogueEntry {
  id: string;
  kind: ModelKindName;
  /** The provider whose API the model speaks (providers.ts): its requests take that provider's form, and markups by provider apply. */
  provider: string;
  upstreamId: string;
  /** Where it is served (providers.ts); absent: on its provider, as upstreamId. */
  deployments?: Deployment[];
  /** How a request picks among the deployments (default weighted). */
  routing?: RoutingStrategy;
  enabled: boolean;
  /** Served natively on /v1/responses (others are rewritten to chat completions). */
  responsesPassthrough?: boolean;
  /** The most input the provider lets one pass over the context read: the hold for input the gateway cannot see. */
  contextWindow: number;
  /** Ceiling for output tokens when the request names none. */
  maxOutputTokens: number;
  prices: Record<string, string>;
  /** Past this many input tokens the whole request is billed at the `long_` prices. */
  longContextAboveTokens?: number;
  /** The provider's output cap does not bound its reasoning tokens (xAI): the hold adds maxOutputTokens of them. */
  reasoningBeyondCap?: boolean;
  /** How an input image is billed; every chat model says (the catalogue refuses to start otherwise). */
  vision?: VisionBilling;
  /** What tools add to the input on the provider's side (Claude models). */
  toolUse?: ToolUseTokens;
}
