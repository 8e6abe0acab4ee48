// Providers and models with several deployments on a console test gateway's book (a database of
// its own: test/support/console.ts), added through the CatalogueService RPCs as an operator adds
// them (docs/providers.md), for the console's Providers page and its API to read back; and a
// credential sealed under another key, which the gateway reports as unreadable.
import { randomBytes } from 'node:crypto';
import { type CredentialKey, seal } from '../../src/catalogue/credentials.ts';
import type { ConsoleGateway } from './console.ts';

export interface ProviderSpec {
  id: string;
  baseUrl: string;
  dialect?: string;
  /** An environment variable's name, a secret to seal (the gateway needs CREDENTIALS_KEY), or none. */
  credential?: { env: string } | { secret: string };
}

/** Adds each provider to the book and sets its credential. */
export async function addProviders(gw: ConsoleGateway, specs: ProviderSpec[]): Promise<void> {
  for (const p of specs) {
    await gw.catalogue.upsertProvider({
      providerJson: JSON.stringify({ id: p.id, dialect: p.dialect ?? 'openai', baseUrl: p.baseUrl }),
      reason: 'console test',
      source: 'console-test',
    });
    const c = p.credential;
    if (!c) continue;
    await gw.catalogue.setProviderCredential({
      providerId: p.id,
      credential: 'env' in c ? { case: 'envName', value: c.env } : { case: 'secret', value: c.secret },
      source: 'console-test',
    });
  }
}

/**
 * Adds a chat model like gpt-4o-mini (its prices, limits and definition), served by `deployments`
 * (book deployment entries: id, provider, upstreamId, weight, priority, limits…) and routed by
 * `routing` (weighted unless given).
 */
export async function addRoutedModel(
  gw: ConsoleGateway,
  id: string,
  deployments: Record<string, unknown>[],
  routing = 'weighted',
): Promise<void> {
  const book = JSON.parse((await gw.catalogue.exportBook({})).document) as { models: Record<string, unknown>[] };
  const template = book.models.find((m) => m.id === 'gpt-4o-mini');
  if (!template) throw new Error('the book has no gpt-4o-mini to copy');
  const entry = {
    ...structuredClone(template),
    id,
    provider: deployments[0]!.provider,
    upstreamId: 'gpt-4o-mini',
    enabled: true,
    routing,
    deployments,
  };
  await gw.catalogue.upsertModel({ modelJson: JSON.stringify(entry), reason: 'console test', source: 'console-test' });
}

/** Stores `secret` for the provider sealed under a key the gateway does not have: it cannot open it. */
export async function sealUnderAnotherKey(gw: ConsoleGateway, providerId: string, secret: string): Promise<void> {
  const key: CredentialKey = { key: randomBytes(32), id: randomBytes(8).toString('hex'), where: 'a console test' };
  await gw.db.query(
    `INSERT INTO provider_credentials (provider_id, sealed, key_id, env_name, source) VALUES ($1, $2, $3, NULL, 'console-test')
     ON CONFLICT (provider_id) DO UPDATE SET sealed = EXCLUDED.sealed, key_id = EXCLUDED.key_id, env_name = NULL,
       version = provider_credentials.version + 1, updated_at = now()`,
    [providerId, seal(key, secret, providerId), key.id],
  );
}
