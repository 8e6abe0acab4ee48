// Where finished videos live. The gateway and every worker must see the same store: a folder
// (VIDEO_DIR) on one machine or a shared volume; an object store (S3, GCS, Azure Blob) can
// implement the same interface later for workers on other machines.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
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
  put(key: string, body: AsyncIterable<Uint8Array>, onProgress?: (bytes: number) => void): Promise<{ bytes: number }>;
  /** Undefined when there is no such object. */
  open(key: string): Promise<StoredVideo | undefined>;
  delete(key: string): Promise<void>;
  /** Where it is, for the startup log. */
  describe(): string;
}

const KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$/;

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

  async put(key: string, body: AsyncIterable<Uint8Array>, onProgress?: (bytes: number) => void): Promise<{ bytes: number }> {
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
}

/** The object key of a job's video. */
export const videoKey = (jobId: string): string => `${jobId}.mp4`;
