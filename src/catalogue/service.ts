// CatalogueService: the models, their availability and prices.
import type { ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { ModelKind, type CatalogueService, type ModelSchema } from '../gen/gateway/v1/catalogue_pb.js';
import { gatewayError } from '../rpc/errors.ts';
import type { Catalogue, ResolvedModel } from './catalogue.ts';
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
  };
}

export function catalogueService(catalogue: Catalogue): ServiceImpl<typeof CatalogueService> {
  return {
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
