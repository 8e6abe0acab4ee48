// What this instance serves of the book: each model's deployments, served here or not, and each
// provider's models. One rule for the start summary (src/log/startup-summary.ts), ListProviders
// and the console, so they never disagree about a provider that serves only as a deployment, or a
// deployment that takes no traffic for want of a credential.
import type { Catalogue, ResolvedModel } from './catalogue.ts';
import { deploymentsOf, type DeploymentTraffic } from './providers.ts';

/** One deployment of a model, and whether this instance can call it now. */
export interface DeploymentServing {
  id: string;
  provider: string;
  /** Its provider has a credential here (or needs none), and the book has not disabled it: it takes traffic. */
  served: boolean;
  /** The book took it out of traffic. */
  state?: DeploymentTraffic;
  /** Added by this instance's `<NAME>_FALLBACK_*` setting, not the book. */
  fromSetting?: true;
}

/** The model's deployments in the book's order (served here or not), then any a setting adds. */
export function deploymentsServing(m: ResolvedModel): DeploymentServing[] {
  const served = new Set(m.served.map((d) => d.id));
  const listed = deploymentsOf(m);
  const inBook = listed.map((d) => ({
    id: d.id,
    provider: d.provider,
    served: served.has(d.id),
    ...(d.state ? { state: d.state } : {}),
  }));
  const added = m.served
    .filter((d) => !listed.some((x) => x.id === d.id))
    .map((d) => ({ id: d.id, provider: d.provider.id, served: true, fromSetting: true as const }));
  return [...inBook, ...added];
}

/** The enabled models with a deployment on the provider, and of those the ones it serves here now. */
export function providerModels(
  models: readonly ResolvedModel[],
  providerId: string,
): { models: number; served: number } {
  let total = 0;
  let served = 0;
  for (const m of models) {
    if (!m.enabled || !deploymentsServing(m).some((d) => d.provider === providerId)) continue;
    total++;
    if (m.available && m.served.some((d) => d.provider.id === providerId)) served++;
  }
  return { models: total, served };
}

/** What the start summary shows of the catalogue: every model's deployments and every provider's models and credential. */
export function servingSummary(catalogue: Catalogue) {
  const models = catalogue.list();
  return {
    models: models.map((m) => ({
      id: m.id,
      provider: m.provider,
      enabled: m.enabled,
      strategy: m.strategy,
      listsDeployments: m.deployments !== undefined,
      deployments: deploymentsServing(m),
    })),
    providers: catalogue.providers().map((p) => ({
      id: p.id,
      baseUrl: p.baseUrl,
      credential: catalogue.secretOf(p.id) !== undefined,
      authNone: p.auth === 'none',
      fromSetting: p.fromSetting === true,
      ...providerModels(models, p.id),
    })),
  };
}
