// The Node version check that runs before any .ts file (scripts/node-check.mjs).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MINIMUM_NODE, atLeast, nodeVersionProblem, parseVersion } from '../../../scripts/node-check.mjs';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

describe('node version check', () => {
  it('compares versions numerically, part by part', () => {
    expect(atLeast('v22.19.0', '22.19.0')).toBe(true);
    expect(atLeast('v22.19.1', '22.19.0')).toBe(true);
    expect(atLeast('v22.20.0', '22.19.0')).toBe(true);
    expect(atLeast('v24.0.0', '22.19.0')).toBe(true);
    expect(atLeast('v22.18.9', '22.19.0')).toBe(false);
    expect(atLeast('v22.9.0', '22.19.0')).toBe(false); // 9 < 19, not "9" > "1"
    expect(atLeast('v20.20.2', '22.19.0')).toBe(false);
    expect(atLeast('v100.0.0', '22.19.0')).toBe(true);
    expect(atLeast('not a version', '22.19.0')).toBe(false);
    expect(parseVersion('v24.21.0-nightly')).toEqual([24, 21, 0]);
  });

  it('says in one line what is needed, what runs, and where to get it', () => {
    expect(nodeVersionProblem('v20.20.2')).toBe(
      'metered-ai-gateway needs Node >= 22.19.0, this is v20.20.2; install Node 22 LTS or newer from https://nodejs.org',
    );
    expect(nodeVersionProblem('v22.19.0')).toBeUndefined();
    expect(nodeVersionProblem(process.version)).toBeUndefined();
  });

  it('states the same minimum as package.json engines and the README', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.engines.node).toBe(`>=${MINIMUM_NODE}`);
    expect(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')).toContain(`Node >= ${MINIMUM_NODE}`);
    expect(fs.readFileSync(path.join(ROOT, '.npmrc'), 'utf8')).toMatch(/^engine-strict=true$/m);
    // Every script that runs a .ts entry goes through the check first.
    for (const [name, script] of Object.entries(pkg.scripts as Record<string, string>)) {
      if (/\.ts\b/.test(script) || /vitest/.test(script))
        expect(script, name).toMatch(/^node scripts\/node-check\.mjs /);
    }
  });

  it("runs the entry it is given with that entry's own argv, and passes its exit code on", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'node-check-'));
    try {
      const entry = path.join(dir, 'entry.ts');
      fs.writeFileSync(
        entry,
        'const args: string[] = process.argv.slice(2);\nconsole.log(JSON.stringify([process.argv[1], args]));\nprocess.exit(args.length);\n',
      );
      const r = spawnSync(process.execPath, ['scripts/node-check.mjs', entry, 'a', '--b'], {
        cwd: ROOT,
        encoding: 'utf8',
      });
      expect(JSON.parse(r.stdout)).toEqual([entry, ['a', '--b']]);
      expect(r.status).toBe(2);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
