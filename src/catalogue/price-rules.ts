// The rules one model's definition keeps to, in one place for everything that takes a model or
// its prices from outside the code: the book document (book-document.ts), the admin RPCs and the
// catalogue. Each problem names the model and the field, so an operator can find it.
import { PRICED_TIERS } from '../billing/pricing.ts';
import type { CatalogueEntry, ModelKindName } from './models.ts';

/** Why a model or a proposed price version is refused: the field it names (`prices.<key>`, `vision`, `effective_from`) and what is wrong, the model's id first. */
export interface PriceProblem {
  field: string;
  message: string;
}

/**
 * The price keys each kind of model is billed by: what the metering code reads (src/billing/
 * pricing.ts and the routes' policies), so a key outside these would never be charged. A chat
 * model's token prices (`*_per_mtok`) each come in the variants `priority_`, `flex_` (OpenAI
 * service tiers) and `long_` (past longContextAboveTokens); a new key here needs the code that bills it.
 */
export const PRICE_KEYS: Record<ModelKindName, ReadonlySet<string>> = {
  chat: new Set([
    'input_per_mtok',
    'cached_input_per_mtok',
    'cache_write_per_mtok',
    'cache_write_1h_per_mtok',
    'output_per_mtok',
    'priority_input_per_mtok',
    'priority_cached_input_per_mtok',
    'priority_cache_write_per_mtok',
    'priority_cache_write_1h_per_mtok',
    'priority_output_per_mtok',
    'flex_input_per_mtok',
    'flex_cached_input_per_mtok',
    'flex_cache_write_per_mtok',
    'flex_cache_write_1h_per_mtok',
    'flex_output_per_mtok',
    'long_input_per_mtok',
    'long_cached_input_per_mtok',
    'long_cache_write_per_mtok',
    'long_cache_write_1h_per_mtok',
    'long_output_per_mtok',
    'web_search_per_call',
  ]),
  embedding: new Set(['input_per_mtok']),
  image: new Set([
    'input_per_mtok',
    'image_input_per_mtok',
    'output_per_mtok',
    'image_low_1024x1024',
    'image_low_1024x1536',
    'image_low_1536x1024',
    'image_medium_1024x1024',
    'image_medium_1024x1536',
    'image_medium_1536x1024',
    'image_high_1024x1024',
    'image_high_1024x1536',
    'image_high_1536x1024',
    'per_megapixel',
  ]),
  transcription: new Set(['input_per_mtok', 'audio_input_per_mtok', 'output_per_mtok', 'per_audio_minute']),
  speech: new Set(['per_mchar']),
  video: new Set(['per_second']),
};

/** A price: a non-negative decimal with at most 9 places, so it is a whole number of nano-USD per its unit. */
const PRICE = /^(0|[1-9]\d{0,11})(\.\d{1,9})?$/;
/** A decimal with more places than that: a fraction of a nano-USD per unit, which no charge can carry. */
const FINER_THAN_NANO = /^(0|[1-9]\d{0,11})\.\d{10,}$/;
const ZERO = /^0(\.0*)?$/;

/**
 * Every problem with `prices` as `model`'s whole price map (no date): each key one its kind is
 * billed by, each price a decimal the gateway can bill exactly, and a chat model's input and
 * output prices there and not zero (an unpriced model is never served at $0).
 */
export function priceMapProblems(
  model: Pick<CatalogueEntry, 'id' | 'kind'>,
  prices: Record<string, string>,
): PriceProblem[] {
  const allowed = PRICE_KEYS[model.kind];
  if (Object.keys(prices).length === 0)
    return [{ field: 'prices', message: `${model.id}: a version holds the model's whole price map; none given` }];
  const out: PriceProblem[] = [];
  for (const [k, v] of Object.entries(prices)) {
    const field = `prices.${k}`;
    if (!allowed.has(k)) {
      out.push({
        field,
        message: `${model.id}: '${k}' is not a price a ${model.kind} model is billed by (${[...allowed].sort().join(', ')})`,
      });
    } else if (typeof v !== 'string') {
      out.push({ field, message: `${model.id}: ${k} must be a decimal USD string, not ${JSON.stringify(v)}` });
    } else if (v.trim().startsWith('-')) {
      out.push({ field, message: `${model.id}: ${k} = ${JSON.stringify(v)} is negative; a price is 0 or more` });
    } else if (FINER_THAN_NANO.test(v)) {
      out.push({
        field,
        message: `${model.id}: ${k} = ${JSON.stringify(v)} is finer than one nano-USD per unit; a price has at most 9 decimal places`,
      });
    } else if (!PRICE.test(v)) {
      out.push({
        field,
        message: `${model.id}: ${k} = ${JSON.stringify(v)} is not a price: a non-negative decimal USD string with at most 9 decimal places (a whole number of nano-USD per its unit)`,
      });
    }
  }
  if (model.kind === 'chat') {
    for (const k of ['input_per_mtok', 'output_per_mtok']) {
      const v = prices[k];
      if (v === undefined || (typeof v === 'string' && ZERO.test(v)))
        out.push({ field: `prices.${k}`, message: `${model.id}: a chat model needs a non-zero ${k}` });
    }
  }
  return out;
}

/**
 * What is wrong with a proposed version of `model`'s prices, or undefined: the first of
 * priceMapProblems, then a date not in the past.
 */
export function priceVersionProblem(
  model: CatalogueEntry,
  prices: Record<string, string>,
  effectiveFrom: Date | undefined,
  now: Date,
): PriceProblem | undefined {
  const problem = priceMapProblems(model, prices)[0];
  if (problem) return problem;
  if (effectiveFrom && effectiveFrom.getTime() < now.getTime() - 1_000)
    return {
      field: 'effective_from',
      message: `${model.id}: effective_from ${effectiveFrom.toISOString()} is in the past; a version takes effect now or later`,
    };
  return undefined;
}

/** A chat entry's variant prices must be whole, and tier and long-context variants do not combine. */
export function priceProblem(e: CatalogueEntry): PriceProblem | undefined {
  if (e.kind !== 'chat') return undefined;
  const prefixes = [...PRICED_TIERS.map((t) => `${t}_`), 'long_'];
  for (const p of prefixes) {
    const has = Object.keys(e.prices).some((k) => k.startsWith(p));
    if (!has) continue;
    for (const k of [`${p}input_per_mtok`, `${p}output_per_mtok`])
      if (e.prices[k] === undefined)
        return {
          field: `prices.${k}`,
          message: `${e.id}: ${k} is missing; a model with ${p} prices needs ${p}input_per_mtok and ${p}output_per_mtok both`,
        };
  }
  const tiered = PRICED_TIERS.some((t) => e.prices[`${t}_input_per_mtok`] !== undefined);
  if (tiered && e.prices.long_input_per_mtok !== undefined)
    return {
      field: 'prices.long_input_per_mtok',
      message: `${e.id}: a model has tier prices (priority_, flex_) or long-context prices (long_), not both`,
    };
  const long = e.prices.long_input_per_mtok !== undefined;
  if (long !== (e.longContextAboveTokens !== undefined))
    return long
      ? {
          field: 'longContextAboveTokens',
          message: `${e.id}: long_ prices need longContextAboveTokens (past how many input tokens they apply)`,
        }
      : {
          field: 'prices.long_input_per_mtok',
          message: `${e.id}: longContextAboveTokens needs long_ prices (long_input_per_mtok, long_output_per_mtok)`,
        };
  return undefined;
}

/** A positive decimal string (a vision multiplier); 0 would make images free in the hold. */
const POSITIVE_DECIMAL = /^(0|[1-9]\d*)(\.\d+)?$/;

/** A chat entry says how its provider bills an input image, in positive whole numbers and a positive decimal multiplier. */
export function visionProblem(e: CatalogueEntry): PriceProblem | undefined {
  if (e.kind !== 'chat') return undefined;
  const v = e.vision;
  if (!v)
    return {
      field: 'vision',
      message: `${e.id}: a chat model needs vision: how its provider bills an input image (the hold counts images by it)`,
    };
  const counts: [string, number][] = [];
  switch (v.kind) {
    case 'tiles':
      counts.push(['baseTokens', v.baseTokens], ['tileTokens', v.tileTokens]);
      break;
    case 'patches':
      if (!POSITIVE_DECIMAL.test(v.multiplier) || ZERO.test(v.multiplier))
        return {
          field: 'vision.multiplier',
          message: `${e.id}: vision.multiplier = ${JSON.stringify(v.multiplier)} is not a positive decimal string`,
        };
      counts.push(['high.patches', v.high.patches], ['high.maxEdge', v.high.maxEdge]);
      if (v.original) counts.push(['original.patches', v.original.patches], ['original.maxEdge', v.original.maxEdge]);
      break;
    case 'claude':
      counts.push(['maxEdge', v.maxEdge], ['maxPatches', v.maxPatches]);
      break;
  }
  const bad = counts.find(([, n]) => !(Number.isSafeInteger(n) && n > 0));
  return bad
    ? { field: `vision.${bad[0]}`, message: `${e.id}: vision.${bad[0]} = ${bad[1]} is not a positive integer` }
    : undefined;
}
