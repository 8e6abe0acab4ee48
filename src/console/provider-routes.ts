// The operator's routes for providers and deployments (docs/console.md#api, docs/providers.md):
// the providers with their credentials' state and a test call, the models' deployments with
// their live state, the book's history, and the changes the Providers page makes. A change of the
// book (a provider or deployment added, a deployment's weight, priority, upstream model, limits,
// prices or traffic) goes through ApplyBook (book-actions.ts), the book page's one write path. A
// credential is not book data: it goes to SetProviderCredential once and is never answered,
// logged or kept by the console. A cooldown ended by hand is not either: EndDeploymentCooldown
// ends it on every instance. Only an operator session reaches these (api.ts), and a change only
// from the console's own origin with its CSRF token, as JSON.
import type { FastifyInstance } from 'fastify';
import { API, access, OPERATOR_CAUSE, type RouteKit } from './kit.ts';
import {
  addDeployment,
  addProvider,
  applyEdit,
  changeDeployment,
  changeReason,
  deploymentChange,
  deploymentEntry,
  providerEntry,
  writeOptions,
} from './book-actions.ts';
import type {
  ApplyAnswer,
  BookHistory,
  CooldownEndAnswer,
  CooldownEndRequest,
  CredentialAnswer,
  CredentialRequest,
  DeploymentChangeRequest,
  DeploymentList,
  NewDeploymentRequest,
  NewProviderRequest,
  ProviderList,
  ProviderTest,
} from './web/wire-types.ts';
import {
  bookVersionRow,
  deploymentRow,
  intParam,
  invalid,
  jsonObject,
  modelDeployments,
  param,
  providerCredential,
  providerRow,
  providerTest,
  type Query,
  type Unchecked,
} from './wire.ts';

type WithId = { Params: { id: string } };

/** A model and one of its deployments, as a change names them. */
function deploymentNamed(body: Unchecked<{ model: string; deployment: string }>): { model: string; id: string } {
  if (typeof body.model !== 'string' || body.model === '' || body.model.length > 128)
    throw invalid('model', "the model's id");
  if (typeof body.deployment !== 'string' || body.deployment === '' || body.deployment.length > 64)
    throw invalid('deployment', "the deployment's id within its model");
  return { model: body.model, id: body.deployment };
}

/** The secret or the variable's name, exactly one; never quoted back, whatever is wrong with it. */
function credentialOf(body: Unchecked<Record<'secret' | 'env_name', string>>) {
  const given = (['secret', 'env_name'] as const).filter((k) => body[k] !== undefined);
  const value = given.length === 1 ? body[given[0]!] : undefined;
  if (typeof value !== 'string' || value === '')
    throw invalid(
      'body',
      'send exactly one of secret (the key itself, sealed here) or env_name (a variable every instance has)',
    );
  return given[0] === 'secret' ? { case: 'secret' as const, value } : { case: 'envName' as const, value };
}

export function registerProviderRoutes(app: FastifyInstance, kit: RouteKit): void {
  const { catalogue } = kit;
  const operator = access('operator');

  // No answer carries a credential: the RPCs give a credential's form and state only, and the
  // mappers (wire.ts) leave out headers and definitions.
  app.get(`${API}/admin/providers`, operator, async (): Promise<ProviderList> => {
    const r = await catalogue.listProviders({});
    return { providers: r.providers.map(providerRow) };
  });

  // One authenticated GET to the provider with its credential on this instance (at most 10 s).
  app.post<WithId>(
    `${API}/admin/providers/:id/test`,
    operator,
    async (req): Promise<ProviderTest> => providerTest(await catalogue.testProvider({ providerId: req.params.id })),
  );

  app.post(`${API}/admin/providers`, operator, async (req): Promise<ApplyAnswer> => {
    const body = jsonObject<NewProviderRequest>(req.body);
    const entry = providerEntry(body);
    return applyEdit(catalogue, writeOptions(body, `console: add provider ${entry.id}`), addProvider(entry));
  });

  // Sealed (or named) by the credential store; the answer is its state, as the providers list has it.
  app.post<WithId>(`${API}/admin/providers/:id/credential`, operator, async (req): Promise<CredentialAnswer> => {
    const credential = credentialOf(jsonObject<CredentialRequest>(req.body));
    const r = await catalogue.setProviderCredential({ providerId: req.params.id, credential, source: OPERATOR_CAUSE });
    kit.deps.log.info({ provider: r.providerId, form: credential.case }, 'console: provider credential set');
    return { provider_id: r.providerId, credential: providerCredential(r.credential) };
  });

  app.get(`${API}/admin/deployments`, operator, async (req): Promise<DeploymentList> => {
    const r = await catalogue.listDeployments({ modelId: param(req.query as Query, 'model') ?? '' });
    return { models: r.models.map(modelDeployments) };
  });

  app.post(`${API}/admin/deployments/add`, operator, async (req): Promise<ApplyAnswer> => {
    const body = jsonObject<NewDeploymentRequest>(req.body);
    if (typeof body.model !== 'string' || body.model === '') throw invalid('model', "the model's id");
    const entry = deploymentEntry(body);
    const options = writeOptions(body, `console: add deployment ${body.model}/${entry.id}`);
    return applyEdit(catalogue, options, addDeployment(body.model, entry));
  });

  app.post(`${API}/admin/deployments/change`, operator, async (req): Promise<ApplyAnswer> => {
    const body = jsonObject<DeploymentChangeRequest>(req.body);
    const { model, id } = deploymentNamed(body);
    const { fields, set } = deploymentChange(body);
    const options = writeOptions(body, changeReason(model, id, fields, body.state));
    return applyEdit(catalogue, options, changeDeployment(model, id, set));
  });

  app.post(`${API}/admin/deployments/end-cooldown`, operator, async (req): Promise<CooldownEndAnswer> => {
    const { model, id } = deploymentNamed(jsonObject<CooldownEndRequest>(req.body));
    const r = await catalogue.endDeploymentCooldown({ modelId: model, deploymentId: id, source: OPERATOR_CAUSE });
    return { was_cooling: r.wasCooling, deployment: deploymentRow(r.deployment!) };
  });

  // The book's versions, newest first; `kind` a comma-separated list (provider, model, prices, alias, markup).
  app.get(`${API}/admin/book/history`, operator, async (req): Promise<BookHistory> => {
    const q = req.query as Query;
    const kinds = (param(q, 'kind', 100) ?? '').split(',').filter(Boolean);
    const r = await catalogue.listBookHistory({ limit: intParam(q, 'limit', 50, 1, 200), kinds });
    return { versions: r.versions.map(bookVersionRow) };
  });
}
