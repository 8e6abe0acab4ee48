// CatalogueService: the models, their availability and prices, and the price book's versions.
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { ModelKind, type CatalogueService, type ModelSchema } from '../gen/gateway/v1/catalogue_pb.js';
import { gatewayError } from '../rpc/errors.ts';
import type { Catalogue, ResolvedModel } from './catalogue.ts';
import { priceVersionProblem, type PriceBook, type PriceVersion } from './price-book.ts';
import type { ModelKindName } from './models.ts';

const KINDS: Record<ModelKindName, ModelKind> = {
  chat: ModelKind.CHAT,
  embedding: ModelKind.EMBEDDING,
  image: ModelKind.IMAGE,
  transcription: ModelKind.TRANSCRIPTION,
  speech: ModelKind.SPEECH,
  video: ModelKind.VIDEO,
};

function toMessage(m: ResolvedModel): MessageInitShape<typeof ModelSchema> {
  return {
    id: m.id,
    kind: KINDS[m.kind],
    provider: m.provider,
    upstreamId: m.upstreamId,
    enabled: m.enabled,
    available: m.available,
    unavailableReason: m.unavailableReason,
    responsesPassthrough: m.responsesPassthrough ?? false,
    contextWindow: m.contextWindow,
    maxOutputTokens: m.maxOutputTokens,
    prices: { ...m.prices },
    priceVersionId: m.priceVersion,
  };
}

function versionMessage(v: PriceVersion) {
  return {
    id: v.id,
    modelId: v.modelId,
    prices: { ...v.prices },
    effectiveFrom: timestampFromDate(v.effectiveFrom),
    ...(v.createdAt ? { createdAt: timestampFromDate(v.createdAt) } : {}),
    source: v.source ?? '',
    reason: v.reason ?? '',
  };
}

const invalidPrice = (field: string, message: string) =>
  gatewayError({ httpStatus: 400, type: 'invalid_request_error', code: 'invalid_price', param: field, message });

export function catalogueService(catalogue: Catalogue, book: PriceBook): ServiceImpl<typeof CatalogueService> {
  /** A catalogue model by its own id (not an alias: a price belongs to the model that serves). */
  const modelNamed = (id: string): ResolvedModel => {
    const m = catalogue.list().find((x) => x.id === id);
    if (!m)
      throw invalidPrice(
        'model_id',
        `No model '${id}' in the catalogue${catalogue.get(id) ? ` ('${id}' is an alias of ${catalogue.get(id)!.id}: price that model)` : ''}.`,
      );
    return m;
  };

  return {
    async getPriceHistory(req) {
      const m = modelNamed(req.modelId);
      return { versions: (await book.history(m.id)).map(versionMessage) };
    },

    async setPrices(req) {
      const m = modelNamed(req.modelId);
      const effectiveFrom = req.effectiveFrom ? timestampDate(req.effectiveFrom) : undefined;
      const problem = priceVersionProblem(m, req.prices, effectiveFrom, new Date());
      if (problem) throw invalidPrice(problem.field, problem.message);
      const v = await book.add({
        modelId: m.id,
        prices: { ...req.prices },
        ...(effectiveFrom ? { effectiveFrom } : {}),
        source: req.source || 'catalogue-rpc',
        reason: req.reason,
      });
      // In force here at once; other instances read it within their PRICE_BOOK_REFRESH_MS.
      catalogue.applyPrices(await book.inForce());
      return { version: versionMessage(v) };
    },

    listModels(req) {
      const models = catalogue
        .list()
        .filter(
          (m) =>
            (req.kind === ModelKind.UNSPECIFIED || KINDS[m.kind] === req.kind) && (!req.availableOnly || m.available),
        );
      const shown = new Set(models.map((m) => m.id));
      const aliases = catalogue
        .aliases()
        .filter((a) => shown.has(a.model.id))
        .map((a) => ({ alias: a.alias, modelId: a.model.id }));
      return { models: models.map(toMessage), aliases };
    },
    getModel(req) {
      const m = catalogue.get(req.id);
      if (!m)
        throw gatewayError({
          httpStatus: 404,
          type: 'invalid_request_error',
          code: 'model_not_found',
          param: 'id',
          message: `No model '${req.id}' in the catalogue.`,
        });
      return { model: toMessage(m), alias: m.id === req.id ? '' : req.id };
    },
  };
}
