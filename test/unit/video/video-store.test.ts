// The folder video store against the real filesystem: a write becomes visible only whole, an
// interrupted one leaves nothing behind, and what a killed process left is cleared later.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ABANDONED_WRITE_MS, FolderVideoStore } from '../../../src/video/store.ts';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'video-store-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const files = () => fs.readdirSync(dir).sort();

async function* chunks(n: number, opts: { failAt?: number; onChunk?: (i: number) => void } = {}) {
  for (let i = 0; i < n; i++) {
    if (i === opts.failAt) throw new Error('connection reset by peer');
    opts.onChunk?.(i);
    yield Buffer.alloc(1024, i);
  }
}

describe('FolderVideoStore', () => {
  it('stores a whole video under its key and nothing else', async () => {
    const store = new FolderVideoStore(dir);
    expect(await store.put('video_a.mp4', chunks(4))).toEqual({ bytes: 4096 });
    expect(files()).toEqual(['video_a.mp4']);
  });

  it('a download that breaks mid-way leaves no file behind', async () => {
    const store = new FolderVideoStore(dir);
    await expect(store.put('video_b.mp4', chunks(8, { failAt: 5 }))).rejects.toThrow('connection reset');
    expect(files()).toEqual([]);
  });

  it('a download stopped by its signal (a cancelled activity, a worker shutting down) leaves no file behind', async () => {
    const store = new FolderVideoStore(dir);
    const stop = new AbortController();
    const put = store.put(
      'video_c.mp4',
      chunks(1000, {
        onChunk: (i) => {
          if (i === 3) stop.abort(new Error('activity cancelled'));
        },
      }),
      undefined,
      stop.signal,
    );
    await expect(put).rejects.toThrow();
    expect(files()).toEqual([]);
  });

  it('removes unfinished writes left alone past the threshold, and keeps recent ones and finished videos', async () => {
    const store = new FolderVideoStore(dir);
    await store.put('video_done.mp4', chunks(1));
    const abandoned = '.video_d.mp4.0123456789ab.partial';
    const recent = '.video_e.mp4.ba9876543210.partial';
    const unrelated = 'notes.partial';
    for (const name of [abandoned, recent, unrelated]) fs.writeFileSync(path.join(dir, name), 'half a video');
    const longAgo = new Date(Date.now() - ABANDONED_WRITE_MS - 60_000);
    fs.utimesSync(path.join(dir, abandoned), longAgo, longAgo);
    fs.utimesSync(path.join(dir, unrelated), longAgo, longAgo);
    fs.utimesSync(path.join(dir, 'video_done.mp4'), longAgo, longAgo);

    expect(await store.removeAbandonedWrites(ABANDONED_WRITE_MS)).toBe(1);
    expect(files()).toEqual([recent, 'notes.partial', 'video_done.mp4'].sort());
    expect(await new FolderVideoStore(path.join(dir, 'missing')).removeAbandonedWrites(ABANDONED_WRITE_MS)).toBe(0);
  });
});
