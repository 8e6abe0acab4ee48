// JSON log lines to stdout, in batches written by a thread of their own.
//
// Lines queue as they are (an array, nothing joined per line) until 16 KiB are queued or 100 ms
// have passed; the batch is then copied into a ring shared with a worker thread, which writes it
// to fd 1 with plain blocking writes. So the event loop pays one copy and one wake-up per batch,
// not a write call per line, and a stdout that is slow or stops taking lines (a pipe whose reader
// stalls) holds only that thread: the ring (16 MiB) fills and later batches are dropped, counted,
// instead of growing memory or stalling requests.
//
// At exit (process.exit, a fatal error, the loop running dry) the queued lines go into the ring and
// the exit waits, up to 5 s, for the thread to have written everything: one writer, in order, so
// no line lands after a later one (a batch handed to libuv's thread pool could, with the lines
// written synchronously at exit; docs/benchmark.md). A SIGKILL loses at most the last 100 ms.
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';

const RING = 16 * 1024 * 1024; // a power of two: positions are taken modulo it
const BATCH_CHARS = 16384;
const FLUSH_MS = 100;
const EXIT_WAIT_MS = 5000;
// The shared state's slots: bytes ever put in, bytes ever written out (both modulo 2^32).
const IN = 0;
const OUT = 1;

// The writer thread: waits for bytes, writes them, says how far it got. An error other than a
// full non-blocking pipe (a closed reader, a gone terminal) drops what it could not write. Written
// for either module type the process runs as (getBuiltinModule, no require or import).
const WRITER = `
const fs = process.getBuiltinModule('node:fs');
const { workerData } = process.getBuiltinModule('node:worker_threads');
const state = new Int32Array(workerData.state);
const ring = Buffer.from(workerData.ring);
const size = ring.length;
const pause = new Int32Array(new SharedArrayBuffer(4));
function writeAll(from, to) {
  while (from < to) {
    try {
      from += fs.writeSync(1, ring, from, to - from);
    } catch (err) {
      if (err.code !== 'EAGAIN') return;
      Atomics.wait(pause, 0, 0, 5);
    }
  }
}
for (;;) {
  const end = Atomics.load(state, ${IN});
  const at = Atomics.load(state, ${OUT});
  if (at === end) {
    Atomics.wait(state, ${IN}, end);
    continue;
  }
  const start = at & (size - 1);
  const stop = start + ((end - at) | 0);
  if (stop <= size) writeAll(start, stop);
  else {
    writeAll(start, size);
    writeAll(0, stop - size);
  }
  Atomics.store(state, ${OUT}, end);
  Atomics.notify(state, ${OUT});
}
`;

/** The destination pino writes JSON lines to when none is given (src/log/logger.ts). */
export class StdoutLines {
  private lines: string[] = [];
  private chars = 0;
  private readonly state = new Int32Array(new SharedArrayBuffer(8));
  private ring: Buffer<ArrayBufferLike> = Buffer.alloc(0);
  /** Bytes of lines dropped (the ring was full) that no line written since has told of. */
  private lostUntold = 0;

  private started = false;
  /** Set when the writer thread could not start or ended: batches are then written here, synchronously. */
  private writerGone = false;

  /** The writer, the 100 ms flush and the exit's wait start with the first line (a silent logger starts none). */
  private start(): void {
    this.started = true;
    this.ring = Buffer.from(new SharedArrayBuffer(RING));
    const writer = new Worker(WRITER, {
      eval: true,
      workerData: { state: this.state.buffer, ring: this.ring.buffer },
      stdout: false,
      stderr: false,
    });
    writer.unref();
    const gone = () => {
      this.writerGone = true;
    };
    writer.on('error', gone).on('exit', gone);
    setInterval(() => this.flush(), FLUSH_MS).unref();
    process.once('exit', () => this.flushSync());
  }

  write(line: string): boolean {
    if (!this.started) this.start();
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= BATCH_CHARS) this.handOver();
    return true;
  }

  /** pino's `logger.flush()`: the queued lines go to the writer now. */
  flush(cb?: (err?: Error) => void): void {
    if (this.lines.length > 0) this.handOver();
    if (cb) process.nextTick(cb);
  }

  /** Everything queued written before this returns (waits for the writer, 5 s at most). */
  flushSync(): void {
    const until = Date.now() + EXIT_WAIT_MS;
    if (this.lines.length > 0) this.handOver(until);
    while (!this.writerGone) {
      const done = Atomics.load(this.state, OUT);
      const left = until - Date.now();
      if (done === Atomics.load(this.state, IN) || left <= 0) return;
      Atomics.wait(this.state, OUT, done, left);
    }
  }

  /** Copies the queued lines into the ring; when it is full, waits until `until` (the exit's deadline) or drops them. */
  private handOver(until = 0): void {
    // The first batch stdout takes after a loss says how much was lost.
    if (this.lostUntold > 0) {
      this.lines.unshift(
        `{"level":40,"time":${Date.now()},"service":"gateway","msg":"stdout did not take ${this.lostUntold} bytes of log lines; they were dropped"}\n`,
      );
    }
    const text = this.lines.length === 1 ? this.lines[0]! : this.lines.join('');
    this.lines = [];
    this.chars = 0;
    if (this.writerGone) return writeHere(text);
    const bytes = Buffer.byteLength(text);
    const end = Atomics.load(this.state, IN);
    for (;;) {
      const free = RING - ((end - Atomics.load(this.state, OUT)) | 0);
      if (bytes <= free) break;
      const left = until - Date.now();
      if (bytes > RING || left <= 0) {
        this.lostUntold += bytes;
        return;
      }
      Atomics.wait(this.state, OUT, Atomics.load(this.state, OUT), left);
    }
    const start = end & (RING - 1);
    if (start + bytes <= RING) this.ring.write(text, start, 'utf8');
    else {
      const b = Buffer.from(text, 'utf8');
      b.copy(this.ring, start, 0, RING - start);
      b.copy(this.ring, 0, RING - start);
    }
    Atomics.store(this.state, IN, (end + bytes) | 0);
    Atomics.notify(this.state, IN);
    this.lostUntold = 0;
  }
}

function writeHere(text: string): void {
  try {
    fs.writeSync(1, text);
  } catch {
    // stdout is gone: nothing else to write it to
  }
}
