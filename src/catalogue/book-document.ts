// The price book as one JSON document: every model (its definition and prices), every alias and
// every markup. It is what `catalogue export` writes, what `catalogue apply` reads, and the form
// of the shipped defaults (shipped-book.json); docs/price-book.md describes it field by field.
//
// Reading one is two steps, so that every problem is reported at once: parseBookDocument checks
// the JSON and its shape (each field there with its type, nothing unknown), bookProblems checks
// what the values mean (prices, references, scopes). A document is usable only when both find
// nothing. formatBookDocument writes the one canonical text of a document, so export -> apply ->
// export gives the same bytes and two books differ in text only where they differ in meaning.
//
// The parts are in book/: document.ts (the types), limits.ts, json.ts (JSON with positions),
// shape.ts (the fields and their types), meaning.ts (bookProblems) and canonical.ts (the text).

import type { CatalogueEntry } from './models.ts';
import type { ProviderDefinition } from './providers.ts';
import type { BookMarkup, ParsedBookDocument } from './book/document.ts';
import { JsonSyntaxError, lineAndColumn, parseJson, positionsIn, type ParsedJson } from './book/json.ts';
import { capped, documentSizeProblem } from './book/limits.ts';
import { fieldOfPath, shapeProblems } from './book/shape.ts';

export {
  BOOK_SCHEMA_REF,
  type BookDocument,
  type BookMarkup,
  type BookProblem,
  type ParsedBookDocument,
} from './book/document.ts';
export {
  BOOK_LIMITS,
  CATALOGUE_READ_MAX_BYTES,
  clip,
  documentSizeProblem,
  MORE_PROBLEMS,
  tooLongMessage,
} from './book/limits.ts';
export { markupScope } from './book/shape.ts';
export { bookProblems } from './book/meaning.ts';
export { canonicalEntry, canonicalProvider, formatBookDocument } from './book/canonical.ts';

// ---------------------------------------------------------------------------------------------
// Parsing: the JSON, then its shape.

/**
 * Reads a book document: one past BOOK_LIMITS.documentBytes is refused unread; then a JSON syntax
 * error (with its line and column), or every field that is missing, unknown, of the wrong type or
 * past its limit (up to BOOK_LIMITS.problems of them).
 */
export function parseBookDocument(text: string): ParsedBookDocument {
  const tooLarge = documentSizeProblem(text);
  if (tooLarge) return { problems: [tooLarge] };
  let json: ParsedJson;
  try {
    json = parseJson(text);
  } catch (e) {
    if (!(e instanceof JsonSyntaxError)) throw e;
    return { problems: [{ field: 'document', message: `${lineAndColumn(text, e.at)}: ${e.message}` }] };
  }
  const position = positionsIn(text);
  const problems = json.duplicates.map(({ path, at }) => {
    const field = fieldOfPath(path, json.value);
    return {
      field,
      message: `${field} is given twice (the second at ${position(at)}); a key appears once in an object`,
    };
  });
  problems.push(...shapeProblems(json.value));
  if (problems.length > 0) return { problems: capped(problems) };
  const root = json.value as Record<string, unknown>;
  return {
    doc: {
      ...(root.providers !== undefined ? { providers: root.providers as ProviderDefinition[] } : {}),
      models: root.models as CatalogueEntry[],
      aliases: root.aliases as Record<string, string>,
      markups: root.markups as BookMarkup[],
    },
  };
}
