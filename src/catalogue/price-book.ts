// The price book: every model's prices as dated versions in PostgreSQL (migration 014). The
// prices the gateway ships with (models.ts) are only the first version of each model, written
// when the book has none for it; from then on the book is what is charged. Each request is
// priced at the version in force when its route resolved the model, and its usage row names that
// version, so a charge can always be explained by the price it used.
import type { Db } from '../db/db.ts';
import type { CatalogueEntry } from './models.ts';

export interface PriceVersion {
  id: bigint;
  modelId: string;
  /** Decimal USD strings per unit, the unit in the key. */
  prices: Record<string, string>;
  effectiveFrom: Date;
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
