// The price book in force, served by this instance's catalogue: read once at start, then again
// every PRICE_BOOK_REFRESH_MS, so a change written by any instance (or a version scheduled and
// now due) is served here within that time. The instance that writes a change loads it at once
// (services/catalogue.ts).
import type { Logger } from 'pino';
import type { Catalogue } from './catalogue.ts';
import type { PriceBook } from './price-book.ts';

/** Loads the book into `catalogue` now and keeps it loaded; the answer stops the refresh. */
export async function serveBookInForce(
  catalogue: Catalogue,
  book: PriceBook,
  everyMs: number,
  log: Logger,
): Promise<() => void> {
  catalogue.load(await book.read());
  const timer = setInterval(() => {
    book.read().then(
      (state) => {
        try {
          catalogue.load(state);
        } catch (err) {
          log.error({ err }, 'the price book in force is not valid; the catalogue stays as it was');
        }
      },
      (err) => log.warn({ err }, 'reading the price book failed; the catalogue stays as it was'),
    );
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
