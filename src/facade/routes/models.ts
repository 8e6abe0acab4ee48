// GET /v1/models and /v1/models/{id}: the models that can serve now, and the aliases that name
// them (each alias a separate entry with `alias_for`, so a client that looks a name up finds it).
// OpenAI's list shape by default; Anthropic's when the caller sends anthropic-version (the
// Anthropic SDK and Claude Code do), listing the models /v1/messages serves. A model the demo
// provider answers (`npm start -- --demo`) says so: `owned_by: "demo"` with `demo: true`, and
// "(demo)" after Anthropic's display name; both lists keep their shape.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { createClient, type Transport } from '@connectrpc/connect';
import { CatalogueService, type Model } from '../../gen/gateway/v1/catalogue_pb.js';
import { keyFromHeaders } from '../../billing/keys.ts';
import type { AccessDeps } from '../access.ts';
import { anthropicError, openAIError } from '../errors.ts';

const CREATED = Math.floor(Date.parse('2026-01-01T00:00:00Z') / 1000);
const CREATED_AT = new Date(CREATED * 1000).toISOString();

interface Entry {
  id: string;
  model: Model;
  aliasFor?: string;
  /** Answered by the built-in demo provider, not the model's provider. */
  demo?: boolean;
}

const wantsAnthropic = (req: FastifyRequest) => typeof req.headers['anthropic-version'] === 'string';

function openAIEntry(e: Entry) {
  return {
    id: e.id,
    object: 'model',
    created: CREATED,
    owned_by: e.demo ? 'demo' : e.model.provider,
    ...(e.demo ? { demo: true } : {}),
    ...(e.aliasFor ? { alias_for: e.aliasFor } : { aliases: [...e.model.aliases].sort() }),
    pricing: pricingOf(e.model),
  };
}

/**
 * What a request to the model is charged, per unit: decimal USD strings, the price book's version
 * in force times (1 + the markup of the caller's account group), the unit in the key
 * (`input_per_mtok`: per million input tokens). What is listed is what is charged: a request's
 * usage at these prices, rounded up to the nano-USD once (docs/billing.md#markups).
 */
function pricingOf(m: Model): Record<string, string> {
  return Object.fromEntries(Object.entries(m.customerPrices).sort(([a], [b]) => a.localeCompare(b)));
}

function anthropicEntry(e: Entry) {
  const display = `${e.aliasFor ? `${e.id} (served by ${e.aliasFor})` : e.id}${e.demo ? ' (demo)' : ''}`;
  return {
    type: 'model',
    id: e.id,
    display_name: display,
    created_at: CREATED_AT,
    ...(e.aliasFor ? { alias_for: e.aliasFor } : {}),
    pricing: pricingOf(e.model),
  };
}

export interface ModelRouteOptions extends AccessDeps {
  transport: Transport;
  /** Providers the demo provider answers for (FacadeDeps.demoProviders). */
  demoProviders?: ReadonlySet<string>;
}

export const modelRoutes: FastifyPluginAsync<ModelRouteOptions> = async (app, deps) => {
  const catalogue = createClient(CatalogueService, deps.transport);
  const demo = (model: Model) => deps.demoProviders?.has(model.provider) === true;

  /** The account group whose prices the caller sees ('' without a live key). */
  const groupOf = async (req: FastifyRequest): Promise<string> => {
    // A public route: a key is not needed, but one that is live shows its account group's prices.
    const header = (name: string) => (typeof req.headers[name] === 'string' ? req.headers[name] : undefined);
    const key = keyFromHeaders(header('authorization'), header('x-api-key'));
    if (!key) return '';
    return (deps.knownCaller(key) ?? (await deps.authenticate(key).catch(() => undefined)))?.group ?? '';
  };

  app.get('/v1/models', async (req) => {
    const { models, aliases } = await catalogue.listModels({ availableOnly: true, accountGroup: await groupOf(req) });
    const byId = new Map(models.map((m) => [m.id, m]));
    const entries: Entry[] = [
      ...models.map((model) => ({ id: model.id, model, demo: demo(model) })),
      ...aliases.map((a) => {
        const model = byId.get(a.modelId)!;
        return { id: a.alias, model, aliasFor: a.modelId, demo: demo(model) };
      }),
    ];
    if (!wantsAnthropic(req)) return { object: 'list', data: entries.map(openAIEntry) };
    const data = entries.filter((e) => e.model.dialect === 'anthropic').map(anthropicEntry);
    return { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
  });

  app.get<{ Params: { id: string } }>('/v1/models/:id', async (req, reply) => {
    const anthropic = wantsAnthropic(req);
    try {
      const { model, alias } = await catalogue.getModel({ id: req.params.id, accountGroup: await groupOf(req) });
      if (!model?.available || (anthropic && model.dialect !== 'anthropic')) throw new Error('unavailable');
      const entry: Entry = alias
        ? { id: alias, model, aliasFor: model.id, demo: demo(model) }
        : { id: model.id, model, demo: demo(model) };
      return anthropic ? anthropicEntry(entry) : openAIEntry(entry);
    } catch {
      const message = `The model '${req.params.id}' does not exist`;
      return reply
        .code(404)
        .send(
          anthropic
            ? anthropicError(404, message)
            : openAIError(message, 'invalid_request_error', 'model_not_found', 'model'),
        );
    }
  });
};
