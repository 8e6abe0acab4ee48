// The price book: every model's prices as dated versions in PostgreSQL (migration 014). The
// prices the gateway ships with (models.ts) are only the first version of each model, written
// when the book has none for it; from then on the book is what is charged. Each request is
// priced at the version in force when its route resolved the model, and its usage row names that
// version, so a charge can always be explained by the price it used.
import type { Db } from '../db/db.ts';
import { MODELS, type CatalogueEntry, type ModelKindName } from './models.ts';

export interface PriceVersion {
  id: bigint;
  modelId: string;
  /** Decimal USD strings per unit, the unit in the key. */
  prices: Record<string, string>;
  effectiveFrom: Date;
  createdAt?: Date;
  source?: string;
  reason?: string;
}

/** Why a proposed version is refused: the field it names (`prices.<key>`, `effective_from`) and what is wrong. */
export interface PriceProblem {
  field: string;
  message: string;
}

/** A price: a non-negative decimal with at most 9 places, so it is a whole number of nano-USD per its unit. */
const PRICE = /^(0|[1-9]\d{0,11})(\.\d{1,9})?$/;
/** The variants a chat model's token prices can have (service tiers, long context). */
const CHAT_VARIANTS = ['', 'priority_', 'flex_', 'long_'];

/** The price keys each kind of model is billed by: those the shipped catalogue uses, and a chat model's variants of them. */
function keysOf(kind: ModelKindName): ReadonlySet<string> {
  const keys = new Set<string>();
  for (const m of MODELS) if (m.kind === kind) for (const k of Object.keys(m.prices)) keys.add(k);
  if (kind === 'chat') {
    for (const k of [...keys]) {
      const base = k.replace(/^(priority_|flex_|long_)/, '');
      if (base.endsWith('_per_mtok')) for (const v of CHAT_VARIANTS) keys.add(`${v}${base}`);
    }
  }
  return keys;
}

/**
 * What is wrong with a proposed version of `model`'s prices, or undefined: every key one its kind
 * is billed by, every price a decimal the gateway can bill exactly, a chat model's input and output
 * prices there (an unpriced model is never served at $0), and a date not in the past.
 */
export function priceVersionProblem(
  model: CatalogueEntry,
  prices: Record<string, string>,
  effectiveFrom: Date | undefined,
  now: Date,
): PriceProblem | undefined {
  const allowed = keysOf(model.kind);
  if (Object.keys(prices).length === 0)
    return { field: 'prices', message: `${model.id}: a version holds the model's whole price map; none given` };
  for (const [k, v] of Object.entries(prices)) {
    if (!allowed.has(k))
      return {
        field: `prices.${k}`,
        message: `${model.id}: '${k}' is not a price a ${model.kind} model is billed by (${[...allowed].sort().join(', ')})`,
      };
    if (!PRICE.test(v))
      return {
        field: `prices.${k}`,
        message: `${model.id}: ${k} = ${JSON.stringify(v)} is not a price: a non-negative decimal USD string with at most 9 decimal places (a whole number of nano-USD per its unit)`,
      };
  }
  if (model.kind === 'chat') {
    for (const k of ['input_per_mtok', 'output_per_mtok']) {
      if (prices[k] === undefined || /^0(\.0*)?$/.test(prices[k]!))
        return { field: `prices.${k}`, message: `${model.id}: a chat model needs a non-zero ${k}` };
    }
  }
  if (effectiveFrom && effectiveFrom.getTime() < now.getTime() - 1_000)
    return {
      field: 'effective_from',
      message: `${model.id}: effective_from ${effectiveFrom.toISOString()} is in the past; a version takes effect now or later`,
    };
  return undefined;
}

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/** When the shipped prices are in force from: before anything the book can be asked about. */
const SHIPPED_FROM = '1970-01-01T00:00:00Z';

export class PriceBook {
  private readonly db: Db;

  constructor(db: Db) {
    this.db = db;
  }

  /**
   * Writes the shipped prices as the first version of every model the book has no version of,
   * and points that model's usage rows written before the book existed at it. Safe with several
   * instances starting at once: a model's first version is written by one of them.
   */
  async seed(models: readonly CatalogueEntry[]): Promise<void> {
    for (const m of models) {
      await this.db.transaction(async (trx) => {
        const inserted = rowsOf(
          await trx.raw(
            `INSERT INTO price_versions (model_id, prices, effective_from, source, reason)
             VALUES (?, CAST(? AS jsonb), CAST(? AS timestamptz), 'shipped', 'the prices the gateway ships with')
             ON CONFLICT ON CONSTRAINT price_versions_model_from DO NOTHING RETURNING id::text AS id`,
            [m.id, JSON.stringify(m.prices), SHIPPED_FROM],
          ),
        )[0];
        if (!inserted) return;
        await trx.raw(
          `UPDATE usage_records SET price_version_id = CAST(? AS bigint) WHERE model = ? AND price_version_id IS NULL`,
          [inserted.id as string, m.id],
        );
      });
    }
  }

  /** A new version (checked by the caller: priceVersionProblem), in force from `effectiveFrom` or now. */
  async add(v: {
    modelId: string;
    prices: Record<string, string>;
    effectiveFrom?: Date;
    source: string;
    reason: string;
  }): Promise<PriceVersion> {
    const r = rowsOf(
      await this.db.raw(
        `INSERT INTO price_versions (model_id, prices, effective_from, source, reason)
         VALUES (?, CAST(? AS jsonb), COALESCE(CAST(? AS timestamptz), now()), ?, ?)
         RETURNING id::text AS id, model_id, prices, effective_from, created_at, source, reason`,
        [
          v.modelId,
          JSON.stringify(v.prices),
          v.effectiveFrom ? v.effectiveFrom.toISOString() : null,
          v.source,
          v.reason,
        ],
      ),
    )[0]!;
    return versionOf(r);
  }

  /** A model's versions, newest (by effective_from) first. */
  async history(modelId: string): Promise<PriceVersion[]> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT id::text AS id, model_id, prices, effective_from, created_at, source, reason FROM price_versions
         WHERE model_id = ? ORDER BY effective_from DESC, id DESC`,
        [modelId],
      ),
    );
    return rows.map(versionOf);
  }

  /** Each model's version in force now: the latest whose effective_from has come. */
  async inForce(): Promise<Map<string, PriceVersion>> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT DISTINCT ON (model_id) id::text AS id, model_id, prices, effective_from FROM price_versions
         WHERE effective_from <= now() ORDER BY model_id, effective_from DESC`,
      ),
    );
    return new Map(
      rows.map((r) => [
        r.model_id as string,
        {
          id: BigInt(r.id as string),
          modelId: r.model_id as string,
          prices: r.prices as Record<string, string>,
          effectiveFrom: new Date(r.effective_from as string),
        },
      ]),
    );
  }
}

function versionOf(r: Row): PriceVersion {
  return {
    id: BigInt(r.id as string),
    modelId: r.model_id as string,
    prices: r.prices as Record<string, string>,
    effectiveFrom: new Date(r.effective_from as string),
    createdAt: new Date(r.created_at as string),
    source: r.source as string,
    reason: r.reason as string,
  };
}
