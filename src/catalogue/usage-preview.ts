// PreviewBook (docs/operations.md#previewing-a-change): what the recorded usage of the last N days
// would have cost and earned under a proposed book document, beside what it did.
//
// One aggregate over usage_records (the time index bounds it to the window), grouped by model,
// the price version each row was charged at, the account's price group and the unit the route
// bills by; then each group is re-priced in memory from its summed quantities:
//
// - The group's own version, applied to its summed quantities by the route's rule without what a
//   row does not record (list token prices; pixels, seconds, characters, video milliseconds),
//   gives E. Each row's recorded provider cost is its own exact cost rounded up once, so when the
//   rows are explained by their quantities alone the group's recorded cost P lies in [E, E + n)
//   for n rows. Such a group is exact: its proposed provider cost is P + (E' - E), rounded up,
//   where E' is the same sum at the document's prices. That is P itself when the prices are
//   unchanged, and otherwise within 1 nano-USD per request of the per-row sum at the new prices
//   (both lie in [E', E' + n]).
// - Otherwise (a service tier, long context, 1-hour cache writes or tool fees on some row; media
//   token rows, whose text and image/audio input are recorded as one figure; per-image tiers) the
//   whole group is inexact: P is scaled by E' / E, or, where the unit has no such base (per-image
//   tiers), by the ratio of the model's prices the two versions share, summed.
//
// The proposed revenue of a group is customerNano(proposed provider cost, the document's markup
// for the model and the group), rounded once per group rather than once per request: within
// n x (1 + markup) + 1 nano-USD of the per-request sum at the same prices (n without a markup,
// where it is the provider cost). Rows whose charge was capped at their hold (uncovered_nano > 0)
// keep the share of the charge they paid, and are counted as inexact. Accounts are taken in the
// group they are in now (the document's markups apply to them as they are grouped, not as they
// were).
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { customerNano, parseMarkup, NO_MARKUP, type Markup } from '../billing/markup.ts';
import { audioSecondsCost, charactersCost, megapixelCost } from '../billing/media-pricing.ts';
import { ceilDiv, costRational, parseDecimal, type PricedQuantity, type Rational } from '../money/money.ts';
import { PER_MILLION, tokenCostParts, variantPrices, type TokenPrices } from '../billing/pricing.ts';
import type { Db } from '../db/db.ts';
import type { PreviewBookResponseSchema } from '../gen/gateway/v1/catalogue_pb.js';
import type { BookDocument, BookMarkup } from './book-document.ts';
import type { CatalogueEntry } from './models.ts';
import type { BookPreview } from './preview.ts';
import { applicableMarkup, markupScopeOf } from './book-diff.ts';

type Prices = Readonly<Record<string, string>>;

const DAY_MS = 86_400_000;

/** The summed recorded quantities of a group of usage rows. */
interface Quantities {
  inputTokens: bigint;
  outputTokens: bigint;
  cachedTokens: bigint;
  cacheWriteTokens: bigint;
  units: bigint;
  /** What the route billed by besides tokens (usage_records.unit): '' for tokens alone. */
  unit: string;
}

/** One (model, price version, account group, unit) group of the window's usage rows. */
interface UsageGroup extends Quantities {
  model: string;
  /** The price version the rows were charged at (null only on rows no version was ever named for). */
  priceVersionId: string | null;
  group: string;
  requests: bigint;
  /** Rows whose charge was capped at their hold. */
  capped: bigint;
  revenueNano: bigint;
  uncoveredNano: bigint;
  providerCostNano: bigint;
}

/** What a group's quantities cost at some prices, and whether the row's rule reads those quantities alone. */
interface BaseCost {
  cost: Rational;
  determined: boolean;
}

const USAGE_BY_GROUP = `SELECT u.model, u.price_version_id::text AS price_version_id, a.price_group, u.unit,
    count(*) AS requests,
    count(*) FILTER (WHERE u.uncovered_nano > 0) AS capped,
    sum(u.input_tokens) AS input_tokens,
    sum(u.output_tokens) AS output_tokens,
    sum(u.cached_tokens) AS cached_tokens,
    sum(u.cache_write_tokens) AS cache_write_tokens,
    sum(u.units) AS units,
    sum(u.cost_nano) AS revenue,
    sum(u.uncovered_nano) AS uncovered,
    sum(COALESCE(u.provider_cost_nano, u.cost_nano + u.uncovered_nano)) AS provider_cost
  FROM usage_records u JOIN accounts a ON a.id = u.account_id
  WHERE u.created_at >= ? AND u.created_at < ?
  GROUP BY u.model, u.price_version_id, a.price_group, u.unit`;

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;
const big = (v: unknown): bigint => BigInt((v as string | number | null) ?? 0);

export class UsagePreview implements BookPreview {
  private readonly db: Db;

  constructor(db: Db) {
    this.db = db;
  }

  async preview(doc: BookDocument, days: number): Promise<MessageInitShape<typeof PreviewBookResponseSchema>> {
    const to = new Date();
    const from = new Date(to.getTime() - days * DAY_MS);
    const models = new Map(doc.models.map((m) => [m.id, m]));
    const groups = rowsOf(await this.db.raw(USAGE_BY_GROUP, [from, to]))
      .map(groupOf)
      .filter((g) => models.has(g.model));
    const versions = await this.priceVersions(groups);

    const byModel = new Map<string, Figures>();
    const total = noFigures();
    for (const g of groups) {
      const model = models.get(g.model)!;
      const own = g.priceVersionId === null ? undefined : versions.get(g.priceVersionId);
      const p = reprice(g, own, model.prices, markupIn(doc.markups, model, g.group));
      const figures: Figures = {
        requests: g.requests,
        revenueNano: g.revenueNano,
        providerCostNano: g.providerCostNano,
        proposedRevenueNano: p.revenueNano,
        proposedProviderCostNano: p.providerCostNano,
        inexactRequests: p.inexact,
      };
      if (!byModel.has(g.model)) byModel.set(g.model, noFigures());
      addFigures(byModel.get(g.model)!, figures);
      addFigures(total, figures);
    }
    const rows = [...byModel.keys()].sort().map((modelId) => ({ modelId, ...byModel.get(modelId)! }));
    return { rows, total: { modelId: '', ...total }, from: timestampFromDate(from), to: timestampFromDate(to) };
  }

  /** The prices of every version the groups were charged at, by id. */
  private async priceVersions(groups: readonly UsageGroup[]): Promise<Map<string, Prices>> {
    const ids = [...new Set(groups.flatMap((g) => (g.priceVersionId === null ? [] : [g.priceVersionId])))];
    if (ids.length === 0) return new Map();
    const r = await this.db.raw('SELECT id::text AS id, prices FROM price_versions WHERE id = ANY(?::bigint[])', [ids]);
    return new Map(rowsOf(r).map((v) => [v.id as string, v.prices as Prices]));
  }
}

/** The markup `group` pays on `model` under a document's markups (book-diff.ts applicableMarkup: the catalogue's rule). */
export function markupIn(
  markups: readonly BookMarkup[],
  model: Pick<CatalogueEntry, 'id' | 'provider'>,
  group: string,
): Markup {
  const hit = applicableMarkup(markups, markupScopeOf, model, group);
  return hit ? parseMarkup(0n, hit.markup) : NO_MARKUP;
}

/** A group's proposed figures: provider cost, revenue, and how many of its requests are inexact. */
function reprice(
  g: UsageGroup,
  own: Prices | undefined,
  proposedPrices: Prices,
  markup: Markup,
): { providerCostNano: bigint; revenueNano: bigint; inexact: bigint } {
  const P = g.providerCostNano;
  const before = own && baseCost(own, g);
  const after = baseCost(proposedPrices, g);
  let providerCostNano: bigint;
  let inexact = g.capped;
  if (before?.determined && after?.determined && explains(before.cost, P, g.requests)) {
    // P + E' - E >= E' >= 0, since P >= E.
    const { num: e, den: d } = before.cost;
    const { num: e2, den: d2 } = after.cost;
    providerCostNano = ceilDiv(P * d * d2 - e * d2 + e2 * d, d * d2);
  } else {
    inexact = g.requests;
    const ratio =
      before && after && before.cost.num > 0n
        ? { num: after.cost.num * before.cost.den, den: after.cost.den * before.cost.num }
        : own
          ? priceIndexRatio(own, proposedPrices)
          : { num: 1n, den: 1n };
    providerCostNano = ceilDiv(P * ratio.num, ratio.den);
  }
  const charge = customerNano(providerCostNano, markup);
  // A capped group paid revenue of revenue + uncovered: it keeps that share.
  const revenueNano = g.uncoveredNano > 0n ? ceilDiv(charge * g.revenueNano, g.revenueNano + g.uncoveredNano) : charge;
  return { providerCostNano, revenueNano, inexact };
}

/** Whether a recorded cost is its rows' exact cost `e` rounded up once per row: P in [e, e + n). */
function explains(e: Rational, P: bigint, n: bigint): boolean {
  const scaled = P * e.den;
  return scaled >= e.num && scaled - e.num < n * e.den;
}

/**
 * What `q` costs at `prices` by its route's rule, leaving out what a row does not record: tokens
 * at the list prices (no tier, long context, 1-hour writes or tool fees), pixels, audio seconds,
 * characters or video milliseconds at their unit price. Media token rows record their text and
 * image/audio input as one figure, so their rule is not determined by it; per-image tiers have no
 * base at all (undefined), nor has a price the version lacks.
 */
function baseCost(prices: Prices, q: Quantities): BaseCost | undefined {
  const tokens = q.inputTokens + q.outputTokens + q.cachedTokens + q.cacheWriteTokens;
  if (tokens === 0n && q.units === 0n) return { cost: { num: 0n, den: 1n }, determined: true };
  try {
    switch (q.unit) {
      case '': {
        // As pricesFor: a model without output prices (embeddings) is priced by its map as it is.
        const list = variantPrices(prices, '') ?? (prices as unknown as TokenPrices);
        const usage = {
          inputTokens: q.inputTokens,
          outputTokens: q.outputTokens,
          cachedTokens: q.cachedTokens,
          cacheWriteTokens: q.cacheWriteTokens,
        };
        return { cost: costRational(tokenCostParts(list, usage)), determined: true };
      }
      case 'pixels':
        return { cost: megapixelCost(prices, q.units), determined: true };
      case 'characters':
        return { cost: charactersCost(prices, q.units), determined: true };
      case 'video_ms':
        return {
          cost: costRational([{ quantity: q.units, priceUsd: price(prices, 'per_second'), perUnits: 1000n }]),
          determined: true,
        };
      case 'audio_seconds':
        if (prices.per_audio_minute !== undefined) return { cost: audioSecondsCost(prices, q.units), determined: true };
        return { cost: mediaTokensCost(prices, 'audio_input_per_mtok', q), determined: false };
      case 'images':
        return tokens > 0n
          ? { cost: mediaTokensCost(prices, 'image_input_per_mtok', q), determined: false }
          : undefined;
      default:
        return undefined;
    }
  } catch {
    return undefined; // a price the version does not have: no base to compare with
  }
}

/** Media tokens with every input token at the image/audio input price (the larger part of a media request's input). */
function mediaTokensCost(prices: Prices, mediaPrice: string, q: Quantities): Rational {
  const parts: PricedQuantity[] = [
    { quantity: q.inputTokens, priceUsd: price(prices, mediaPrice), perUnits: PER_MILLION },
    { quantity: q.outputTokens, priceUsd: price(prices, 'output_per_mtok'), perUnits: PER_MILLION },
  ];
  return costRational(parts);
}

function price(prices: Prices, key: string): string {
  const p = prices[key];
  if (p === undefined) throw new Error(`no price ${key}`);
  return p;
}

/** How the prices two maps share compare, summed: how a group with no base cost scales (1 when they share none). */
function priceIndexRatio(own: Prices, proposed: Prices): Rational {
  let before: Rational = { num: 0n, den: 1n };
  let after: Rational = { num: 0n, den: 1n };
  const plus = (a: Rational, p: string): Rational => {
    const x = parseDecimal(p);
    return { num: a.num * x.den + x.num * a.den, den: a.den * x.den };
  };
  for (const [key, p] of Object.entries(own)) {
    const q = proposed[key];
    if (q === undefined) continue;
    before = plus(before, p);
    after = plus(after, q);
  }
  return before.num === 0n ? { num: 1n, den: 1n } : { num: after.num * before.den, den: after.den * before.num };
}

function groupOf(r: Row): UsageGroup {
  return {
    model: r.model as string,
    priceVersionId: (r.price_version_id as string | null) ?? null,
    group: (r.price_group as string | null) ?? '',
    unit: (r.unit as string | null) ?? '',
    requests: big(r.requests),
    capped: big(r.capped),
    inputTokens: big(r.input_tokens),
    outputTokens: big(r.output_tokens),
    cachedTokens: big(r.cached_tokens),
    cacheWriteTokens: big(r.cache_write_tokens),
    units: big(r.units),
    revenueNano: big(r.revenue),
    uncoveredNano: big(r.uncovered),
    providerCostNano: big(r.provider_cost),
  };
}

/** A preview row's figures, summed over the groups of its model (and over every model for the total). */
interface Figures {
  requests: bigint;
  revenueNano: bigint;
  providerCostNano: bigint;
  proposedRevenueNano: bigint;
  proposedProviderCostNano: bigint;
  inexactRequests: bigint;
}

const noFigures = (): Figures => ({
  requests: 0n,
  revenueNano: 0n,
  providerCostNano: 0n,
  proposedRevenueNano: 0n,
  proposedProviderCostNano: 0n,
  inexactRequests: 0n,
});

function addFigures(into: Figures, f: Figures): void {
  into.requests += f.requests;
  into.revenueNano += f.revenueNano;
  into.providerCostNano += f.providerCostNano;
  into.proposedRevenueNano += f.proposedRevenueNano;
  into.proposedProviderCostNano += f.proposedProviderCostNano;
  into.inexactRequests += f.inexactRequests;
}
