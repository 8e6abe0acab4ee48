// The simulator's media APIs: OpenAI embeddings, images (generations, multipart edits), audio
// (multipart transcriptions, speech), Cohere's Embed v2 and Black Forest Labs' FLUX job API.
// Directives ride in the text the route has: embedding input, image prompt, transcription
// prompt, speech input, e.g. "a cat [sim fault=500]".
import type http from 'node:http';
import { randomBytes } from 'node:crypto';
import { decodedSeconds, mp3, png, wav } from '../support/media-files.ts';

type Json = Record<string, unknown>;
type Send = (status: number, body: unknown, headers?: Record<string, string>) => void;

export function directivesIn(text: string): Record<string, string> {
  const m = /\[sim ([^\]]*)\]/.exec(text);
  const out: Record<string, string> = {};
  for (const pair of m?.[1]?.trim().split(/\s+/) ?? []) {
    const eq = pair.indexOf('=');
    if (eq > 0) out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

const simTokens = (text: string) => Math.ceil(Buffer.byteLength(text) / 4);
/** Deterministic vector values, exact in float32 so base64 round trips compare equal. */
const vector = (dims: number, seed: number) =>
  Array.from({ length: dims }, (_, i) => ((seed * 31 + i * 7) % 2048) / 2048 - 0.5);
const DEFAULT_DIMS: Record<string, number> = {
  'text-embedding-3-large': 3072,
  'text-embedding-3-small': 1536,
  'text-embedding-ada-002': 1536,
};
/** Output tokens of gpt-image by quality and size, as OpenAI documents them for gpt-image-1. */
const IMAGE_OUTPUT_TOKENS: Record<string, Record<string, number>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1056, '1024x1536': 1584, '1536x1024': 1568 },
  high: { '1024x1024': 4160, '1024x1536': 6240, '1536x1024': 6208 },
};

function f32base64(v: number[]): string {
  const b = Buffer.alloc(v.length * 4);
  v.forEach((x, i) => b.writeFloatLE(x, i * 4));
  return b.toString('base64');
}

/** Answers a fault directive the way the provider would; true when it answered. */
function fault(
  d: Record<string, string>,
  send: Send,
  res: http.ServerResponse,
  failCounts: Map<string, number>,
): boolean {
  let f = d.fault;
  if (f && d.fail && d.id) {
    const seen = failCounts.get(d.id) ?? 0;
    failCounts.set(d.id, seen + 1);
    if (seen >= Number(d.fail)) f = undefined;
  }
  if (f === '500' || f === '502' || f === '503') {
    send(Number(f), {
      error: {
        message: 'The server had an error while processing your request.',
        type: 'server_error',
        param: null,
        code: null,
      },
    });
    return true;
  }
  if (f === '429') {
    send(
      429,
      { error: { message: 'Rate limit reached.', type: 'requests', param: null, code: 'rate_limit_exceeded' } },
      { 'retry-after': '1' },
    );
    return true;
  }
  if (f === '400') {
    send(400, {
      error: {
        message: 'Your request was rejected by the safety system.',
        type: 'image_generation_user_error',
        param: null,
        code: 'moderation_blocked',
      },
    });
    return true;
  }
  if (f === 'reset' && !d.after) {
    res.socket?.destroy();
    return true;
  }
  return false;
}

export interface MediaContext {
  baseUrl: string;
  apiKey?: string;
  /** Whether a presented key is accepted (the simulator's rotating key list); else `apiKey` alone. */
  keyOk?: (key: string | undefined) => boolean;
  failCounts: Map<string, number>;
}

function rejects(ctx: MediaContext, key: string | undefined): boolean {
  return ctx.keyOk ? !ctx.keyOk(key) : !!ctx.apiKey && key !== ctx.apiKey;
}

export async function handleMedia(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  url: URL,
  raw: Buffer,
  ctx: MediaContext,
): Promise<boolean> {
  const send: Send = (status, body, headers = {}) => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res
      .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
      .end(text);
  };
  const json = (): Json => {
    try {
      return JSON.parse(raw.toString('utf8')) as Json;
    } catch {
      return {};
    }
  };
  const path = url.pathname;

  // Cohere and BFL authenticate their own way.
  if (path === '/cohere/v2/embed' && req.method === 'POST') {
    const auth = req.headers.authorization;
    if (rejects(ctx, auth?.startsWith('Bearer ') ? auth.slice('Bearer '.length) : undefined)) {
      send(401, { message: 'invalid api token' });
      return true;
    }
    const body = json();
    const texts = (body.texts ?? []) as string[];
    if (fault(directivesIn(texts.join(' ')), send, res, ctx.failCounts)) return true;
    if (body.truncate !== 'NONE' || !Array.isArray(body.embedding_types)) {
      send(400, { message: 'bad request' });
      return true;
    }
    const tokens = texts.reduce((n, t) => n + simTokens(t) + 1, 0);
    send(200, {
      id: randomBytes(8).toString('hex'),
      texts,
      response_type: 'embeddings_by_type',
      embeddings: { float: texts.map((_, i) => vector(1024, i + 1)) },
      meta: { api_version: { version: '2' }, billed_units: { input_tokens: tokens } },
    });
    return true;
  }
  if (path.startsWith('/bfl/')) return bflApi(req, res, path, url, json, send, ctx);

  if (!path.startsWith('/v1/')) return false;
  if (path === '/v1/embeddings' && req.method === 'POST') {
    const body = json();
    const inputs = (typeof body.input === 'string' ? [body.input] : body.input) as (string | number[])[];
    const d = directivesIn(inputs.filter((i) => typeof i === 'string').join(' '));
    if (fault(d, send, res, ctx.failCounts)) return true;
    const dims = (body.dimensions as number | undefined) ?? DEFAULT_DIMS[String(body.model)] ?? 1536;
    const tokens = inputs.reduce((n: number, i) => n + (typeof i === 'string' ? simTokens(i) : i.length), 0);
    const reply: Json = {
      object: 'list',
      model: body.model,
      data: inputs.map((_, index) => ({
        object: 'embedding',
        index,
        embedding: body.encoding_format === 'base64' ? f32base64(vector(dims, index + 1)) : vector(dims, index + 1),
      })),
    };
    if (d.fault !== 'no_usage') reply.usage = { prompt_tokens: tokens, total_tokens: tokens };
    send(200, reply);
    return true;
  }
  if (path === '/v1/images/generations' && req.method === 'POST') {
    const body = json();
    return gptImage(body, String(body.prompt ?? ''), Number(body.n ?? 1), res, send, ctx);
  }
  if (path === '/v1/images/edits' && req.method === 'POST') {
    const form = await formOf(req, raw);
    if (!form) {
      send(400, {
        error: { message: 'Invalid multipart body', type: 'invalid_request_error', param: null, code: null },
      });
      return true;
    }
    const images = [...form.getAll('image'), ...form.getAll('image[]')];
    if (images.length === 0 || !images.every((f) => typeof f !== 'string')) {
      send(400, { error: { message: "Missing 'image'", type: 'invalid_request_error', param: 'image', code: null } });
      return true;
    }
    const fields: Json = {};
    for (const [k, v] of form) if (typeof v === 'string') fields[k] = v;
    return gptImage(fields, String(fields.prompt ?? ''), Number(fields.n ?? 1), res, send, ctx, images.length);
  }
  if (path === '/v1/audio/transcriptions' && req.method === 'POST') {
    const form = await formOf(req, raw);
    const file = form?.get('file');
    if (!form || !file || typeof file === 'string') {
      send(400, { error: { message: "Missing 'file'", type: 'invalid_request_error', param: 'file', code: null } });
      return true;
    }
    const d = directivesIn(String(form.get('prompt') ?? ''));
    if (fault(d, send, res, ctx.failCounts)) return true;
    const model = String(form.get('model'));
    const format = String(form.get('response_format') ?? 'json');
    const text = d.text ?? 'hello from the simulated transcriber';
    if (format === 'text') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(text);
      return true;
    }
    if (format === 'srt' || format === 'vtt') {
      const cue =
        format === 'srt'
          ? `1\n00:00:00,000 --> 00:00:02,000\n${text}\n`
          : `WEBVTT\n\n00:00:00.000 --> 00:00:02.000\n${text}\n`;
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(cue);
      return true;
    }
    const reply: Json = { text };
    // The seconds the provider decodes and bills: the audio's own, or a test's override.
    const heard =
      d.seconds !== undefined ? Number(d.seconds) : decodedSeconds(file.name, Buffer.from(await file.arrayBuffer()));
    if (model === 'whisper-1' && heard !== undefined && d.fault !== 'no_usage')
      reply.usage = { type: 'duration', seconds: Math.ceil(heard) };
    if (model !== 'whisper-1') {
      const audio = Number(d.audio_tokens ?? 50);
      const textTokens = Number(d.text_tokens ?? 0);
      const output = Number(d.output_tokens ?? simTokens(text));
      if (d.fault !== 'no_usage')
        reply.usage = {
          type: 'tokens',
          input_tokens: audio + textTokens,
          input_token_details: { text_tokens: textTokens, audio_tokens: audio },
          output_tokens: output,
          total_tokens: audio + textTokens + output,
        };
    }
    if (format === 'verbose_json')
      Object.assign(reply, {
        task: 'transcribe',
        language: 'english',
        duration: heard ?? 2,
        segments: [{ id: 0, start: 0, end: 2, text }],
      });
    if (format === 'diarized_json') {
      Object.assign(reply, {
        task: 'transcribe',
        duration: 4,
        chunking_strategy: form.get('chunking_strategy'),
        segments: [
          { type: 'transcript.text.segment', id: 'seg_001', speaker: 'A', start: 0, end: 2, text: 'hello from' },
          {
            type: 'transcript.text.segment',
            id: 'seg_002',
            speaker: 'B',
            start: 2,
            end: 4,
            text: 'the simulated transcriber',
          },
        ],
      });
    }
    send(200, reply);
    return true;
  }
  if (path === '/v1/audio/speech' && req.method === 'POST') {
    const body = json();
    const input = String(body.input ?? '');
    const d = directivesIn(input);
    if (fault(d, send, res, ctx.failCounts)) return true;
    const format = String(body.response_format ?? 'mp3');
    const audio = format === 'wav' ? wav(8000 * 2) : mp3(80);
    const type = format === 'wav' ? 'audio/wav' : format === 'mp3' ? 'audio/mpeg' : `audio/${format}`;
    res.writeHead(200, { 'content-type': type, 'transfer-encoding': 'chunked' });
    const chunks = 8;
    const step = Math.ceil(audio.length / chunks);
    for (let i = 0; i < chunks; i++) {
      if (d.fault === 'reset' && i === Number(d.after ?? 1)) {
        res.socket?.destroy();
        return true;
      }
      res.write(audio.subarray(i * step, (i + 1) * step));
      await new Promise((r) => setTimeout(r, Number(d.delay ?? 2)));
    }
    res.end();
    return true;
  }
  return false;
}

/** What the simulator records of a multipart request: its text fields and its files' names and sizes. */
export async function formSummary(req: http.IncomingMessage, raw: Buffer): Promise<Json | null> {
  const form = await formOf(req, raw);
  if (!form) return null;
  const fields: Json = {};
  const files: Json[] = [];
  for (const [name, v] of form) {
    if (typeof v === 'string') fields[name] = v;
    else files.push({ field: name, filename: v.name, type: v.type, size: v.size });
  }
  return { multipart: true, ...fields, files };
}

async function formOf(req: http.IncomingMessage, raw: Buffer): Promise<FormData | undefined> {
  try {
    return await new Response(raw, {
      headers: { 'content-type': String(req.headers['content-type'] ?? '') },
    }).formData();
  } catch {
    return undefined;
  }
}

function gptImage(
  body: Json,
  prompt: string,
  n: number,
  res: http.ServerResponse,
  send: Send,
  ctx: MediaContext,
  inputImages = 0,
): boolean {
  const d = directivesIn(prompt);
  if (fault(d, send, res, ctx.failCounts)) return true;
  const size = body.size && body.size !== 'auto' ? String(body.size) : '1024x1024';
  const quality = body.quality && body.quality !== 'auto' ? String(body.quality) : 'medium';
  const [w, h] = (d.made ?? size).split('x').map(Number) as [number, number];
  const image = png(w, h).toString('base64');
  const reply: Json = {
    created: Math.floor(Date.now() / 1000),
    background: 'opaque',
    output_format: body.output_format ?? 'png',
    quality,
    size,
    data: Array.from({ length: n }, () => ({ b64_json: image })),
  };
  const textTokens = Number(d.prompt_tokens ?? simTokens(prompt));
  const imageTokens = inputImages * Number(d.image_tokens ?? 323);
  const output = n * (IMAGE_OUTPUT_TOKENS[quality]?.[size] ?? 1056);
  if (d.fault !== 'no_usage') {
    reply.usage = {
      input_tokens: textTokens + imageTokens,
      input_tokens_details: { text_tokens: textTokens, image_tokens: imageTokens },
      output_tokens: output,
      total_tokens: textTokens + imageTokens + output,
    };
  } else {
    delete reply.quality;
    delete reply.size;
  }
  send(200, reply);
  return true;
}

/** Black Forest Labs: POST /bfl/v1/<model> starts a job; GET /bfl/v1/get_result polls; the image is delivered elsewhere. */
const bflJobs = new Map<
  string,
  { width: number; height: number; format: string; polls: number; d: Record<string, string> }
>();

function bflApi(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
  url: URL,
  json: () => Json,
  send: Send,
  ctx: MediaContext,
): boolean {
  if (path.startsWith('/bfl/delivery/')) {
    const id = path.slice('/bfl/delivery/'.length).replace(/\.\w+$/, '');
    const job = bflJobs.get(id);
    if (!job) {
      send(404, { detail: 'not found' });
      return true;
    }
    const [w, h] = (job.d.made ?? `${job.width}x${job.height}`).split('x').map(Number) as [number, number];
    const bytes = png(w, h);
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': bytes.length }).end(bytes);
    return true;
  }
  const xKey = req.headers['x-key'];
  if (rejects(ctx, typeof xKey === 'string' ? xKey : undefined)) {
    send(403, { detail: 'Not authenticated - Invalid Authentication' });
    return true;
  }
  if (req.method === 'GET' && path === '/bfl/v1/get_result') {
    const id = url.searchParams.get('id') ?? '';
    const job = bflJobs.get(id);
    if (!job) {
      send(200, { id, status: 'Task not found' });
      return true;
    }
    job.polls++;
    const pending = Number(job.d.pending ?? 1);
    if (job.polls <= pending) {
      send(200, { id, status: 'Pending', progress: job.polls / (pending + 1) });
      return true;
    }
    if (job.d.fault === 'moderated') {
      send(200, { id, status: 'Content Moderated', details: { 'Moderation Reasons': ['Sim'] } });
      return true;
    }
    if (job.d.fault === 'error') {
      send(200, { id, status: 'Error', details: null });
      return true;
    }
    if (job.d.fault === 'never') {
      send(200, { id, status: 'Pending', progress: 0.5 });
      return true;
    }
    send(200, {
      id,
      status: 'Ready',
      result: {
        sample: `${ctx.baseUrl}/bfl/delivery/${id}.${job.format}`,
        prompt: 'sim',
        seed: 1,
        start_time: 0,
        end_time: 1,
        duration: 1,
      },
    });
    return true;
  }
  if (req.method === 'POST' && /^\/bfl\/v1\/flux-[\w.-]+$/.test(path)) {
    const body = json();
    const d = directivesIn(String(body.prompt ?? ''));
    if (d.fault === '500' || d.fault === '429') {
      send(Number(d.fault), { detail: 'sim failure' });
      return true;
    }
    const id = randomBytes(8).toString('hex');
    bflJobs.set(id, {
      width: Number(body.width ?? 1024),
      height: Number(body.height ?? 1024),
      format: String(body.output_format ?? 'jpeg'),
      polls: 0,
      d,
    });
    send(200, { id, polling_url: `${ctx.baseUrl}/bfl/v1/get_result?id=${id}`, cost: 3, input_mp: 0, output_mp: 1 });
    return true;
  }
  return false;
}
