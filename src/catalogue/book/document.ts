// The price book's document types: what parseBookDocument gives and bookProblems reads.

import type { CatalogueEntry } from '../models.ts';
import type { ProviderDefinition } from '../providers.ts';

/** A markup over the provider's prices for one scope: a model, a provider's models, or (neither) every model. */
export interface BookMarkup {
  /** A provider id of the book; checked by bookProblems. */
  provider?: string;
  model?: string;
  /** The account group it applies to (accounts.price_group); absent: every account without one of its own. */
  group?: string;
  /** A decimal fraction: "0.2" is 20% over the provider's price (src/billing/markup.ts). */
  markup: string;
}

/** A whole book. Mutable, so a change can be made on a copy of the book in force and checked whole. */
export interface BookDocument {
  /**
   * Every provider (providers.ts). A document may leave the list out (one model's change, an
   * export from before providers were book data): the providers in force are kept.
   */
  providers?: ProviderDefinition[];
  models: CatalogueEntry[];
  /** Alias -> the id of the model that serves it. */
  aliases: Record<string, string>;
  markups: BookMarkup[];
}

/**
 * Where a document is wrong and why. `field` names the place: `models[gpt-4o].prices.input_per_mtok`,
 * `aliases[claude-opus-5-5]`, `markups[model:gpt-4o@bot].markup`, `document` for the JSON itself;
 * `message` starts with the model, alias or markup it is about.
 */
export interface BookProblem {
  field: string;
  message: string;
}

export type ParsedBookDocument = { doc: BookDocument } | { problems: BookProblem[] };

/**
 * What a canonical document's `$schema` says: the schema in the same folder. It is beside the
 * shipped book; beside an export once `catalogue schema > book.schema.json` has written it there.
 */
export const BOOK_SCHEMA_REF = './book.schema.json';
