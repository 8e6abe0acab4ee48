import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

/** Runs `code` in a Node process of its own with the gateway's logger, stdout to a file; resolves with the file once it exits. */
async function run(code: string): Promise<string> {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'logger-test-')), 'stdout');
  const fd = fs.openSync(file, 'w');
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', `import { createLogger } from './src/log/logger.ts';\n${code}`],
    { cwd: ROOT, stdio: ['ignore', fd, 'inherit'] },
  );
  fs.closeSync(fd);
  await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  return fs.readFileSync(file, 'utf8');
}

// Lines are written in batches (src/log/logger.ts): none may be lost when the process exits.
describe('logger', () => {
  it('writes every queued line when the process exits right after logging', async () => {
    const out = await run(`const log = createLogger('info');
      for (let i = 0; i < 1000; i++) log.info({ i }, 'line');
      log.fatal('last words');
      process.exit(1);`);
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { msg: string; i?: number });
    expect(lines).toHaveLength(1001);
    expect(lines.slice(0, 1000).map((l) => l.i)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(lines.at(-1)!.msg).toBe('last words');
  });

  it('writes every line, in order, when the process ends by itself with lines still queued', async () => {
    // More than one batch, the last one still queued when nothing else is left to run.
    const out = await run(`const log = createLogger('info');
      for (let i = 0; i < 3000; i++) log.info({ i }, 'line');`);
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number });
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 3000 }, (_, i) => i));
  });

  it('writes a lone line while the process keeps running, and still masks keys', async () => {
    // The process stays up until its stdout file has the line (10 s at most), then kills itself
    // (no exit handler runs): the batch went out without an exit or more lines to push it.
    const out = await run(`import fs from 'node:fs';
      const log = createLogger('info');
      log.info({ note: 'key prx-ABCDEFGHIJ1234567890abcdefghijklmnopqrst in a message' }, 'alone');
      const until = Date.now() + 10000;
      setInterval(() => {
        if (fs.fstatSync(1).size > 0 || Date.now() > until) process.kill(process.pid, 'SIGKILL');
      }, 20);`);
    expect(out).toContain('"msg":"alone"');
    expect(out).not.toContain('prx-ABCDEFGHIJ1234567890');
  });

  it('keeps serving while stdout is a pipe nobody reads, drops what does not fit, and says so once it is read again', async () => {
    // 40 MiB of lines into a pipe the test does not read at first: a write on the event loop
    // would block it at the pipe's 64 KiB and the child would never say "done"; an unbounded
    // queue would hold all 40 MiB. The child reports, on a file of its own, that its loop went on
    // and how much its heap grew; then the test reads, and the child ends.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logger-test-'));
    const report = path.join(dir, 'report');
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import fs from 'node:fs';
        import { createLogger } from './src/log/logger.ts';
        const log = createLogger('info');
        const pad = 'x'.repeat(1000);
        const heap = process.memoryUsage().heapUsed;
        let i = 0;
        const more = () => {
          for (let k = 0; k < 400 && i < 40000; k++, i++) log.info({ i, pad }, 'line');
          if (i < 40000) return setImmediate(more);
          const grew = process.memoryUsage().heapUsed - heap;
          fs.writeFileSync(${JSON.stringify(report)}, JSON.stringify({ grew }));
          // A line after the loss, once stdout is read again: it comes after the notice.
          const wait = setInterval(() => {
            if (fs.existsSync(${JSON.stringify(report + '.read')})) {
              clearInterval(wait);
              log.info({ i: 40000 }, 'after');
              setTimeout(() => {}, 300);
            }
          }, 20);
        };
        more();`,
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    child.stdout!.pause();
    const until = Date.now() + 30_000;
    while (!fs.existsSync(report) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(fs.existsSync(report)).toBe(true);
    const { grew } = JSON.parse(fs.readFileSync(report, 'utf8')) as { grew: number };
    expect(grew).toBeLessThan(24 * 1024 * 1024);
    const chunks: Buffer[] = [];
    child.stdout!.on('data', (c: Buffer) => chunks.push(c));
    child.stdout!.resume();
    // Everything the ring held goes out before the next line is logged.
    await new Promise((r) => setTimeout(r, 500));
    fs.writeFileSync(report + '.read', '');
    await new Promise((resolve) => child.once('exit', resolve));
    const lines = Buffer.concat(chunks)
      .toString('utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i?: number; msg: string; level: number });
    const numbered = lines.filter((l) => l.msg === 'line').map((l) => l.i!);
    expect(numbered[0]).toBe(0);
    expect(numbered.length).toBeGreaterThan(10_000); // the ring's 16 MiB and the pipe's buffer
    expect(numbered.length).toBeLessThan(40_000); // the rest was dropped
    expect(numbered.every((n, k) => k === 0 || n > numbered[k - 1]!)).toBe(true);
    const notice = lines.findIndex((l) => /stdout did not take \d+ bytes of log lines/.test(l.msg));
    expect(notice).toBeGreaterThan(0);
    expect(lines[notice]!.level).toBe(40);
    expect(lines.at(-1)!.msg).toBe('after');
    expect(notice).toBe(lines.length - 2);
  }, 60_000);
});
