// The demo's OpenAI video API (sora-2): a job is made queued (the same Idempotency-Key gives the
// same job), is completed when next asked about, and its content is an MP4 as long as the
// seconds asked (what the gateway bills a video by, read from the file itself). It keeps the
// newest 1,000 jobs in memory.
import type http from 'node:http';
import { mp4 } from './files.ts';
import { formOf, newId, nowSeconds, openAIError, sendBytes, sendJson, type DemoRequest, type Json } from './wire.ts';

interface DemoVideo {
  id: string;
  model: string;
  prompt: string;
  seconds: string;
  size: string;
  createdAt: number;
  asked: boolean;
}

const jobs = new Map<string, DemoVideo>();
const byIdempotencyKey = new Map<string, string>();

function videoObject(v: DemoVideo): Json {
  return {
    id: v.id,
    object: 'video',
    model: v.model,
    status: v.asked ? 'completed' : 'queued',
    progress: v.asked ? 100 : 0,
    created_at: v.createdAt,
    completed_at: v.asked ? nowSeconds() : null,
    expires_at: null,
    error: null,
    prompt: v.prompt,
    remixed_from_video_id: null,
    seconds: v.seconds,
    size: v.size,
  };
}

export async function createVideo(req: DemoRequest, res: http.ServerResponse): Promise<void> {
  const fields: Json = req.json ?? {};
  if (!req.json) {
    const form = await formOf(req);
    for (const [name, value] of form ?? []) if (typeof value === 'string') fields[name] = value;
  }
  if (typeof fields.prompt !== 'string' || fields.prompt === '')
    return openAIError(res, 400, "Missing required parameter: 'prompt'.", 'prompt');
  const key = req.headers['idempotency-key'];
  const known = typeof key === 'string' ? jobs.get(byIdempotencyKey.get(key) ?? '') : undefined;
  if (known) return sendJson(res, 200, videoObject(known));
  const v: DemoVideo = {
    id: newId('video_demo'),
    model: String(fields.model ?? 'sora-2'),
    prompt: fields.prompt,
    seconds: String(fields.seconds ?? '4'),
    size: String(fields.size ?? '720x1280'),
    createdAt: nowSeconds(),
    asked: false,
  };
  jobs.set(v.id, v);
  if (typeof key === 'string') byIdempotencyKey.set(key, v.id);
  if (jobs.size > 1_000) {
    const oldest = jobs.keys().next().value!;
    jobs.delete(oldest);
    for (const [k, id] of byIdempotencyKey) if (id === oldest) byIdempotencyKey.delete(k);
  }
  sendJson(res, 200, videoObject(v));
}

/** GET /v1/videos/{id}, GET /v1/videos/{id}/content and DELETE /v1/videos/{id}. */
export function videoJob(req: DemoRequest, res: http.ServerResponse): void {
  const [, id = '', content] = /^\/v1\/videos\/([^/]+)(\/content)?$/.exec(req.path) ?? [];
  const v = jobs.get(decodeURIComponent(id));
  if (!v) return openAIError(res, 404, `Video with id '${id}' not found.`);
  if (req.method === 'DELETE') {
    jobs.delete(v.id);
    return sendJson(res, 200, { id: v.id, object: 'video.deleted', deleted: true });
  }
  if (!content) {
    v.asked = true;
    return sendJson(res, 200, videoObject(v));
  }
  if (!v.asked) return openAIError(res, 404, 'The video is not ready yet.');
  sendBytes(res, 'video/mp4', mp4(Number(v.seconds) || 4));
}
