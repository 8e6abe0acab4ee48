// A finished job's MP4 as GetVideoContent streams it: a start part (id, type, size), then the
// bytes in parts of at most 256 KiB, read from the video store as they are sent.
import { gatewayError, notFound } from '../errors/errors.ts';
import type { VideoJobRow } from './jobs.ts';
import type { VideoStore } from './store.ts';
import { TERMINAL_STATUSES } from '../../workflows/video-types.ts';

const CHUNK = 256 * 1024;

/** The parts of the job's content; 404 for a job with none (yet), or whose MP4 is gone. */
export async function* videoContentParts(store: VideoStore, row: VideoJobRow, signal: AbortSignal) {
  const obj = await openContent(store, row);
  yield {
    part: { case: 'start' as const, value: { videoId: row.id, contentType: 'video/mp4', size: BigInt(obj.size) } },
  };
  for await (const chunk of obj.stream()) {
    const buf = chunk as Buffer;
    for (let at = 0; at < buf.length; at += CHUNK)
      yield { part: { case: 'data' as const, value: buf.subarray(at, at + CHUNK) } };
    if (signal.aborted) return;
  }
}

async function openContent(store: VideoStore, row: VideoJobRow) {
  // As OpenAI answers it: a 404 (which the SDKs do not retry), no code.
  if (row.status !== 'completed' || !row.contentKey) {
    const message = TERMINAL_STATUSES.includes(row.status)
      ? `Video '${row.id}' has ${row.status === 'cancelled' ? 'been cancelled' : 'failed'}; it has no content.`
      : 'Video is not ready yet, use GET /v1/videos/{video_id} to check status.';
    throw gatewayError({ httpStatus: 404, type: 'invalid_request_error', message });
  }
  const obj = await store.open(row.contentKey);
  if (!obj) throw notFound('video_content_missing', `The content of video '${row.id}' is no longer stored.`);
  return obj;
}
