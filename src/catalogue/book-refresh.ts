// The price book in force, served by this instance's catalogue: read once at start, then again
// every PRICE_BOOK_REFRESH_MS, so a change written by any instance (or a version scheduled and
// now due) is served here within that time. The instance that writes a change loads it at once
// (services/catalogue.ts).
import type { Logger } from 'pino';
import type { Catalogue } from './catalogue.ts';
import type { PriceBook } from './price-book.ts';
import type { CredentialStore } from './credentials.ts';

/**
 * Loads the book and the providers' credentials into `catalogue` now and keeps them loaded; the
 * answer stops the refresh. Credentials are read again only when a row of theirs changed.
 */
export async function serveBookInForce(
  catalogue: Catalogue,
  book: PriceBook,
  everyMs: number,
  log: Logger,
  credentials?: CredentialStore,
): Promise<() => void> {
  let stamp = '';
  const loadSecrets = async () => {
    if (!credentials) return;
    const now = await credentials.versionStamp();
    if (now === stamp) return;
    // Never the secret: a provider and what is wrong with its credential.
    const secrets = await credentials.secrets((provider, problem) =>
      log.warn({ provider }, `provider credential not usable: ${problem}`),
    );
    catalogue.setStoredSecrets(secrets);
    stamp = now;
  };
  await loadSecrets();
  catalogue.load(await book.read());
  const timer = setInterval(() => {
    loadSecrets().catch((err) => log.warn({ err }, 'reading the provider credentials failed; the ones in use stay'));
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
