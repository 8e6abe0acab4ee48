// The simulator's OpenAI video API (sora): POST /v1/videos (multipart or JSON, honouring
// Idempotency-Key), GET /v1/videos/{id} (queued -> in_progress -> completed over time),
// GET /v1/videos/{id}/content (a structurally valid MP4 of the produced duration) and
// DELETE /v1/videos/{id}. Steered by a `[sim …]` directive in the prompt:
//   ms=<generation time, default 600>   produce=<seconds produced, default as asked>
//   fault=500|502|503|429|policy|reject|failed|garbage|hang|stall   at=create|poll|content
//     (stall: the content answer sends half the MP4, then nothing more)
//   fail=<n>: only the first n calls at that step fail (per job), then it works
//   moov=end: the MP4's moov box after mdat (as some encoders write it)
//   delete=refuse: DELETE of a job not finished yet is refused (400), as for a job the
//     provider will not stop; by default a running job is dropped
// GET /v1/videos/{id}/content of an unfinished job answers 404, as OpenAI does.
//   ms=until-finished: in progress until a test finishes it with POST /__sim/videos/{id}/finish
// GET /__sim/videos lists the jobs it made, for tests. Each simulator instance keeps its own jobs
// (videoApi()): one standing for one deployment knows nothing of another's, as two providers would not.
import type http from 'node:http';
import { randomBytes } from 'node:crypto';

type Json = Record<string, unknown>;

interface SimVideo {
  id: string;
  model: string;
  prompt: string;
  seconds: string;
  size: string;
  createdAt: number;
  directives: Record<string, string>;
  idempotencyKey: string | undefined;
  creates: number;
  polls: number;
  downloads: number;
  deleted: boolean;
  /** Set by POST /__sim/videos/{id}/finish for a job made with ms=until-finished. */
  finishedAt?: number;
}

/** One instance's jobs. */
interface VideoState {
  videos: Map<string, SimVideo>;
  byIdempotencyKey: Map<string, string>;
  /** Calls seen per job and step, for `fail=<n>`. */
  stepCalls: Map<string, number>;
}

/** The video API of one simulator instance: its own jobs. */
export function videoApi(): {
  handle(req: http.IncomingMessage, res: http.ServerResponse, path: string, body: unknown): Promise<boolean>;
} {
  const state: VideoState = { videos: new Map(), byIdempotencyKey: new Map(), stepCalls: new Map() };
  return { handle: (req, res, path, body) => handleVideos(state, req, res, path, body) };
}

function directives(prompt: string): Record<string, string> {
  const m = /\[sim ([^\]]*)\]/.exec(prompt);
  const out: Record<string, string> = {};
  for (const pair of m?.[1]?.trim().split(/\s+/) ?? []) {
    const eq = pair.indexOf('=');
    if (eq > 0) out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res
    .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
    .end(text);
}

function openAIError(
  res: http.ServerResponse,
  status: number,
  message: string,
  type: string,
  code: string | null,
  headers: Record<string, string> = {},
) {
  send(res, status, { error: { message, type, param: null, code } }, headers);
}

/** Whether the directive's fault applies to this call at `step` (counting calls for `fail=`). */
function faultAt(
  { stepCalls }: VideoState,
  v: SimVideo | undefined,
  d: Record<string, string>,
  step: 'create' | 'poll' | 'content',
  key: string,
): string | undefined {
  const fault = d.fault;
  if (!fault) return undefined;
  const at = d.at ?? (fault === 'failed' ? 'poll' : fault === 'garbage' ? 'content' : 'create');
  if (at !== step) return undefined;
  if (d.fail) {
    const k = `${step}:${v?.id ?? key}`;
    const seen = stepCalls.get(k) ?? 0;
    stepCalls.set(k, seen + 1);
    if (seen >= Number(d.fail)) return undefined;
  }
  return fault;
}

function statusOf(v: SimVideo): { status: string; progress: number } {
  if (v.directives.ms === 'until-finished')
    return v.finishedAt ? { status: 'completed', progress: 100 } : { status: 'in_progress', progress: 50 };
  const ms = Number(v.directives.ms ?? 600);
  const elapsed = Date.now() - v.createdAt;
  if (elapsed >= ms) return { status: 'completed', progress: 100 };
  if (elapsed < ms * 0.2) return { status: 'queued', progress: 0 };
  return { status: 'in_progress', progress: Math.min(99, Math.floor((100 * elapsed) / ms)) };
}

function videoObject(v: SimVideo, over: Json = {}): Json {
  const s = statusOf(v);
  return {
    id: v.id,
    object: 'video',
    model: v.model,
    status: s.status,
    progress: s.progress,
    created_at: Math.floor(v.createdAt / 1000),
    completed_at: s.status === 'completed' ? Math.floor(Date.now() / 1000) : null,
    expires_at: null,
    error: null,
    prompt: v.prompt,
    remixed_from_video_id: null,
    seconds: v.seconds,
    size: v.size,
    ...over,
  };
}

/** A failing step answers like OpenAI would; true when it answered. */
function answerFault(res: http.ServerResponse, fault: string | undefined): boolean {
  switch (fault) {
    case '500':
    case '502':
    case '503':
      openAIError(res, Number(fault), 'The server had an error while processing your request.', 'server_error', null);
      return true;
    case '429':
      openAIError(res, 429, 'Rate limit reached for videos per minute.', 'requests', 'rate_limit_exceeded', {
        'retry-after': '1',
      });
      return true;
    case 'policy':
      openAIError(
        res,
        400,
        'Your request was blocked by our moderation system.',
        'invalid_request_error',
        'moderation_blocked',
      );
      return true;
    case 'reject':
      openAIError(res, 400, "Invalid value for 'size'.", 'invalid_request_error', 'invalid_value');
      return true;
    case 'hang':
      return true; // never answers; the simulator's close() destroys the socket
    default:
      return false;
  }
}

async function handleVideos(
  state: VideoState,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
  body: unknown,
): Promise<boolean> {
  const { videos, byIdempotencyKey } = state;
  if (req.method === 'GET' && path === '/__sim/videos') {
    send(
      res,
      200,
      [...videos.values()].map((v) => ({ ...v, state: statusOf(v) })),
    );
    return true;
  }
  const finish = /^\/__sim\/videos\/([^/]+)\/finish$/.exec(path);
  if (req.method === 'POST' && finish) {
    const v = videos.get(decodeURIComponent(finish[1]!));
    if (!v) return send(res, 404, { error: 'no such video' }), true;
    v.finishedAt = Date.now();
    send(res, 200, { id: v.id, state: statusOf(v) });
    return true;
  }
  if (path === '/v1/videos' && req.method === 'POST') {
    const b = (body ?? {}) as Json;
    const prompt = String(b.prompt ?? '');
    const d = directives(prompt);
    const key = typeof req.headers['idempotency-key'] === 'string' ? req.headers['idempotency-key'] : undefined;
    const known = key ? videos.get(byIdempotencyKey.get(key) ?? '') : undefined;
    if (answerFault(res, faultAt(state, known, d, 'create', key ?? prompt))) return true;
    if (!prompt)
      return (
        openAIError(
          res,
          400,
          "Missing required parameter: 'prompt'.",
          'invalid_request_error',
          'missing_required_parameter',
        ),
        true
      );
    if (known) {
      known.creates++;
      send(res, 200, videoObject(known));
      return true;
    }
    const v: SimVideo = {
      id: `video_sim${randomBytes(12).toString('hex')}`,
      model: String(b.model ?? 'sora-2'),
      prompt,
      seconds: String(b.seconds ?? '4'),
      size: String(b.size ?? '720x1280'),
      createdAt: Date.now(),
      directives: d,
      idempotencyKey: key,
      creates: 1,
      polls: 0,
      downloads: 0,
      deleted: false,
    };
    videos.set(v.id, v);
    if (key) byIdempotencyKey.set(key, v.id);
    send(res, 200, videoObject(v));
    return true;
  }
  const m = /^\/v1\/videos\/([^/]+)(\/content)?$/.exec(path);
  if (!m) return false;
  const v = videos.get(decodeURIComponent(m[1]!));
  if (!v || v.deleted)
    return openAIError(res, 404, `Video with id '${m[1]}' not found.`, 'invalid_request_error', 'not_found'), true;
  if (req.method === 'DELETE' && !m[2]) {
    if (v.directives.delete === 'refuse' && statusOf(v).status !== 'completed') {
      return openAIError(res, 400, 'Video is still being processed.', 'invalid_request_error', null), true;
    }
    v.deleted = true;
    send(res, 200, { id: v.id, object: 'video.deleted', deleted: true });
    return true;
  }
  if (req.method !== 'GET') return false;
  if (!m[2]) {
    v.polls++;
    const fault = faultAt(state, v, v.directives, 'poll', v.id);
    if (fault === 'failed') {
      send(
        res,
        200,
        videoObject(v, { status: 'failed', error: { code: 'internal_error', message: 'Video generation failed.' } }),
      );
      return true;
    }
    if (fault === 'policy') {
      send(
        res,
        200,
        videoObject(v, {
          status: 'failed',
          error: { code: 'moderation_blocked', message: 'The generated video was blocked by our moderation system.' },
        }),
      );
      return true;
    }
    if (answerFault(res, fault)) return true;
    send(res, 200, videoObject(v));
    return true;
  }
  v.downloads++;
  const fault = faultAt(state, v, v.directives, 'content', v.id);
  if (answerFault(res, fault)) return true;
  if (statusOf(v).status !== 'completed') {
    return (
      openAIError(
        res,
        404,
        'Video is not ready yet, use GET /v1/videos/{video_id} to check status.',
        'invalid_request_error',
        null,
      ),
      true
    );
  }
  const ms = Math.round(Number(v.directives.produce ?? v.seconds) * 1000);
  const mp4 =
    fault === 'garbage' ? Buffer.from('this is not a video') : makeMp4(ms, { moovAtEnd: v.directives.moov === 'end' });
  res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': mp4.length });
  // stall: half the file, then silence (the simulator's close() destroys the socket).
  if (fault === 'stall') res.write(mp4.subarray(0, mp4.length >> 1));
  else res.end(mp4);
  return true;
}

// --- a minimal, structurally valid MP4: ftyp, moov (mvhd, one video trak), mdat -------------

function box(type: string, ...parts: Buffer[]): Buffer {
  const payload = Buffer.concat(parts);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + payload.length, 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, payload]);
}

function fullBox(type: string, version: number, flags: number, ...parts: Buffer[]): Buffer {
  const vf = Buffer.alloc(4);
  vf.writeUInt32BE(((version & 0xff) << 24) | (flags & 0xffffff), 0);
  return box(type, vf, ...parts);
}

const u32 = (...ns: number[]) => {
  const b = Buffer.alloc(4 * ns.length);
  ns.forEach((n, i) => b.writeUInt32BE(n >>> 0, 4 * i));
  return b;
};
const u16 = (...ns: number[]) => {
  const b = Buffer.alloc(2 * ns.length);
  ns.forEach((n, i) => b.writeUInt16BE(n, 2 * i));
  return b;
};
const MATRIX = u32(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

/**
 * An MP4 whose movie (mvhd, timescale 1000) and video track (mdhd, timescale 15360) both last
 * `ms` milliseconds; mdat holds placeholder frame bytes (24 samples a second).
 */
export function makeMp4(ms: number, opts: { moovAtEnd?: boolean } = {}): Buffer {
  const mediaScale = 15360;
  const mediaDuration = Math.round((ms * mediaScale) / 1000);
  const samples = Math.max(1, Math.round((ms * 24) / 1000));
  const sampleSize = 64;
  const ftyp = box('ftyp', Buffer.from('isom', 'latin1'), u32(0x200), Buffer.from('isomiso2avc1mp41', 'latin1'));
  const mdat = box('mdat', Buffer.alloc(samples * sampleSize, 0x42));
  const moovFor = (chunkOffset: number) => {
    const mvhd = fullBox(
      'mvhd',
      0,
      0,
      u32(0, 0, 1000, ms, 0x00010000),
      u16(0x0100, 0),
      u32(0, 0),
      MATRIX,
      Buffer.alloc(24),
      u32(2),
    );
    const tkhd = fullBox('tkhd', 0, 3, u32(0, 0, 1, 0, ms, 0, 0), u16(0, 0, 0, 0), MATRIX, u32(1280 << 16, 720 << 16));
    const mdhd = fullBox('mdhd', 0, 0, u32(0, 0, mediaScale, mediaDuration), u16(0x55c4, 0));
    const hdlr = fullBox(
      'hdlr',
      0,
      0,
      u32(0),
      Buffer.from('vide', 'latin1'),
      u32(0, 0, 0),
      Buffer.from('VideoHandler\0', 'latin1'),
    );
    const vmhd = fullBox('vmhd', 0, 1, u16(0, 0, 0, 0));
    const dinf = box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1)));
    const delta = Math.max(1, Math.floor(mediaDuration / samples));
    const stbl = box(
      'stbl',
      fullBox('stsd', 0, 0, u32(0)),
      fullBox('stts', 0, 0, u32(1, samples, delta)),
      fullBox('stsc', 0, 0, u32(1, 1, samples, 1)),
      fullBox('stsz', 0, 0, u32(sampleSize, samples)),
      fullBox('stco', 0, 0, u32(1, chunkOffset)),
    );
    const trak = box('trak', tkhd, box('mdia', mdhd, hdlr, box('minf', vmhd, dinf, stbl)));
    return box('moov', mvhd, trak);
  };
  if (opts.moovAtEnd) return Buffer.concat([ftyp, mdat, moovFor(ftyp.length + 8)]);
  const size = moovFor(0).length;
  return Buffer.concat([ftyp, moovFor(ftyp.length + size + 8), mdat]);
}
