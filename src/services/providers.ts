// CatalogueService's providers, their credentials and the models' deployments (docs/providers.md).
// A provider is book data, changed like the rest of the book (services/catalogue.ts `change`:
// the proposed book checked whole, written in one transaction, served here at once). A credential
// is not: it goes to the credential store (catalogue/credentials.ts), and this instance reads the
// store again at once after a write. No answer, refusal or log line carries a credential: the
// store's refusals never quote one, and TestProvider reports a status or an error code only.
import { STATUS_CODES } from 'node:http';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, type ConnectError, type ServiceImpl } from '@connectrpc/connect';
import type {
  CatalogueService,
  DeploymentSchema,
  ProviderCredentialSchema,
  ProviderSchema,
  TestProviderResponseSchema,
} from '../gen/gateway/v1/catalogue_pb.js';
import { gatewayError, notFound } from '../errors/errors.ts';
import type { Catalogue, ResolvedModel, ResolvedProvider } from '../catalogue/catalogue.ts';
import type { PriceBook, WriteMeta } from '../catalogue/price-book.ts';
import {
  BOOK_LIMITS,
  canonicalProvider,
  clip,
  documentSizeProblem,
  parseBookDocument,
  type BookDocument,
  type BookProblem,
} from '../catalogue/book-document.ts';
import { describeChange, type Change } from '../catalogue/book-diff.ts';
import { credentialHint, type BookWarning } from '../catalogue/credential-warnings.ts';
import { CredentialError, type CredentialInfo, type CredentialStore } from '../catalogue/credentials.ts';
import { deploymentsOf, type DeploymentTraffic, type ProviderDefinition } from '../catalogue/providers.ts';
import { providerModels } from '../catalogue/serving.ts';
import type { DeploymentHealth } from '../inference/routing/deployment-health.ts';
import type { Upstream } from '../inference/upstream/upstream.ts';
import { DEFAULT_ANTHROPIC_VERSION } from '../inference/providers/anthropic.ts';

/** What the provider RPCs need beyond the book: the credential store, and the inference routes' parts (src/process/server.ts). */
export interface ProviderParts {
  credentials: CredentialStore;
  /** The upstream calls, for the passive health of this instance's deployments. */
  calls: { readonly health: DeploymentHealth };
  upstream: Upstream;
  /** TestProvider's bound; 10 s unless a test says otherwise. */
  testTimeoutMs?: number;
  /** The deployments' shared windows, for their limit use. */
  deploymentLimits?: { current(): Promise<Map<string, { requests: number; tokens: bigint; inFlight: number }>> };
  /** Ends a cooldown on every instance (inference/routing/cooldown-ends.ts); without it, on this one only. */
  cooldowns?: { end(key: string, source: string): Promise<boolean> };
}

/** A request's string and its limit: `[field, value, limit, what it is]` (services/catalogue.ts). */
type Bounded = readonly [field: string, value: string, max: number, what: string];

/** The catalogue service's own ways to write the book and to refuse (services/catalogue.ts). */
export interface BookWrites {
  catalogue: Catalogue;
  book: PriceBook;
  /** Makes `edit` on the book in force and writes what it changes (serving it here at once), or refuses it whole. */
  change(
    edit: (doc: BookDocument) => void,
    meta: WriteMeta,
  ): Promise<{ changes: Change[]; warnings: BookWarning[]; version: string }>;
  metaOf(req: { source: string; reason: string }): WriteMeta;
  metaFields(req: { source: string; reason: string }): Bounded[];
  checkLengths(code: string, fields: readonly Bounded[]): void;
  refused(code: string, field: string, message: string): ConnectError;
  invalidBook(problems: readonly BookProblem[]): ConnectError;
}

type ProviderMethods = Pick<
  ServiceImpl<typeof CatalogueService>,
  | 'listProviders'
  | 'upsertProvider'
  | 'removeProvider'
  | 'setProviderCredential'
  | 'removeProviderCredential'
  | 'testProvider'
  | 'listDeployments'
  | 'endDeploymentCooldown'
>;
type CredentialInit = MessageInitShape<typeof ProviderCredentialSchema>;
type ProviderInit = MessageInitShape<typeof ProviderSchema>;
type DeploymentInit = MessageInitShape<typeof DeploymentSchema>;
type TestInit = MessageInitShape<typeof TestProviderResponseSchema>;

/** A deployment as the book (or a setting) gives it, before its health here. */
interface DeploymentBase {
  key: string;
  id: string;
  provider: string;
  upstreamId: string;
  weight: number;
  priority: number;
  ownPrices: boolean;
  served: boolean;
  fromSetting?: boolean;
  limits?: { rpm?: number; tpm?: number; concurrency?: number };
  /** The book's word on its traffic. */
  state: 'enabled' | DeploymentTraffic;
}

/** Each deployment's use of its current minute window, on every instance. */
type WindowUse = ReadonlyMap<string, { requests: number; tokens: bigint; inFlight: number }>;

const TEST_TIMEOUT_MS = 10_000;
const providerIdField = (id: string): Bounded => ['provider_id', id, BOOK_LIMITS.name, 'a provider id'];

/** A provider the book (or, for TestProvider, this instance) does not have. */
const unknownProvider = (id: string, where = 'the book') =>
  gatewayError({
    httpStatus: 409,
    rpcCode: Code.FailedPrecondition,
    type: 'invalid_request_error',
    code: 'unknown_provider',
    param: 'provider_id',
    message: `No provider '${clip(id)}' in ${where}: add it first (UpsertProvider, \`providers add\`).`,
  });

/** The store's refusal as the caller's; its messages never quote a secret or a variable's value. */
function credentialRefusal(err: unknown, refused: BookWrites['refused']): unknown {
  if (!(err instanceof CredentialError)) return err;
  if (err.code === 'no_credentials_key')
    return gatewayError({
      httpStatus: 409,
      rpcCode: Code.FailedPrecondition,
      type: 'invalid_request_error',
      code: err.code,
      param: 'secret',
      message: err.message,
    });
  return refused(err.code, err.code === 'invalid_env_name' ? 'env_name' : 'secret', err.message);
}

/** The models, deployments and markups of `doc` that name provider `id`. */
function usersOf(doc: BookDocument, id: string): string[] {
  const models = doc.models.filter((m) => m.provider === id || m.deployments?.some((d) => d.provider === id));
  const markups = doc.markups.filter((m) => m.provider === id);
  return [
    ...models.map((m) => `model ${clip(m.id)}`),
    ...(markups.length ? [`${markups.length === 1 ? 'a markup' : `${markups.length} markups`} of provider:${id}`] : []),
  ];
}

/** The cheap authenticated GET each dialect answers: a list of models, or BFL's credits (no credential to one that needs none). */
export function probeOf(p: ResolvedProvider, key: string): { url: string; headers: Record<string, string> } {
  const base = p.baseUrl;
  const cred = (name: string, value = key): Record<string, string> => (p.auth === 'none' ? {} : { [name]: value });
  const bearer = cred('authorization', `Bearer ${key}`);
  const [url, auth]: [string, Record<string, string>] =
    p.dialect === 'azure-openai'
      ? [`${base}/openai/models?api-version=${encodeURIComponent(p.apiVersion ?? '')}`, cred('api-key')]
      : p.dialect === 'anthropic'
        ? [`${base}/v1/models`, { ...cred('x-api-key'), 'anthropic-version': DEFAULT_ANTHROPIC_VERSION }]
        : p.dialect === 'cohere'
          ? [`${base}/v1/models`, bearer]
          : p.dialect === 'bfl'
            ? [`${base}/credits`, cred('x-key')]
            : [`${base}/models`, bearer];
  return { url, headers: { ...p.headers, ...auth, accept: 'application/json' } };
}

/** A credential set for a provider the book says needs none: it would never be sent. */
const credentialNotNeeded = (id: string) =>
  gatewayError({
    httpStatus: 409,
    rpcCode: Code.FailedPrecondition,
    type: 'invalid_request_error',
    code: 'credential_not_needed',
    param: 'provider_id',
    message: `Provider '${clip(id)}' needs no credential ("auth": "none" in the book): it is called without one. Remove "auth" from its entry first to give it one.`,
  });

/** What stopped a test call, as an error code: never its message's details, never a header. */
function failureOf(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; code?: unknown; cause?: { code?: unknown } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return `no answer within ${timeoutMs} ms`;
  const code = typeof e.code === 'string' ? e.code : typeof e.cause?.code === 'string' ? e.cause.code : e.name;
  return `the call failed: ${code ?? 'unknown error'}`;
}

/** A provider's models as ListProviders answers them: the same counts as the start summary's. */
const countsOf = (c: { models: number; served: number }) => ({ models: c.models, servedModels: c.served });

export function providerMethods(w: BookWrites, parts: ProviderParts): ProviderMethods {
  const { catalogue, book } = w;
  const { credentials, upstream } = parts;
  const { health } = parts.calls;
  const testTimeoutMs = parts.testTimeoutMs ?? TEST_TIMEOUT_MS;

  /** Reads the stored credentials into the catalogue now; each unusable one's problem, by provider. */
  const reload = async (): Promise<Map<string, string>> => {
    const problems = new Map<string, string>();
    catalogue.setStoredSecrets(await credentials.secrets((provider, problem) => problems.set(provider, problem)));
    return problems;
  };

  const credentialOf = (id: string, info: CredentialInfo | undefined, problems: Map<string, string>) => {
    if (catalogue.providers().find((p) => p.id === id)?.auth === 'none')
      return { form: 'not_needed', usable: true } satisfies CredentialInit;
    const usable = catalogue.secretOf(id) !== undefined;
    if (!info) return { form: usable ? 'setting' : 'none', usable } satisfies CredentialInit;
    return {
      form: info.form,
      envName: info.envName ?? '',
      version: info.version,
      updatedAt: timestampFromDate(info.updatedAt),
      source: info.source,
      unreadable: info.unreadable,
      usable,
      problem: problems.get(id) ?? '',
    } satisfies CredentialInit;
  };

  /** Each provider as ListProviders shows it, with its credential on this instance. */
  const providerMessages = async (list: readonly ProviderDefinition[]): Promise<ProviderInit[]> => {
    const problems = await reload();
    const infos = new Map((await credentials.list()).map((c) => [c.providerId, c]));
    const models = catalogue.list();
    const served = new Map(catalogue.providers().map((p) => [p.id, p]));
    return list.map((p) => ({
      id: p.id,
      dialect: p.dialect,
      baseUrl: p.baseUrl,
      apiVersion: p.apiVersion ?? '',
      headers: { ...p.headers },
      timeoutMs: BigInt(p.timeoutMs ?? 0),
      servedBaseUrl: served.get(p.id)?.baseUrl ?? '',
      credential: credentialOf(p.id, infos.get(p.id), problems),
      ...countsOf(providerModels(models, p.id)),
      definitionJson: JSON.stringify(canonicalProvider(p)),
      auth: p.auth ?? '',
    }));
  };

  /** The provider entry of an UpsertProvider request, checked by the document's own rules. */
  const entryOf = (json: string): ProviderDefinition => {
    const tooLarge = documentSizeProblem(json, 'provider_json', 'provider_json');
    if (tooLarge) throw w.invalidBook([tooLarge]);
    const parsed = parseBookDocument(`{"providers":[${json}],"models":[],"aliases":{},"markups":[]}`);
    if ('problems' in parsed) throw w.invalidBook(parsed.problems);
    const entry = parsed.doc.providers?.[0];
    if (!entry || parsed.doc.providers!.length !== 1 || parsed.doc.models.length > 0)
      throw w.refused('invalid_book', 'provider_json', 'provider_json must be one provider entry (a JSON object)');
    return entry;
  };

  const deploymentRow = (base: DeploymentBase, windows: WindowUse): DeploymentInit => {
    const { limits, ...fields } = base;
    const h = health.stateOf(base.key);
    const used = windows.get(base.key);
    return {
      ...fields,
      rpm: limits?.rpm ?? 0,
      tpm: BigInt(limits?.tpm ?? 0),
      windowRequests: used?.requests ?? 0,
      windowTokens: used?.tokens ?? 0n,
      concurrency: limits?.concurrency ?? 0,
      inFlight: used?.inFlight ?? 0,
      ...(h.p50LatencyMs !== undefined ? { p50LatencyMs: BigInt(h.p50LatencyMs) } : {}),
      admission: h.admission,
      ...(h.coolUntil ? { coolUntil: timestampFromDate(h.coolUntil) } : {}),
      consecutiveFails: h.consecutiveFails,
      ...(h.latencyMs !== undefined ? { latencyMs: BigInt(h.latencyMs) } : {}),
      ...(h.errorRate !== undefined ? { errorRate: h.errorRate } : {}),
      recentAnswers: h.recentAnswers,
      recentFailures: h.recentFailures,
      ...(h.recentSince ? { recentSince: timestampFromDate(h.recentSince) } : {}),
      cooldowns: h.cooldowns,
    };
  };

  /** The model's deployments in the book's order (served here or not), then any a setting adds. */
  const deploymentsOfModel = (m: ResolvedModel, windows: WindowUse): DeploymentInit[] => {
    const listed = deploymentsOf(m);
    const served = new Map(m.served.map((d) => [d.id, d]));
    const inBook = listed.map((d) =>
      deploymentRow(
        {
          key: `${m.id}/${d.id}`,
          id: d.id,
          provider: d.provider,
          upstreamId: d.upstreamId ?? m.upstreamId,
          weight: d.weight ?? 1,
          priority: d.priority ?? 0,
          ownPrices: d.prices !== undefined && Object.keys(d.prices).length > 0,
          served: served.has(d.id),
          ...(d.limits ? { limits: d.limits } : {}),
          state: d.state ?? 'enabled',
        },
        windows,
      ),
    );
    const added = m.served
      .filter((d) => !listed.some((x) => x.id === d.id))
      .map((d) =>
        deploymentRow(
          {
            key: d.key,
            id: d.id,
            provider: d.provider.id,
            upstreamId: d.upstreamId,
            weight: d.weight,
            priority: d.priority,
            ownPrices: d.ownPrices,
            served: true,
            fromSetting: true,
            state: 'enabled',
          },
          windows,
        ),
      );
    return [...inBook, ...added];
  };

  /** One GET of the provider's probe with its credential here: the status, or what failed. */
  const probe = async (p: ResolvedProvider): Promise<TestInit> => {
    const key = catalogue.secretOf(p.id);
    const { url, headers } = probeOf(p, key ?? '');
    if (key === undefined && p.auth !== 'none')
      return {
        ok: false,
        message: `provider ${p.id} has no credential on this instance (\`providers set-credential\`)`,
        url,
      };
    const started = performance.now();
    const elapsed = () => BigInt(Math.round(performance.now() - started));
    try {
      const res = await upstream.get(url, headers, AbortSignal.timeout(testTimeoutMs));
      const latencyMs = elapsed();
      // Never read into the answer: a provider's error body may quote part of the key.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => {});
      const status = res.statusCode;
      return {
        ok: status >= 200 && status < 300,
        httpStatus: status,
        latencyMs,
        message: `${status} ${STATUS_CODES[status] ?? ''}`.trim(),
        url,
      };
    } catch (err) {
      return { ok: false, latencyMs: elapsed(), message: failureOf(err, testTimeoutMs), url };
    }
  };

  return {
    async listProviders() {
      const state = await book.read();
      const list = [...state.providers.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      return { providers: await providerMessages(list) };
    },

    async upsertProvider(req) {
      w.checkLengths('invalid_book', w.metaFields(req));
      const entry = entryOf(req.providerJson);
      let created = false;
      const { changes } = await w.change((doc) => {
        const list = doc.providers ?? [];
        created = !list.some((p) => p.id === entry.id);
        doc.providers = [...list.filter((p) => p.id !== entry.id), entry];
      }, w.metaOf(req));
      const [provider] = await providerMessages([entry]);
      // A new provider needs its credential next (docs/providers.md's worked example), unless it needs none.
      const warnings: BookWarning[] = catalogue.credentialUsable(entry.id)
        ? []
        : [
            {
              subject: entry.id,
              message: `provider ${entry.id} has no credential on this instance: deployments on it take no traffic until it has one; ${credentialHint(entry.id)}`,
            },
          ];
      return { provider, created, changes: changes.map(describeChange), warnings };
    },

    async removeProvider(req) {
      const id = req.providerId;
      w.checkLengths('invalid_book', [providerIdField(id), ...w.metaFields(req)]);
      const { changes } = await w.change((doc) => {
        const users = doc.providers?.some((p) => p.id === id) ? usersOf(doc, id) : [];
        if (users.length > 0)
          throw w.refused(
            'invalid_book',
            'provider_id',
            `provider ${clip(id)} is still named by ${users.join(', ')}: point them at another provider (or remove those deployments and markups) first; nothing changed`,
          );
        doc.providers = (doc.providers ?? []).filter((p) => p.id !== id);
      }, w.metaOf(req));
      const removed = changes.some((c) => c.kind === 'remove_provider');
      // A provider added again later starts without a credential: its old one is not sent to a new URL.
      const credentialRemoved = removed && (await credentials.remove(id));
      if (credentialRemoved) await reload();
      return { removed, credentialRemoved };
    },

    async setProviderCredential(req) {
      const id = req.providerId;
      // The secret and the variable's name are never quoted: the store bounds and checks them.
      w.checkLengths('invalid_credential', [providerIdField(id), ['source', req.source, BOOK_LIMITS.source, 'who']]);
      const inBook = (await book.read()).providers.get(id);
      if (!inBook) throw unknownProvider(id);
      if (inBook.auth === 'none') throw credentialNotNeeded(id);
      const source = req.source || 'catalogue-rpc';
      const c = req.credential;
      if (c.case === undefined)
        throw w.refused(
          'invalid_credential',
          'credential',
          'a credential is a secret, or env_name: the environment variable that holds it; the request has neither',
        );
      let info: CredentialInfo;
      try {
        info =
          c.case === 'secret'
            ? await credentials.setSecret(id, c.value, source)
            : await credentials.setEnv(id, c.value, source);
      } catch (err) {
        throw credentialRefusal(err, w.refused);
      }
      // This instance calls with it from now on; the others read it within PRICE_BOOK_REFRESH_MS.
      const problems = await reload();
      return { providerId: id, credential: credentialOf(id, info, problems) };
    },

    async removeProviderCredential(req) {
      const id = req.providerId;
      w.checkLengths('invalid_credential', [providerIdField(id)]);
      const removed = await credentials.remove(id);
      const problems = await reload();
      return { removed, credential: credentialOf(id, undefined, problems) };
    },

    async testProvider(req) {
      const id = req.providerId;
      w.checkLengths('unknown_provider', [providerIdField(id)]);
      await reload();
      const p = catalogue.providers().find((x) => x.id === id);
      if (!p) throw unknownProvider(id, "this instance's catalogue");
      return probe(p);
    },

    async endDeploymentCooldown(req) {
      w.checkLengths('deployment_not_found', [
        ['model_id', req.modelId, BOOK_LIMITS.name, 'a model id'],
        ['deployment_id', req.deploymentId, BOOK_LIMITS.name, 'a deployment id'],
        ['source', req.source, BOOK_LIMITS.source, 'who'],
      ]);
      const m = catalogue.get(req.modelId);
      if (!m)
        throw notFound('model_not_found', `No model '${clip(req.modelId)}' in the catalogue.`, { param: 'model_id' });
      const row = deploymentsOfModel(m, new Map()).find((d) => d.id === req.deploymentId);
      if (!row)
        throw notFound('deployment_not_found', `${m.id} has no deployment '${clip(req.deploymentId)}'.`, {
          param: 'deployment_id',
        });
      const key = row.key as string;
      const source = req.source || 'catalogue-rpc';
      const wasCooling = parts.cooldowns ? await parts.cooldowns.end(key, source) : health.endCooldown(key);
      const windows: WindowUse = (await parts.deploymentLimits?.current()) ?? new Map();
      return { wasCooling, deployment: deploymentsOfModel(m, windows).find((d) => d.key === key)! };
    },

    async listDeployments(req) {
      let models = catalogue.list();
      if (req.modelId !== '') {
        w.checkLengths('model_not_found', [['model_id', req.modelId, BOOK_LIMITS.name, 'a model id']]);
        const m = catalogue.get(req.modelId);
        if (!m)
          throw notFound('model_not_found', `No model '${clip(req.modelId)}' in the catalogue.`, { param: 'model_id' });
        models = [m];
      }
      const windows: WindowUse = (await parts.deploymentLimits?.current()) ?? new Map();
      return {
        models: models.map((m) => ({
          modelId: m.id,
          strategy: m.strategy,
          enabled: m.enabled,
          available: m.available,
          deployments: deploymentsOfModel(m, windows),
        })),
      };
    },
  };
}
