// POST /v1/images/generations and /v1/images/edits. gpt-image-* models go to OpenAI's images
// API and are billed from the usage it reports (per image tier when it reports none); FLUX
// goes to Black Forest Labs' job API and is billed per megapixel of the image it made.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Caller } from '../../billing/caller.ts';
import type { Config } from '../../config/config.ts';
import { badRequest, gatewayError } from '../../errors/errors.ts';
import {
  megapixelCost,
  megapixelNano,
  mediaTokensCost,
  mediaTokensFromUsage,
  mediaTokensNano,
  perImageNano,
  type Prices,
} from '../../billing/media-pricing.ts';
import type { FormPart } from '../../gen/gateway/v1/inference_pb.js';
import { IMAGE_EDITS, IMAGE_GENERATIONS } from '../providers/openai-compatible.ts';
import { bfl, BFL_FAILED, BFL_MODERATED } from '../providers/bfl.ts';
import { zeroUsage, type ChargeInfo, type Json, type Plan } from '../../metering/plan.ts';
import { withOutcome } from '../../metering/outcomes.ts';
import { readJson, readUpstreamError } from '../upstream/replies.ts';
import { parseBody } from '../request-body.ts';
import type { RouteDeps } from '../deps.ts';
import type { UpstreamResponse } from '../upstream/upstream.ts';
import { imageSize } from '../media/image-size.ts';
import { badUpstreamReply, Form, intField, mediaPlan, modelOfKind, upstreamFormOf } from '../media/common.ts';

export const GENERATIONS_ROUTE = '/v1/images/generations';
export const EDITS_ROUTE = '/v1/images/edits';

const GPT_IMAGE_SIZES = ['1024x1024', '1536x1024', '1024x1536'];
const QUALITIES = ['low', 'medium', 'high'];
const MAX_PROMPT_CHARS = 32_000;
const MAX_EDIT_IMAGES = 16;
/** At most this many input tokens per image given to an edit (high input fidelity included). */
const INPUT_IMAGE_TOKENS_BOUND = 8_000n;
/** Prompt overhead over its bytes, in tokens, for the hold. */
const PROMPT_OVERHEAD_TOKENS = 64n;
const encoder = new TextEncoder();

type Fields = Record<string, unknown>;

/** POST /v1/images/generations and /v1/images/edits. */
export class ImagesRoute {
  private readonly deps: RouteDeps;
  private readonly polling: Pick<Config['media'], 'pollIntervalMs' | 'pollTimeoutMs'>;

  constructor(deps: RouteDeps, polling: Pick<Config['media'], 'pollIntervalMs' | 'pollTimeoutMs'>) {
    this.deps = deps;
    this.polling = polling;
  }

  async generate(
    caller: Caller,
    raw: Uint8Array,
    requestId: string,
  ): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const startedAt = performance.now();
    const { metering, calls } = this.deps;
    const body = parseBody(raw);
    const model = modelOfKind(this.deps.catalogue, body.model, 'image', GENERATIONS_ROUTE);
    const prompt = checkPrompt(body.prompt);
    if (prompt instanceof Error) throw prompt;
    const n = intField(body.n, 'n', 1, 10);
    if (n instanceof Error) throw n;
    const plan = mediaPlan(requestId, GENERATIONS_ROUTE, caller, model, body, startedAt);

    if (model.dialect === 'bfl') {
      const flux = fluxOptions(body, model.id, n ?? 1);
      if (flux instanceof Error) throw flux;
      return this.generateFlux(plan, prompt, flux);
    }

    const opts = gptImageOptions(body, model.id);
    if (opts instanceof Error) throw opts;
    await metering.holdExact(plan, gptImageHold(model.prices, prompt, opts, BigInt(n ?? 1), 0n));
    const upstreamBody =
      body.model === model.upstreamId ? Buffer.from(raw) : JSON.stringify({ ...body, model: model.upstreamId });
    return metering.run(plan, async () =>
      this.settleGptImage(plan, await calls.post(plan, IMAGE_GENERATIONS, upstreamBody), opts),
    );
  }

  async edit(
    caller: Caller,
    parts: readonly FormPart[],
    requestId: string,
  ): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const startedAt = performance.now();
    const { metering, calls } = this.deps;
    const form = new Form(parts);
    const repeated = form.repeatedField();
    if (repeated) throw repeated;
    for (const name of ['model', 'prompt', 'n', 'size', 'quality', 'output_format', 'background']) {
      if (form.files(name).length > 0)
        throw badRequest(`'${name}' must be a text field, not a file.`, 'invalid_value', name);
    }
    const model = modelOfKind(this.deps.catalogue, form.field('model'), 'image', EDITS_ROUTE);
    if (!model.id.startsWith('gpt-image-')) {
      throw badRequest(
        `Image edits take gpt-image-* models only; '${model.id}' can generate images (${GENERATIONS_ROUTE}) but not edit them.`,
        'model_not_supported',
        'model',
      );
    }
    const unexpected = form.parts.find((p) => p.filename !== '' && !['image', 'image[]', 'mask'].includes(p.name));
    if (unexpected)
      throw badRequest(
        `Unexpected file field '${unexpected.name}': image edits take 'image' (or several 'image[]') and an optional 'mask'.`,
        'invalid_value',
        unexpected.name,
      );
    if ((form.has('image') || form.has('image[]')) && form.files('image', 'image[]').length === 0)
      throw badRequest("'image' must be a file, not a text field.", 'invalid_value', 'image');
    const images = form.files('image', 'image[]');
    if (images.length === 0)
      throw badRequest(
        "Missing required parameter: 'image' (one or more image files).",
        'missing_required_parameter',
        'image',
      );
    if (images.length > MAX_EDIT_IMAGES)
      throw badRequest(`At most ${MAX_EDIT_IMAGES} images can be edited at once.`, 'invalid_value', 'image');
    const masks = form.files('mask');
    if (masks.length > 1) throw badRequest("Only one 'mask' file is allowed.", 'invalid_value', 'mask');
    for (const f of [...images, ...masks]) {
      const param = f.name === 'mask' ? 'mask' : 'image';
      if (f.data.length === 0) throw badRequest(`The file '${f.filename}' is empty.`, 'invalid_value', param);
      if (!imageSize(f.data))
        throw badRequest(`The file '${f.filename}' is not a PNG, JPEG or WebP image.`, 'invalid_image_format', param);
    }
    if (masks[0] && imageSize(masks[0].data)!.format !== 'png')
      throw badRequest("'mask' must be a PNG image (with an alpha channel).", 'invalid_image_format', 'mask');
    const prompt = checkPrompt(form.field('prompt'));
    if (prompt instanceof Error) throw prompt;
    const fields: Fields = {};
    for (const name of ['n', 'size', 'quality', 'output_format', 'background', 'response_format', 'stream'])
      fields[name] = form.field(name);
    const n = intField(fields.n, 'n', 1, 10);
    if (n instanceof Error) throw n;
    const opts = gptImageOptions(fields, model.id);
    if (opts instanceof Error) throw opts;

    const plan = mediaPlan(requestId, EDITS_ROUTE, caller, model, { model: model.id }, startedAt);
    await metering.holdExact(plan, gptImageHold(model.prices, prompt, opts, BigInt(n ?? 1), BigInt(images.length)));
    const upstreamForm = upstreamFormOf(parts, model.upstreamId);
    return metering.run(plan, async () =>
      this.settleGptImage(plan, await calls.post(plan, IMAGE_EDITS, upstreamForm), opts),
    );
  }

  /** Usage when reported; otherwise each returned image at its tier, sized from the image itself. */
  private async settleGptImage(plan: Plan, res: UpstreamResponse, opts: GptImageOptions) {
    const { metering } = this.deps;
    if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
    const { text, json } = await readJson(res, plan.requestId);
    const data = Array.isArray(json.data) ? (json.data as Json[]) : [];
    if (data.length === 0) throw badUpstreamReply(plan.requestId, 'an images reply without images');
    const images = BigInt(data.length);
    const tokens =
      json.usage && typeof json.usage === 'object'
        ? mediaTokensFromUsage(json.usage as Json, 'image_tokens')
        : undefined;
    let charge: ChargeInfo;
    if (tokens) {
      const usage = {
        ...zeroUsage(),
        inputTokens: tokens.textInput + tokens.mediaInput,
        outputTokens: tokens.output,
        units: images,
        unit: 'images',
      };
      charge = await metering.settle(plan, usage, 'ok', 200, (p) => mediaTokensCost(p, 'image_input_per_mtok', tokens));
    } else {
      const quality = QUALITIES.includes(String(json.quality))
        ? String(json.quality)
        : opts.quality === 'auto'
          ? 'high'
          : opts.quality;
      // Each image's size from the image itself where it can be read; priced at a price map, so the
      // provider cost can be the serving deployment's.
      const sizes = data.map((d) => {
        const made = typeof d.b64_json === 'string' ? imageSize(Buffer.from(d.b64_json, 'base64')) : undefined;
        return made && GPT_IMAGE_SIZES.includes(`${made.width}x${made.height}`)
          ? `${made.width}x${made.height}`
          : GPT_IMAGE_SIZES.includes(String(json.size))
            ? String(json.size)
            : opts.size === 'auto'
              ? worstSize(plan.model.prices, quality)
              : opts.size;
      });
      charge = await metering.settle(
        plan,
        { ...zeroUsage(), units: images, unit: 'images', estimated: true },
        'ok',
        200,
        (prices) => sizes.reduce((sum, size) => sum + perImageNano(prices, quality, size, 1n), 0n),
      );
    }
    return { body: encoder.encode(text), charge };
  }

  private async generateFlux(
    plan: Plan,
    prompt: string,
    o: FluxOptions,
  ): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    // Held for the size rounded up to 32 pixels a side: the provider may round the size it makes.
    const up32 = (v: number) => BigInt(Math.ceil(v / 32) * 32);
    await this.deps.metering.holdExact(plan, megapixelNano(plan.model.prices, up32(o.width) * up32(o.height)));
    return this.deps.metering.run(plan, () => this.fluxJob(plan, prompt, o));
  }

  /** A FLUX job: created, polled until ready, its image fetched and measured. */
  private async fluxJob(plan: Plan, prompt: string, o: FluxOptions): Promise<{ body: Uint8Array; charge: ChargeInfo }> {
    const { pollingUrl, keyFor } = await this.createFluxJob(plan, prompt, o);
    const sample = await this.pollFluxJob(plan, pollingUrl, keyFor);
    const bytes = await this.downloadFluxImage(plan, sample, keyFor);
    const made = imageSize(bytes);
    if (!made) return fail('upstream_bad_reply', 502, badUpstreamReply(plan.requestId, 'a file that is not an image'));
    const pixels = BigInt(made.width) * BigInt(made.height);
    const charge = await this.deps.metering.settle(
      plan,
      { ...zeroUsage(), units: pixels, unit: 'pixels' },
      'ok',
      200,
      (p) => megapixelCost(p, pixels),
    );
    const reply = {
      created: Math.floor(Date.now() / 1000),
      data: [{ b64_json: bytes.toString('base64') }],
      output_format: made.format,
      size: `${made.width}x${made.height}`,
    };
    return { body: encoder.encode(JSON.stringify(reply)), charge };
  }

  /** The job created; its polling URL, and the headers a URL of the provider's gets (its key, where it may carry it). */
  private async createFluxJob(
    plan: Plan,
    prompt: string,
    o: FluxOptions,
  ): Promise<{ pollingUrl: string; keyFor: (url: string) => Record<string, string> }> {
    const { calls } = this.deps;
    const job: Json = { prompt, width: o.width, height: o.height, output_format: o.outputFormat };
    if (o.seed !== undefined) job.seed = o.seed;
    const res = await calls.post(
      plan,
      (t) => {
        const api = bfl(t);
        return { url: api.createUrl, headers: api.headers };
      },
      JSON.stringify(job),
    );
    // Polling goes to the deployment that took the job, with its key.
    const api = bfl(calls.targetFor(plan.servedBy!));
    if (res.statusCode < 200 || res.statusCode >= 300) throw await readUpstreamError(res, plan.requestId);
    const { json: created } = await readJson(res, plan.requestId);
    const pollingUrl = typeof created.polling_url === 'string' ? created.polling_url : undefined;
    if (!pollingUrl || !/^https?:\/\//.test(pollingUrl))
      throw badUpstreamReply(plan.requestId, 'a job without a polling URL');
    const key = api.headers['x-key']; // none for a provider that needs no credential
    const keyFor = (url: string): Record<string, string> =>
      key !== undefined && api.mayCarryKey(url) ? { 'x-key': key } : {};
    return { pollingUrl, keyFor };
  }

  /** The job polled until it is ready (its image's URL), refused or failed, or the deadline passes. */
  private async pollFluxJob(
    plan: Plan,
    pollingUrl: string,
    keyFor: (url: string) => Record<string, string>,
  ): Promise<string> {
    const { upstream } = this.deps;
    const deadline = performance.now() + this.polling.pollTimeoutMs;
    for (;;) {
      if (performance.now() > deadline) {
        return fail(
          'upstream_timeout',
          504,
          gatewayError({
            httpStatus: 504,
            type: 'server_error',
            code: 'upstream_timeout',
            message: 'The image was not ready in time.',
            requestId: plan.requestId,
          }),
        );
      }
      await sleep(this.polling.pollIntervalMs);
      // A dropped poll is retried until the deadline.
      let r: Awaited<ReturnType<typeof upstream.get>>;
      try {
        r = await upstream.get(pollingUrl, { ...keyFor(pollingUrl), accept: 'application/json' });
      } catch {
        continue;
      }
      if (r.statusCode === 429 || r.statusCode >= 500) {
        await r.body.dump().catch(() => {});
        continue;
      }
      if (r.statusCode !== 200) {
        await r.body.dump().catch(() => {});
        return fail('upstream_error', 502, badUpstreamReply(plan.requestId, `polling status ${r.statusCode}`));
      }
      let poll: Json;
      try {
        poll = (await r.body.json()) as Json;
      } catch {
        continue;
      }
      const sample = fluxPollAnswer(plan, poll);
      if (sample) return sample;
    }
  }

  /** The finished image's bytes. */
  private async downloadFluxImage(
    plan: Plan,
    sample: string,
    keyFor: (url: string) => Record<string, string>,
  ): Promise<Buffer> {
    try {
      const r = await this.deps.upstream.get(sample, keyFor(sample));
      if (r.statusCode !== 200) {
        await r.body.dump();
        throw new Error(`status ${r.statusCode}`);
      }
      return Buffer.from(await r.body.arrayBuffer());
    } catch {
      return fail(
        'upstream_unreachable',
        502,
        badUpstreamReply(plan.requestId, 'an image that could not be downloaded'),
      );
    }
  }
}

/** A FLUX job's failure, settled at zero with its own outcome (Metering.run). */
function fail(status: string, httpStatus: number, err: Error): never {
  throw withOutcome(err, status, httpStatus);
}

/** What one poll says: the image's URL when ready, undefined while it is still being made; a refusal or failure throws. */
function fluxPollAnswer(plan: Plan, poll: Json): string | undefined {
  const status = String(poll.status ?? '');
  if (status === 'Ready') {
    const url = (poll.result as Json | undefined)?.sample;
    if (typeof url !== 'string' || !/^https?:\/\//.test(url))
      return fail('upstream_bad_reply', 502, badUpstreamReply(plan.requestId, 'a finished job without an image'));
    return url;
  }
  if (BFL_MODERATED.has(status))
    return fail(
      'content_rejected',
      400,
      gatewayError({
        httpStatus: 400,
        type: 'invalid_request_error',
        code: 'moderation_blocked',
        param: 'prompt',
        message: `The image provider refused this prompt (${status}).`,
        requestId: plan.requestId,
      }),
    );
  if (BFL_FAILED.has(status))
    return fail(
      'upstream_error',
      502,
      gatewayError({
        httpStatus: 502,
        type: 'server_error',
        code: 'upstream_error',
        message: `The image provider failed the job (${status}).`,
        requestId: plan.requestId,
      }),
    );
  return undefined;
}

function checkPrompt(v: unknown): string | Error {
  if (typeof v !== 'string' || v.trim() === '')
    return badRequest("Missing required parameter: 'prompt'.", 'missing_required_parameter', 'prompt');
  if (v.length > MAX_PROMPT_CHARS)
    return badRequest(`'prompt' is longer than ${MAX_PROMPT_CHARS} characters.`, 'invalid_value', 'prompt');
  return v;
}

interface GptImageOptions {
  size: string;
  quality: string;
}

/** The OpenAI images API's options for gpt-image-* models, checked. */
function gptImageOptions(f: Fields, modelId: string): GptImageOptions | Error {
  const size = f.size == null ? 'auto' : String(f.size);
  if (size !== 'auto' && !GPT_IMAGE_SIZES.includes(size)) {
    return badRequest(
      `The size '${size}' is not supported by ${modelId}. Supported: ${GPT_IMAGE_SIZES.join(', ')}, auto.`,
      'invalid_value',
      'size',
    );
  }
  const quality = f.quality == null ? 'auto' : String(f.quality);
  if (quality !== 'auto' && !QUALITIES.includes(quality))
    return badRequest(`'quality' must be one of low, medium, high, auto for ${modelId}.`, 'invalid_value', 'quality');
  const format = f.output_format == null ? 'png' : String(f.output_format);
  if (!['png', 'jpeg', 'webp'].includes(format))
    return badRequest("'output_format' must be png, jpeg or webp.", 'invalid_value', 'output_format');
  const background = f.background == null ? 'auto' : String(f.background);
  if (!['transparent', 'opaque', 'auto'].includes(background))
    return badRequest("'background' must be transparent, opaque or auto.", 'invalid_value', 'background');
  if (background === 'transparent' && format === 'jpeg')
    return badRequest('A transparent background needs output_format png or webp.', 'invalid_value', 'background');
  if (f.response_format != null && f.response_format !== 'b64_json')
    return badRequest(
      `${modelId} returns images as base64 (b64_json) only.`,
      'unsupported_parameter',
      'response_format',
    );
  if (f.stream === true || f.stream === 'true')
    return badRequest(
      'Streamed image generation is not supported by this gateway; omit "stream".',
      'unsupported_parameter',
      'stream',
    );
  return { size, quality };
}

/** The most a gpt-image request can cost: the dearest tier it may be made at, per image, plus its input. */
function gptImageHold(prices: Prices, prompt: string, o: GptImageOptions, n: bigint, inputImages: bigint): bigint {
  const qualities = o.quality === 'auto' ? QUALITIES : [o.quality];
  let worstTier = 0n;
  for (const q of qualities) {
    const tier = perImageNano(prices, q, o.size === 'auto' ? worstSize(prices, q) : o.size, 1n);
    if (tier > worstTier) worstTier = tier;
  }
  const inputs = mediaTokensNano(prices, 'image_input_per_mtok', {
    textInput: BigInt(Buffer.byteLength(prompt)) + PROMPT_OVERHEAD_TOKENS,
    mediaInput: inputImages * INPUT_IMAGE_TOKENS_BOUND,
    output: 0n,
  });
  return worstTier * n + inputs;
}

function worstSize(prices: Prices, quality: string): string {
  let worst = GPT_IMAGE_SIZES[0]!;
  for (const s of GPT_IMAGE_SIZES)
    if (perImageNano(prices, quality, s, 1n) > perImageNano(prices, quality, worst, 1n)) worst = s;
  return worst;
}

interface FluxOptions {
  width: number;
  height: number;
  outputFormat: 'png' | 'jpeg';
  seed?: number;
}

/** FLUX takes any size in 16-pixel steps from 256 to 2048 a side, one image per request. */
function fluxOptions(body: Json, modelId: string, n: number): FluxOptions | Error {
  if (n !== 1)
    return badRequest(
      `${modelId} makes one image per request; send 'n': 1 (or several requests).`,
      'invalid_value',
      'n',
    );
  const size = body.size == null || body.size === 'auto' ? '1024x1024' : String(body.size);
  const m = /^(\d{3,4})x(\d{3,4})$/.exec(size);
  const ok = (v: number) => v >= 256 && v <= 2048 && v % 16 === 0;
  if (!m || !ok(Number(m[1])) || !ok(Number(m[2]))) {
    return badRequest(
      `The size '${size}' is not supported by ${modelId}: width and height must be multiples of 16 from 256 to 2048, as <width>x<height>.`,
      'invalid_value',
      'size',
    );
  }
  if (body.quality != null && body.quality !== 'auto')
    return badRequest(
      `${modelId} has no quality setting; omit 'quality' or send 'auto'.`,
      'unsupported_parameter',
      'quality',
    );
  if (body.background != null && body.background !== 'auto' && body.background !== 'opaque')
    return badRequest(`${modelId} cannot make transparent backgrounds.`, 'unsupported_parameter', 'background');
  const format = body.output_format == null ? 'png' : String(body.output_format);
  if (format !== 'png' && format !== 'jpeg')
    return badRequest(`${modelId} makes png or jpeg images.`, 'invalid_value', 'output_format');
  if (body.response_format != null && body.response_format !== 'b64_json')
    return badRequest(
      `${modelId} returns images as base64 (b64_json) only.`,
      'unsupported_parameter',
      'response_format',
    );
  if (body.seed != null && !Number.isSafeInteger(body.seed))
    return badRequest("'seed' must be an integer.", 'invalid_value', 'seed');
  return {
    width: Number(m[1]),
    height: Number(m[2]),
    outputFormat: format,
    ...(body.seed != null ? { seed: body.seed as number } : {}),
  };
}
