// The book the gateway ships with: shipped-book.json beside this file (docs/price-book.md). An
// empty database starts from it (each model and alias the book has no version of gets the
// shipped one); tests price their expectations with it. Read once and checked as any book is, so
// a bad edit to the file stops whatever loads it, naming each problem.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bookProblems, parseBookDocument, type BookDocument } from './book-document.ts';
import type { CatalogueEntry } from './models.ts';

const FILE = new URL('./shipped-book.json', import.meta.url);

let shipped: BookDocument | undefined;

function read(): BookDocument {
  const parsed = parseBookDocument(fs.readFileSync(FILE, 'utf8'));
  const problems = 'doc' in parsed ? bookProblems(parsed.doc) : parsed.problems;
  if (!('doc' in parsed) || problems.length > 0)
    throw new Error(
      `the shipped price book ${fileURLToPath(FILE)} has ${problems.length} problem(s):\n${problems
        .map((p) => `  ${p.field}: ${p.message}`)
        .join('\n')}`,
    );
  return deepFreeze(parsed.doc);
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/** The shipped book, checked; each call a copy of its own, so a caller may edit it. */
export function shippedBook(): BookDocument {
  shipped ??= read();
  return structuredClone(shipped);
}

/** The shipped catalogue: every model the gateway ships with, with its shipped prices (read-only). */
export const MODELS: readonly CatalogueEntry[] = (shipped ??= read()).models;
