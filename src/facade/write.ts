// Writes to a raw HTTP response with backpressure: waits for 'drain', fails once the client is gone.
import type { ServerResponse } from 'node:http';

export function writeChunk(res: ServerResponse, chunk: string | Uint8Array): Promise<void> {
  if (res.destroyed) return Promise.reject(new Error('client gone'));
  if (res.write(chunk)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      res.off('drain', ok);
      res.off('close', gone);
      err ? reject(err) : resolve();
    };
    const ok = () => done();
    const gone = () => done(new Error('client gone'));
    res.once('drain', ok);
    res.once('close', gone);
  });
}
