// The price book in PostgreSQL (migrations 014, 015, 018): the providers, every model's
// definition, its prices as dated versions, the aliases and the dated markups, all append-only. The shipped book
// (shipped-book.json) is only the first version of each model and alias, written when the book
// has none for it; from then on the book is what is charged. Each request is priced at the
// versions in force when its route resolved the model, and its usage row names them, so a charge
// can always be explained by the price it used. Every write goes through `apply`: a list of
// changes (book-diff.ts) written in one transaction.
import type { Knex } from 'knex';
import type { Db } from '../db/db.ts';
import type { BookDocument } from './book-document.ts';
import { bookMarkupOf, definitionOf, type Change, type MarkupScope, type ModelDefinition } from './book-diff.ts';
import type { ProviderDefinition } from './providers.ts';

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

type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows: Row[] }).rows;

/** When the shipped prices are in force from: before anything the book can be asked about. */
const SHIPPED_FROM = '1970-01-01T00:00:00Z';
/** Serialises seeding between instances starting at once (an arbitrary constant of this gateway's). */
const SEED_LOCK = 7_262_026;
/** Serialises changes to the book between instances. */
const WRITE_LOCK = 7_262_027;

export interface MarkupVersion extends MarkupScope {
  id: bigint;
  /** Decimal fraction ("0.2"), or null: the scope's markup cleared from `effectiveFrom`. */
  markup: string | null;
  effectiveFrom: Date;
  createdAt: Date;
  source: string;
  reason: string;
}

/** The kinds of version the book writes, each in a table of its own. */
export type BookVersionKind = 'provider' | 'model' | 'prices' | 'alias' | 'markup';

export const BOOK_VERSION_KINDS: readonly BookVersionKind[] = ['provider', 'model', 'prices', 'alias', 'markup'];

/** One version written to the book, of any kind (BookHistory). */
export interface WrittenVersion {
  kind: BookVersionKind;
  id: bigint;
  /** The provider, model, alias or markup scope ("model:gpt-4o@bot") it is of. */
  subject: string;
  createdAt: Date;
  source: string;
  reason: string;
  /** What it holds (a definition, prices with their date, a target, a markup with its date); null for a removal. */
  value: unknown;
}

/** Each kind's versions as one row shape: the newest `limit` of each, the union sorted afterwards. */
const VERSIONS_OF: Record<BookVersionKind, string> = {
  provider: `SELECT 'provider' AS kind, id, provider_id AS subject, created_at, source, reason, definition AS value
    FROM provider_versions`,
  model: `SELECT 'model' AS kind, id, model_id AS subject, created_at, source, reason, definition AS value FROM model_versions`,
  prices: `SELECT 'prices' AS kind, id, model_id AS subject, created_at, source, reason,
    jsonb_build_object('prices', prices, 'effectiveFrom', effective_from) AS value FROM price_versions`,
  alias: `SELECT 'alias' AS kind, id, alias AS subject, created_at, source, reason, to_jsonb(target) AS value FROM alias_versions`,
  markup: `SELECT 'markup' AS kind, id,
    CASE WHEN model_id <> '' THEN 'model:' || model_id WHEN provider <> '' THEN 'provider:' || provider ELSE 'default' END
      || CASE WHEN account_group <> '' THEN '@' || account_group ELSE '' END AS subject,
    created_at, source, reason,
    CASE WHEN markup IS NULL THEN NULL ELSE jsonb_build_object('markup', markup, 'effectiveFrom', effective_from) END AS value
    FROM markup_versions`,
};

export interface DefinitionVersion {
  id: bigint;
  definition: ModelDefinition;
  createdAt: Date;
  source: string;
  reason: string;
}

/** The book in force at one moment, read in one snapshot: what each instance's catalogue serves from. */
export interface BookState {
  /**
   * When the snapshot was taken (the reading transaction's start): a snapshot taken earlier than
   * the one a catalogue serves is older, and is not loaded over it.
   */
  takenAt: Date;
  providers: Map<string, ProviderDefinition>;
  definitions: Map<string, ModelDefinition>;
  /** Each model's price version in force (a model without one is not served). */
  prices: Map<string, PriceVersion>;
  aliases: Map<string, string>;
  /** Markups in force (cleared scopes left out). */
  markups: MarkupVersion[];
}

/** Who writes and why, and from when the price and markup versions of the write take effect. */
export interface WriteMeta {
  source: string;
  reason: string;
  /** Unset: now. Model definitions and aliases always take effect at once. */
  effectiveFrom?: Date;
}

type Executor = Knex | Knex.Transaction;

export class PriceBook {
  private readonly db: Db;

  constructor(db: Db) {
    this.db = db;
  }

  /**
   * Writes the shipped book's first version of every model and alias the book has none of, and
   * points that model's usage rows written before the book existed at its first price version.
   * Instances starting at once take turns (an advisory lock), so each is written once.
   */
  async seed(shipped: BookDocument): Promise<void> {
    await this.db.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock(?)', [SEED_LOCK]);
      const haveDefinitions = new Set(
        rowsOf(await trx.raw('SELECT DISTINCT model_id FROM model_versions')).map((r) => r.model_id as string),
      );
      const havePrices = new Set(
        rowsOf(await trx.raw('SELECT DISTINCT model_id FROM price_versions')).map((r) => r.model_id as string),
      );
      const haveAliases = new Set(
        rowsOf(await trx.raw('SELECT DISTINCT alias FROM alias_versions')).map((r) => r.alias as string),
      );
      const haveProviders = new Set(
        rowsOf(await trx.raw('SELECT DISTINCT provider_id FROM provider_versions')).map((r) => r.provider_id as string),
      );
      const meta = { source: 'shipped', reason: 'the gateway as shipped' };
      for (const p of shipped.providers ?? [])
        if (!haveProviders.has(p.id)) await this.writeProvider(trx, p.id, p, meta);
      for (const m of shipped.models) {
        if (!haveDefinitions.has(m.id)) await this.writeDefinition(trx, definitionOf(m), meta);
        if (havePrices.has(m.id)) continue;
        const id = (
          await this.writePrices(trx, m.id, m.prices, { ...meta, reason: 'the prices the gateway ships with' }, true)
        ).id;
        await trx.raw(
          'UPDATE usage_records SET price_version_id = CAST(? AS bigint) WHERE model = ? AND price_version_id IS NULL',
          [id.toString(), m.id],
        );
      }
      for (const [alias, target] of Object.entries(shipped.aliases))
        if (!haveAliases.has(alias)) await this.writeAlias(trx, alias, target, meta);
    });
  }

  /** The book in force now, read in one snapshot. */
  async read(): Promise<BookState> {
    return this.db.transaction((trx) => this.readWith(trx), { isolationLevel: 'repeatable read', readOnly: true });
  }

  /**
   * One change to the book, serialised with every other (an advisory lock): `decide` sees the book
   * in force and returns the changes to write (it may throw to write nothing); they are written in
   * the same transaction, so no change is decided on a book another has changed meanwhile.
   */
  async change<T extends { changes: readonly Change[] }>(
    decide: (current: BookState) => T,
    meta: WriteMeta,
    dryRun = false,
  ): Promise<T & { written: PriceVersion[] }> {
    return this.db.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock(?)', [WRITE_LOCK]);
      const decided = decide(await this.readWith(trx));
      const written = dryRun ? [] : await this.writeChanges(trx, decided.changes, meta);
      return { ...decided, written };
    });
  }

  private async readWith(trx: Executor): Promise<BookState> {
    // First, so the snapshot is taken here (repeatable read takes it at the first statement). The
    // clock is read as that statement runs, after the snapshot: every change the snapshot holds
    // was written before it. now() (the transaction's start, a round trip earlier) would leave out
    // a price committed in between while its model's definition is in, and serve the model unpriced.
    const [clock] = rowsOf(await trx.raw('SELECT t AS taken_at, t::text AS at FROM (SELECT clock_timestamp() AS t) c'));
    const takenAt = clock!.taken_at as Date;
    const at = clock!.at as string; // text keeps the microseconds a Date would drop
    const definitions = rowsOf(
      await trx.raw(
        'SELECT DISTINCT ON (model_id) model_id, definition FROM model_versions ORDER BY model_id, id DESC',
      ),
    );
    const prices = rowsOf(
      await trx.raw(
        `SELECT DISTINCT ON (model_id) id::text AS id, model_id, prices, effective_from FROM price_versions
             WHERE effective_from <= CAST(? AS timestamptz) ORDER BY model_id, effective_from DESC, price_versions.id DESC`,
        [at],
      ),
    );
    const aliases = rowsOf(
      await trx.raw(
        `SELECT alias, target FROM (SELECT DISTINCT ON (alias) alias, target FROM alias_versions ORDER BY alias, id DESC) a
             WHERE target IS NOT NULL`,
      ),
    );
    const providers = rowsOf(
      await trx.raw(
        `SELECT provider_id, definition FROM (SELECT DISTINCT ON (provider_id) provider_id, definition
           FROM provider_versions ORDER BY provider_id, id DESC) p WHERE definition IS NOT NULL`,
      ),
    );
    return {
      takenAt,
      providers: new Map(providers.map((r) => [r.provider_id as string, r.definition as ProviderDefinition])),
      definitions: new Map(definitions.map((r) => [r.model_id as string, r.definition as ModelDefinition])),
      prices: new Map(prices.map((r) => [r.model_id as string, versionOf(r)])),
      aliases: new Map(aliases.map((r) => [r.alias as string, r.target as string])),
      markups: await markupsInForce(trx, at),
    };
  }

  /** The book in force as a document (models sorted, prices in force, aliases, markups in force). */
  static documentOf(state: BookState): BookDocument {
    return {
      providers: [...state.providers.values()].sort((a, b) => a.id.localeCompare(b.id)),
      models: [...state.definitions.values()]
        .sort((a, b) => a.id.localeCompare(b.id))
        .map((d) => ({ ...d, prices: { ...(state.prices.get(d.id)?.prices ?? {}) } })),
      aliases: Object.fromEntries([...state.aliases].sort(([a], [b]) => a.localeCompare(b))),
      markups: state.markups.map((m) => bookMarkupOf(m, m.markup!)),
    };
  }

  /** Writes `changes`; the price versions written. */
  private async writeChanges(trx: Executor, changes: readonly Change[], meta: WriteMeta): Promise<PriceVersion[]> {
    const written: PriceVersion[] = [];
    for (const c of changes) {
      switch (c.kind) {
        case 'add_provider':
        case 'change_provider':
          await this.writeProvider(trx, c.provider.id, c.provider, meta);
          break;
        case 'remove_provider':
          await this.writeProvider(trx, c.providerId, null, meta);
          break;
        case 'add_model':
          await this.writeDefinition(trx, c.definition, meta);
          written.push(await this.writePrices(trx, c.definition.id, c.prices, meta));
          break;
        case 'change_model':
        case 'enable_model':
        case 'disable_model':
          await this.writeDefinition(trx, c.definition, meta);
          break;
        case 'set_prices':
          written.push(await this.writePrices(trx, c.modelId, c.prices, meta));
          break;
        case 'set_alias':
          await this.writeAlias(trx, c.alias, c.target, meta);
          break;
        case 'delete_alias':
          await this.writeAlias(trx, c.alias, null, meta);
          break;
        case 'set_markup':
          await this.writeMarkup(trx, c.scope, c.markup, meta);
          break;
        case 'clear_markup':
          await this.writeMarkup(trx, c.scope, null, meta);
          break;
      }
    }
    return written;
  }

  /** A model's price versions, newest (by effective_from) first. */
  async history(modelId: string): Promise<PriceVersion[]> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT id::text AS id, model_id, prices, effective_from, created_at, source, reason FROM price_versions
         WHERE model_id = ? ORDER BY effective_from DESC, price_versions.id DESC`,
        [modelId],
      ),
    );
    return rows.map(versionOf);
  }

  /** A model's definition versions, newest first. */
  async definitionHistory(modelId: string): Promise<DefinitionVersion[]> {
    const rows = rowsOf(
      await this.db.raw(
        `SELECT id::text AS id, definition, created_at, source, reason FROM model_versions WHERE model_id = ? ORDER BY model_versions.id DESC`,
        [modelId],
      ),
    );
    return rows.map((r) => ({
      id: BigInt(r.id as string),
      definition: r.definition as ModelDefinition,
      createdAt: new Date(r.created_at as string),
      source: r.source as string,
      reason: r.reason as string,
    }));
  }

  /** The newest `limit` versions written to the book, of the `kinds` asked for, newest first (ties: the later id). */
  async versionsWritten(
    limit: number,
    kinds: readonly BookVersionKind[] = BOOK_VERSION_KINDS,
  ): Promise<WrittenVersion[]> {
    const parts = kinds.map((k) => `(${VERSIONS_OF[k]} ORDER BY id DESC LIMIT ${Number(limit)})`);
    if (parts.length === 0) return [];
    const rows = rowsOf(
      await this.db.raw(
        `SELECT kind, id::text AS id, subject, created_at, source, reason, value FROM (${parts.join(' UNION ALL ')}) v
         ORDER BY v.created_at DESC, v.id DESC LIMIT ${Number(limit)}`,
      ),
    );
    return rows.map((r) => ({
      kind: r.kind as BookVersionKind,
      id: BigInt(r.id as string),
      subject: r.subject as string,
      createdAt: new Date(r.created_at as string),
      source: r.source as string,
      reason: r.reason as string,
      value: r.value ?? null,
    }));
  }

  /** Markup versions in force now (cleared scopes left out) and those still to come. */
  async markupVersions(): Promise<{ inForce: MarkupVersion[]; scheduled: MarkupVersion[] }> {
    const inForce = await markupsInForce(this.db, null);
    const scheduled = rowsOf(
      await this.db.raw(
        `SELECT ${MARKUP_COLUMNS} FROM markup_versions WHERE effective_from > now() ORDER BY effective_from, markup_versions.id`,
      ),
    ).map(markupVersionOf);
    return { inForce, scheduled };
  }

  private async writeDefinition(trx: Executor, d: ModelDefinition, meta: WriteMeta): Promise<void> {
    await trx.raw(
      'INSERT INTO model_versions (model_id, definition, source, reason) VALUES (?, CAST(? AS jsonb), ?, ?)',
      [d.id, JSON.stringify(d), meta.source, meta.reason],
    );
  }

  private async writePrices(
    trx: Executor,
    modelId: string,
    prices: Record<string, string>,
    meta: WriteMeta,
    shipped = false,
  ): Promise<PriceVersion> {
    const from = shipped ? SHIPPED_FROM : meta.effectiveFrom ? meta.effectiveFrom.toISOString() : null;
    const r = rowsOf(
      await trx.raw(
        `INSERT INTO price_versions (model_id, prices, effective_from, source, reason)
         VALUES (?, CAST(? AS jsonb), COALESCE(CAST(? AS timestamptz), clock_timestamp()), ?, ?)
         RETURNING id::text AS id, model_id, prices, effective_from, created_at, source, reason`,
        [modelId, JSON.stringify(prices), from, meta.source, meta.reason],
      ),
    )[0]!;
    return versionOf(r);
  }

  private async writeProvider(
    trx: Executor,
    id: string,
    definition: ProviderDefinition | null,
    meta: WriteMeta,
  ): Promise<void> {
    await trx.raw(
      'INSERT INTO provider_versions (provider_id, definition, source, reason) VALUES (?, CAST(? AS jsonb), ?, ?)',
      [id, definition === null ? null : JSON.stringify(definition), meta.source, meta.reason],
    );
  }

  private async writeAlias(trx: Executor, alias: string, target: string | null, meta: WriteMeta): Promise<void> {
    await trx.raw('INSERT INTO alias_versions (alias, target, source, reason) VALUES (?, ?, ?, ?)', [
      alias,
      target,
      meta.source,
      meta.reason,
    ]);
  }

  private async writeMarkup(trx: Executor, s: MarkupScope, markup: string | null, meta: WriteMeta): Promise<void> {
    await trx.raw(
      `INSERT INTO markup_versions (provider, model_id, account_group, markup, effective_from, source, reason)
       VALUES (?, ?, ?, ?, COALESCE(CAST(? AS timestamptz), clock_timestamp()), ?, ?)`,
      [
        s.provider,
        s.modelId,
        s.group,
        markup,
        meta.effectiveFrom ? meta.effectiveFrom.toISOString() : null,
        meta.source,
        meta.reason,
      ],
    );
  }
}

const MARKUP_COLUMNS =
  'id::text AS id, provider, model_id, account_group, markup, effective_from, created_at, source, reason';

/** Each scope's markup in force at `at` (the database's text of a time; null: now), cleared scopes left out. */
async function markupsInForce(db: Executor, at: string | null): Promise<MarkupVersion[]> {
  return rowsOf(
    await db.raw(
      `SELECT * FROM (SELECT DISTINCT ON (provider, model_id, account_group) ${MARKUP_COLUMNS} FROM markup_versions
       WHERE effective_from <= COALESCE(CAST(? AS timestamptz), now())
       ORDER BY provider, model_id, account_group, effective_from DESC, markup_versions.id DESC) m
       WHERE markup IS NOT NULL`,
      [at],
    ),
  ).map(markupVersionOf);
}

function markupVersionOf(r: Row): MarkupVersion {
  return {
    id: BigInt(r.id as string),
    provider: r.provider as string,
    modelId: r.model_id as string,
    group: r.account_group as string,
    markup: (r.markup as string | null) ?? null,
    effectiveFrom: new Date(r.effective_from as string),
    createdAt: new Date(r.created_at as string),
    source: r.source as string,
    reason: r.reason as string,
  };
}

function versionOf(r: Row): PriceVersion {
  return {
    id: BigInt(r.id as string),
    modelId: r.model_id as string,
    prices: r.prices as Record<string, string>,
    effectiveFrom: new Date(r.effective_from as string),
    ...(r.created_at ? { createdAt: new Date(r.created_at as string) } : {}),
    ...(r.source !== undefined ? { source: r.source as string } : {}),
    ...(r.reason !== undefined ? { reason: r.reason as string } : {}),
  };
}
