// How large a book and each thing in it may be, and how a refusal quotes a value past its limit.

import type { BookProblem } from './document.ts';

/** The names a model or an alias can have: the ones MODEL_ALIASES accepts (src/config/config.ts). */
export const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;
/** An account group (accounts.price_group). */
export const GROUP = /^[a-z0-9_-]{1,32}$/;

/**
 * How large a book and each thing in it may be (docs/price-book.md#limits): the document is
 * refused past `documentBytes` before it is parsed, and a string past its field's limit before
 * what it means is checked. The admin RPCs bound their own string fields by the same numbers
 * (service.ts), and the RPC port reads at least CATALOGUE_READ_MAX_BYTES of a CatalogueService
 * message, so a document past its limit reaches the service and is refused naming it. Lengths of
 * strings are in characters (UTF-16 code units), the document's in UTF-8 bytes.
 */
export const BOOK_LIMITS = {
  /** The whole document (ApplyBook, PreviewBook, `catalogue apply -f`), and UpsertModel's model_json. */
  documentBytes: 4 * 1024 * 1024,
  /** A model id, an alias, the model a markup names: MODEL_NAME's own bound. */
  name: 128,
  upstreamId: 256,
  /** A price key, and how many prices one model has (a kind is billed by at most 21). */
  priceKey: 64,
  prices: 64,
  /** Tools in a model's toolUse, each named by a key bounded as a price key. */
  tools: 64,
  /** A price, a markup or a vision multiplier: a decimal string. */
  decimal: 64,
  /** An account group: GROUP's own bound. */
  group: 32,
  schemaRef: 1024,
  /** Who made a change and why (WriteMeta), on every admin RPC that writes. */
  source: 64,
  reason: 1024,
  /** A deployment's weight: its share of its priority's traffic, a whole number from 0 to this. */
  weight: 1_000_000,
  /** Problems one refusal lists; finding more stops there, so a huge bad document costs no more to refuse than a small one. */
  problems: 100,
} as const;

/** The least the RPC port reads of a CatalogueService message: a document at its limit, even with every byte escaped to two (Connect's JSON), and the other fields. */
export const CATALOGUE_READ_MAX_BYTES = 2 * BOOK_LIMITS.documentBytes + 64 * 1024;

/** How much of a value past its limit an error quotes. */
const QUOTED_PREFIX = 64;

/** The first QUOTED_PREFIX characters of `s`, not splitting a surrogate pair. */
function prefixOf(s: string): string {
  const last = s.charCodeAt(QUOTED_PREFIX - 1);
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? QUOTED_PREFIX - 1 : QUOTED_PREFIX);
}

/**
 * `s` as a message or a field name quotes it: whole up to `max` characters (a valid name, which
 * is what people look for), else its first characters, '…' and its length, so no refusal is
 * larger than the limits it names, whatever it quotes.
 */
export function clip(s: string, max: number = BOOK_LIMITS.name): string {
  return s.length <= max ? s : `${prefixOf(s)}… (${s.length} characters)`;
}

/** The refusal of a text past BOOK_LIMITS.documentBytes, naming the limit; `what` says what the text is. */
export function documentSizeProblem(text: string, what = 'the document', field = 'document'): BookProblem | undefined {
  // A character is 1 to 3 UTF-8 bytes: a short text needs no counting.
  if (text.length * 3 <= BOOK_LIMITS.documentBytes) return undefined;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= BOOK_LIMITS.documentBytes) return undefined;
  return {
    field,
    message: `${what} is ${bytes} bytes; a price book document is at most ${BOOK_LIMITS.documentBytes} bytes (${BOOK_LIMITS.documentBytes / 1024 / 1024} MiB, docs/price-book.md#limits)`,
  };
}

/** `s` past `max` characters: the refusal naming the limit and quoting only the start of `s`. */
export function tooLongMessage(s: string, max: number): string {
  return `is ${s.length} characters long (${show(s)}); at most ${max} characters`;
}

/**
 * A number of the document that no double holds (`1e999`): kept as written, so that the field it is
 * in is refused as the wrong type quoting it, rather than read as Infinity (which JSON writes null).
 */
export class UnreadableNumber {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

export type Json = Record<string, unknown>;
export const isObject = (v: unknown): v is Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof UnreadableNumber);
/** A value as a message quotes it: a string's start when it is long (whatever its size), anything else as JSON cut at 40 characters. */
export const show = (v: unknown) => {
  if (v instanceof UnreadableNumber) return v.text.length > 40 ? `${v.text.slice(0, 37)}...` : v.text;
  if (typeof v === 'string') return v.length > QUOTED_PREFIX ? `${JSON.stringify(prefixOf(v))}…` : JSON.stringify(v);
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
};

/** The last problem of a list cut at BOOK_LIMITS.problems: there were more (a refusal tells them apart by identity). */
export const MORE_PROBLEMS: BookProblem = Object.freeze({
  field: 'document',
  message: `more problems than the ${BOOK_LIMITS.problems} listed; fix these and check the document again`,
});

/** At most BOOK_LIMITS.problems of `problems`, then MORE_PROBLEMS when there were more. */
export function capped(problems: BookProblem[]): BookProblem[] {
  return problems.length <= BOOK_LIMITS.problems
    ? problems
    : [...problems.slice(0, BOOK_LIMITS.problems), MORE_PROBLEMS];
}
export const full = (problems: readonly BookProblem[]) => problems.length > BOOK_LIMITS.problems;
