// gRPC as the wire carries it, for the tests that need what a generated client hides: a frame
// that declares more than it sends, and the google.rpc.Status in grpc-status-details-bin.
import http2 from 'node:http2';
import { BinaryReader, type WireType } from '@bufbuild/protobuf/wire';

/**
 * POSTs to `path` one gRPC frame that declares 600 MB and sends 64 KiB of it; the headers or
 * trailers that carry the grpc-status the server answers with.
 */
export function sendOversizedFrame(rpcUrl: string, path: string): Promise<http2.IncomingHttpHeaders> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(rpcUrl);
    session.on('error', reject);
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc+proto',
      te: 'trailers',
    });
    const done = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] === undefined) return;
      resolve(h);
      stream.close();
      session.close();
    };
    stream.on('response', done);
    stream.on('trailers', done);
    stream.on('error', reject);
    stream.resume();
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(600 * 1024 * 1024, 1);
    stream.write(Buffer.concat([prefix, Buffer.alloc(64 * 1024)]));
  });
}

/**
 * A google.rpc.Status read field by field (code = 1, message = 2, details = 3), as a runtime
 * without its generated type would: its code, message and the Any messages of its details.
 */
export function readStatus(statusBin: Uint8Array): { code: number; message: string; details: Uint8Array[] } {
  const r = new BinaryReader(statusBin);
  const details: Uint8Array[] = [];
  let code = 0;
  let message = '';
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 1) code = r.int32();
    else if (field === 2) message = r.string();
    else if (field === 3) details.push(r.bytes());
    else r.skip(wire as WireType, field);
  }
  return { code, message, details };
}
