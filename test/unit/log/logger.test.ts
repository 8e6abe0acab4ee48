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
});
