// What the media routes (embeddings, images, audio) share: model lookup by kind, a plan for
// prices known up front, and reading multipart parts.
import { modelNotAvailable, type Catalogue, type ResolvedModel } from '../../catalogue/catalogue.ts';
import type { ModelKindName } from '../../catalogue/models.ts';
import type { TokenPrices } from '../../billing/pricing.ts';
import { badRequest, gatewayError, unknownModel } from '../../errors/errors.ts';
import { Blob } from 'node:buffer';
import { FormData } from 'undici';
import type { FormPart } from '../../gen/gateway/v1/inference_pb.js';
import type { Caller } from '../../billing/caller.ts';
import type { Json, Plan } from '../../metering/plan.ts';
import { duplicateMemberRefusal } from '../duplicate-members.ts';
import { withOutcome } from '../../metering/outcomes.ts';

/** The catalogue model named `id`, of `kind`: 400 in the OpenAI shape otherwise. */
export function modelOfKind(catalogue: Catalogue, id: unknown, kind: ModelKindName, route: string): ResolvedModel {
  if (typeof id !== 'string' || id === '')
    throw badRequest("Missing required parameter: 'model'.", 'missing_required_parameter', 'model');
  const model = catalogue.get(id);
  if (!model) throw unknownModel(id);
  if (model.kind !== kind)
    throw badRequest(
      `The model '${model.id}' is a ${model.kind} model; ${route} takes ${kind} models.`,
      'model_not_supported',
      'model',
    );
  if (!model.available) throw modelNotAvailable(model);
  return model;
}

/** A plan for routes whose hold is computed by the route itself (Metering.holdExact). */
export function mediaPlan(
  requestId: string,
  route: string,
  caller: Caller,
  model: ResolvedModel,
  body: Json,
  startedAt: number,
): Plan {
  return {
    requestId,
    route,
    caller,
    model,
    body,
    startedAt,
    prices: model.prices as unknown as TokenPrices,
    inputUpper: 0n,
    countInput: () => 0n,
    maxOutput: 0n,
    choices: 1n,
  };
}

/** Multipart parts by name, fields as text, files kept apart. */
export class Form {
  readonly parts: readonly FormPart[];

  constructor(parts: readonly FormPart[]) {
    this.parts = parts;
  }

  /**
   * 400 for a text field sent more than once: the gateway would price one copy and forward both,
   * and which one the provider reads is its parser's choice. Array fields repeat by design
   * (`include[]`, `timestamp_granularities[]`, `known_speaker_names[]`: the OpenAI SDKs send an
   * array as `name[]` parts), and files are counted by the routes that take several.
   */
  repeatedField(): Error | undefined {
    const seen = new Set<string>();
    for (const p of this.parts) {
      if (p.filename !== '' || p.name.endsWith('[]')) continue;
      if (seen.has(p.name)) return duplicateMemberRefusal(p.name);
      seen.add(p.name);
    }
    return undefined;
  }

  /** A plain field's text (the last one when repeated: routes refuse repeats first, see repeatedField); undefined when absent. */
  field(name: string): string | undefined {
    for (let i = this.parts.length - 1; i >= 0; i--) {
      const p = this.parts[i]!;
      if (p.name === name && p.filename === '') return Buffer.from(p.data).toString('utf8');
    }
    return undefined;
  }

  files(...names: string[]): FormPart[] {
    return this.parts.filter((p) => names.includes(p.name) && p.filename !== '');
  }

  /** Field names that arrived as files but must be text, or the reverse. */
  has(name: string): boolean {
    return this.parts.some((p) => p.name === name);
  }
}

/** OpenAI-style bound for numeric fields given as multipart text or JSON numbers. */
export function intField(v: unknown, name: string, min: number, max: number): number | Error | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  const n = typeof v === 'string' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max)
    return badRequest(`'${name}' must be an integer from ${min} to ${max}.`, 'invalid_value', name);
  return n;
}

/** 502 for an upstream answer the gateway cannot use: the request settles at zero (`upstream_bad_reply`). */
export function badUpstreamReply(requestId: string, what: string) {
  return withOutcome(
    gatewayError({
      httpStatus: 502,
      type: 'server_error',
      code: 'upstream_bad_reply',
      message: `The upstream provider sent ${what}.`,
      requestId,
    }),
    'upstream_bad_reply',
    502,
  );
}

/**
 * A caller's multipart form as it goes upstream: the same parts in the same order, files as
 * files; only the model is the gateway's to change (to the name its provider knows it by).
 */
export function upstreamFormOf(parts: readonly FormPart[], upstreamModelId: string): FormData {
  const form = new FormData();
  for (const p of parts) {
    if (p.filename !== '')
      form.append(p.name, new Blob([p.data], { type: p.contentType || 'application/octet-stream' }), p.filename);
    else form.append(p.name, p.name === 'model' ? upstreamModelId : Buffer.from(p.data).toString('utf8'));
  }
  return form;
}
