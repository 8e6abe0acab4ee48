// The demo's images: OpenAI's gpt-image API (generations as JSON, edits as a multipart form),
// answering PNGs of the size asked with the token usage OpenAI reports for that size and
// quality; and Black Forest Labs' FLUX job API (a job, its polling URL, then a signed image URL),
// whose image the gateway fetches and bills per megapixel. The images are one flat colour.
import type http from 'node:http';
import { countTextTokens } from '../inference/tokens.ts';
import { png } from './files.ts';
import { formOf, newId, nowSeconds, openAIError, sendBytes, sendJson, type DemoRequest, type Json } from './wire.ts';

/** Output tokens of gpt-image by quality and size, as OpenAI documents them. */
const OUTPUT_TOKENS: Record<string, Record<string, number>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1056, '1024x1536': 1584, '1536x1024': 1568 },
  high: { '1024x1024': 4160, '1024x1536': 6240, '1536x1024': 6208 },
};
/** What an input image of an edit is billed, in image tokens (OpenAI's low-fidelity figure). */
const INPUT_IMAGE_TOKENS = 65;

/** PNGs already made, by size: the same few sizes are asked again and again. */
const made = new Map<string, Buffer>();
function pngOf(width: number, height: number): Buffer {
  const key = `${width}x${height}`;
  let bytes = made.get(key);
  if (!bytes) {
    bytes = png(width, height);
    if (made.size < 32) made.set(key, bytes);
  }
  return bytes;
}

function gptImage(res: http.ServerResponse, fields: Json, inputImages: number): void {
  const size = typeof fields.size === 'string' && fields.size !== 'auto' ? fields.size : '1024x1024';
  const quality = typeof fields.quality === 'string' && fields.quality !== 'auto' ? fields.quality : 'medium';
  const perImage = OUTPUT_TOKENS[quality]?.[size];
  const [width, height] = size.split('x').map(Number) as [number, number];
  if (perImage === undefined) return openAIError(res, 400, `Invalid size '${size}' or quality '${quality}'.`, 'size');
  const n = Math.max(1, Number(fields.n ?? 1) || 1);
  const text = countTextTokens(String(fields.prompt ?? ''));
  const image = pngOf(width, height).toString('base64');
  sendJson(res, 200, {
    created: nowSeconds(),
    background: 'opaque',
    output_format: 'png',
    quality,
    size,
    data: Array.from({ length: n }, () => ({ b64_json: image })),
    usage: {
      input_tokens: text + inputImages * INPUT_IMAGE_TOKENS,
      input_tokens_details: { text_tokens: text, image_tokens: inputImages * INPUT_IMAGE_TOKENS },
      output_tokens: n * perImage,
      total_tokens: text + inputImages * INPUT_IMAGE_TOKENS + n * perImage,
    },
  });
}

export function imageGenerations(req: DemoRequest, res: http.ServerResponse): void {
  if (!req.json || typeof req.json.prompt !== 'string')
    return openAIError(res, 400, "Missing required parameter: 'prompt'.", 'prompt');
  gptImage(res, req.json, 0);
}

export async function imageEdits(req: DemoRequest, res: http.ServerResponse): Promise<void> {
  const form = await formOf(req);
  if (!form) return openAIError(res, 400, 'The request is not a multipart form.');
  const images = [...form.getAll('image'), ...form.getAll('image[]')].filter((v) => typeof v !== 'string');
  if (images.length === 0) return openAIError(res, 400, "Missing required parameter: 'image'.", 'image');
  const fields: Json = {};
  for (const [name, value] of form) if (typeof value === 'string') fields[name] = value;
  gptImage(res, fields, images.length);
}

/** FLUX jobs made and not yet fetched (the newest 1,000). */
const fluxJobs = new Map<string, { width: number; height: number }>();

/** POST /bfl/v1/<model>: a job, ready at once. */
export function fluxCreate(req: DemoRequest, res: http.ServerResponse): void {
  const body = req.json ?? {};
  if (typeof body.prompt !== 'string') return sendJson(res, 422, { detail: 'prompt: Field required' });
  const side = (v: unknown) => (typeof v === 'number' && v >= 64 && v <= 4096 ? Math.round(v) : 1024);
  const id = newId('');
  fluxJobs.set(id, { width: side(body.width), height: side(body.height) });
  if (fluxJobs.size > 1_000) fluxJobs.delete(fluxJobs.keys().next().value!);
  sendJson(res, 200, { id, polling_url: `${req.baseUrl}/bfl/v1/get_result?id=${id}` });
}

/** GET /bfl/v1/get_result?id=: Ready, with the image's URL. */
export function fluxResult(req: DemoRequest, res: http.ServerResponse): void {
  const id = req.query.get('id') ?? '';
  if (!fluxJobs.has(id)) return sendJson(res, 200, { id, status: 'Task not found' });
  sendJson(res, 200, {
    id,
    status: 'Ready',
    result: { sample: `${req.baseUrl}/bfl/images/${id}.png`, prompt: '', seed: 1 },
  });
}

/** GET /bfl/images/<id>.png: the job's image. */
export function fluxImage(req: DemoRequest, res: http.ServerResponse): void {
  const id = req.path.slice('/bfl/images/'.length).replace(/\.png$/, '');
  const job = fluxJobs.get(id);
  if (!job) return sendJson(res, 404, { detail: 'Not Found' });
  sendBytes(res, 'image/png', pngOf(job.width, job.height));
}
