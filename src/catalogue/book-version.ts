// The book's version: a name for the book in force that changes whenever anything in it does (a
// provider, a model, a price in force, an alias, a markup). It is the first 16 hex characters of
// the SHA-256 of the book's canonical document (formatBookDocument), so every instance names the
// same book alike. An apply based on one version is refused once the book is another
// (ApplyBook's based_on): what was previewed is what is applied, or nothing.
import { createHash } from 'node:crypto';
import { type BookDocument, formatBookDocument } from './book-document.ts';

/** The version of a document's canonical text (formatBookDocument's). */
export const versionOfText = (canonicalText: string): string =>
  createHash('sha256').update(canonicalText, 'utf8').digest('hex').slice(0, 16);

export const bookVersion = (doc: BookDocument): string => versionOfText(formatBookDocument(doc));
