// The shell commands docs/video.md shows, run as shown (curl, and node to read JSON) against the test gateway:
// they make, fetch, cancel and delete a real job, and the download fails loudly, writing no
// file, when the job is not done.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { gatewayUrl, newKey } from '../support/context.ts';
import { durationMs, measureMp4 } from '../../src/video/mp4.ts';

const DOC = path.resolve(import.meta.dirname, '..', '..', 'docs', 'video.md');

/** The doc's ```sh blocks, with the test gateway's address for localhost:8080. */
function shellBlocks(): string[] {
  const text = fs.readFileSync(DOC, 'utf8');
  return [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
    m[1]!.replaceAll('http://localhost:8080', gatewayUrl()),
  );
}

// stdin is not a socket: Debian's bash sources /etc/bash.bashrc for a socket stdin when SHLVL is
// unset (as under `docker run … npm test`), which fails under -u.
function bash(script: string, cwd: string, env: Record<string, string>) {
  const r = spawnSync('bash', ['-euo', 'pipefail', '-c', script], {
    cwd,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 120_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

async function mp4Ms(file: string): Promise<bigint> {
  const bytes = fs.readFileSync(file);
  return durationMs(await measureMp4({ size: bytes.length, read: async (p, n) => bytes.subarray(p, p + n) }));
}

describe('docs/video.md', () => {
  it('its commands make a video, fetch it, cancel and delete the job, as the text says', {
    timeout: 180_000,
  }, async () => {
    const blocks = shellBlocks();
    expect(blocks).toHaveLength(3);
    const k = await newKey('5');
    const dir = fs.mkdtempSync(path.join(inject('workDir'), 'docs-video-'));
    const r = bash(blocks.join('\n'), dir, { KEY: k.apiKey });
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(await mp4Ms(path.join(dir, 'boat.mp4'))).toBe(8000n);
    expect(r.out).toContain('200 video/mp4');
    expect(await mp4Ms(path.join(dir, 'boat.out'))).toBe(8000n);
    expect(r.out).toMatch(/"object":"video.deleted","deleted":true/);
  });

  it('its download command fails, writing no file, while the job is not done', { timeout: 60_000 }, async () => {
    const k = await newKey('5');
    const dir = fs.mkdtempSync(path.join(inject('workDir'), 'docs-video-'));
    const headers = { authorization: `Bearer ${k.apiKey}`, 'content-type': 'application/json' };
    const job = (await (
      await fetch(`${gatewayUrl()}/v1/videos`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ prompt: 'A slow boat [sim ms=30000]' }),
      })
    ).json()) as { id: string };
    const download = shellBlocks()[0]!
      .split('\n')
      .find((line) => line.includes('/content'))!;
    const r = bash(download, dir, { KEY: k.apiKey, ID: job.id });
    expect(r.code).toBe(22);
    expect(r.err).toContain('404');
    expect(fs.existsSync(path.join(dir, 'boat.mp4'))).toBe(false);
    expect((await fetch(`${gatewayUrl()}/v1/videos/${job.id}/cancel`, { method: 'POST', headers })).status).toBe(200);
  });
});
