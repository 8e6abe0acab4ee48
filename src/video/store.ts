// Where finished videos live. The gateway and every worker must see the same store: a folder
// (VIDEO_DIR) on one machine or a shared volume; an object store (S3, GCS, Azure Blob) can
// implement the same interface later for workers on other machines.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { ByteSource } from './mp4.ts';

export interface StoredVideo extends ByteSource {
  /** The whole object, start to end. */
  stream(): Readable;
}

export interface VideoStore {
  /**
   * Writes the object from `body`; it becomes visible under `key` only once complete, so a
   * reader never sees half a video. Writing a key again replaces it (a retried download).
   */
  put(
    key: string,
    body: AsyncIterable<Uint8Array>,
    onProgress?: (bytes: number) => void,
    signal?: AbortSignal,
  ): Promise<{ bytes: number }>;
  /** Undefined when there is no such object. */
  open(key: string): Promise<StoredVideo | undefined>;
  delete(key: string): Promise<void>;
  /**
   * Removes what unfinished writes left behind (a process killed mid-download never ran its
   * cleanup) untouched for `olderThanMs`; returns how many. A write in progress on another
   * worker sharing the store touches its file all the time, so it is never taken for one.
   */
  removeAbandonedWrites(olderThanMs: number): Promise<number>;
  /** Where it is, for the startup log. */
  describe(): string;
}

/**
 * How long an unfinished write must have been left alone before a starting worker removes it:
 * far beyond the download's heartbeat (30 s) and the upstream body timeout (60 s).
 */
export const ABANDONED_WRITE_MS = 10 * 60_000;

const KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$/;
const NEVER_ABORTED = new AbortController().signal;
/** The temporary file a write goes to before it is renamed into place. */
const PARTIAL = /^\.[A-Za-z0-9][A-Za-z0-9_.-]*\.[0-9a-f]{12}\.partial$/;

function checkKey(key: string): string {
  if (!KEY.test(key) || key.includes('..')) throw new Error(`invalid video key ${JSON.stringify(key)}`);
  return key;
}

/** One file per video in a folder; writes go to a temporary file renamed into place. */
export class FolderVideoStore implements VideoStore {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  describe(): string {
    return `folder ${this.dir}`;
  }

  async put(
    key: string,
    body: AsyncIterable<Uint8Array>,
    onProgress?: (bytes: number) => void,
    signal?: AbortSignal,
  ): Promise<{ bytes: number }> {
    const final = path.join(this.dir, checkKey(key));
    await fs.promises.mkdir(this.dir, { recursive: true });
    const temp = path.join(this.dir, `.${key}.${randomBytes(6).toString('hex')}.partial`);
    let bytes = 0;
    try {
      await pipeline(
        Readable.from(body),
        async function* (source: AsyncIterable<Uint8Array>) {
          for await (const chunk of source) {
            bytes += chunk.byteLength;
            onProgress?.(bytes);
            yield chunk;
          }
        },
        fs.createWriteStream(temp, { flags: 'wx' }),
        { signal: signal ?? NEVER_ABORTED },
      );
      await fs.promises.rename(temp, final);
    } catch (err) {
      await fs.promises.rm(temp, { force: true });
      throw err;
    }
    return { bytes };
  }

  async open(key: string): Promise<StoredVideo | undefined> {
    const file = path.join(this.dir, checkKey(key));
    let size: number;
    try {
      size = (await fs.promises.stat(file)).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    return {
      size,
      async read(position: number, length: number): Promise<Uint8Array> {
        const fh = await fs.promises.open(file, 'r');
        try {
          const buf = Buffer.alloc(length);
          const { bytesRead } = await fh.read(buf, 0, length, position);
          return buf.subarray(0, bytesRead);
        } finally {
          await fh.close();
        }
      },
      stream: () => fs.createReadStream(file),
    };
  }

  async delete(key: string): Promise<void> {
    await fs.promises.rm(path.join(this.dir, checkKey(key)), { force: true });
  }

  async removeAbandonedWrites(olderThanMs: number): Promise<number> {
    let names: string[];
    try {
      names = await fs.promises.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    const before = Date.now() - olderThanMs;
    let removed = 0;
    for (const name of names.filter((n) => PARTIAL.test(n))) {
      const file = path.join(this.dir, name);
      try {
        if ((await fs.promises.stat(file)).mtimeMs >= before) continue;
        await fs.promises.rm(file, { force: true });
        removed++;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    return removed;
  }
}

/** At a worker's start: clears what writes killed mid-way (a worker killed mid-download) left in the store. */
export async function removeAbandonedWrites(store: VideoStore, log: Logger): Promise<void> {
  try {
    const n = await store.removeAbandonedWrites(ABANDONED_WRITE_MS);
    if (n > 0)
      log.info({ removed: n, store: store.describe() }, 'removed unfinished video downloads left by a stopped worker');
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'could not look for unfinished video downloads');
  }
}

/** The object key of a job's video. */
export const videoKey = (jobId: string): string => `${jobId}.mp4`;
