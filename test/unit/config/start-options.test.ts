// `npm start`'s options and its .env file: what is read, what wins, and the errors that name
// what was wrong. test/e2e/npm-start.test.ts runs them with the real gateway.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseStartArgs, readEnvFile } from '../../../src/config/start-options.ts';
import { loadConfig } from '../../../src/config/config.ts';

const folder = () => fs.mkdtempSync(path.join(os.tmpdir(), 'start-options-'));

describe('npm start options', () => {
  it('reads --demo, --settings in both spellings and --help; nothing given is nothing on', () => {
    expect(parseStartArgs([])).toEqual({ demo: false, envFile: undefined, help: false });
    expect(parseStartArgs(['--demo', '--settings', 'prod.env'])).toEqual({
      demo: true,
      envFile: 'prod.env',
      help: false,
    });
    expect(parseStartArgs(['--settings=a/b.env']).envFile).toBe('a/b.env');
    expect(parseStartArgs(['--help']).help).toBe(true);
  });

  it('refuses an unknown option and a --settings without its path, naming them', () => {
    expect(() => parseStartArgs(['--dmeo'])).toThrow(
      'unknown option "--dmeo"; npm start takes --demo, --settings <path> and --help',
    );
    expect(() => parseStartArgs(['--settings'])).toThrow('--settings needs the path of a settings file');
    expect(() => parseStartArgs(['--settings', '--demo'])).toThrow('--settings needs the path');
  });

  it('the demo is on only when asked for', () => {
    expect(loadConfig({}).demo).toBe(false);
    expect(loadConfig({}, { demo: true }).demo).toBe(true);
  });
});

describe('the .env file', () => {
  it("fills in what the environment does not set, and leaves what it sets (even to '') as it is", () => {
    const dir = folder();
    fs.writeFileSync(
      path.join(dir, '.env'),
      [
        '# a comment',
        'OPENAI_API_KEY=sk-from-file',
        'PORT=9000',
        'LOG_LEVEL="debug"',
        "ADMIN_TOKEN='quoted value with spaces'",
        'HOST=',
        '',
      ].join('\n'),
    );
    const env: NodeJS.ProcessEnv = { PORT: '8088', HOST: '' };
    const read = readEnvFile({ named: undefined, cwd: dir, env });
    expect(read).toEqual({
      path: path.join(dir, '.env'),
      set: ['ADMIN_TOKEN', 'LOG_LEVEL', 'OPENAI_API_KEY'],
      kept: ['HOST', 'PORT'],
    });
    expect(env).toEqual({
      PORT: '8088',
      HOST: '',
      OPENAI_API_KEY: 'sk-from-file',
      LOG_LEVEL: 'debug',
      ADMIN_TOKEN: 'quoted value with spaces',
    });
    const config = loadConfig(env, { envFile: read });
    expect([config.port, config.logLevel, config.providers.openai.apiKey]).toEqual([8088, 'debug', 'sk-from-file']);
  });

  it('without ./.env nothing is read; a file named by --settings must exist', () => {
    const dir = folder();
    const env: NodeJS.ProcessEnv = {};
    expect(readEnvFile({ named: undefined, cwd: dir, env })).toBeUndefined();
    expect(() => readEnvFile({ named: 'missing.env', cwd: dir, env })).toThrow(
      `--settings: cannot read ${path.join(dir, 'missing.env')} (ENOENT)`,
    );
    fs.writeFileSync(path.join(dir, 'other.env'), 'BILLING_MODE=hold\n');
    fs.writeFileSync(path.join(dir, '.env'), 'BILLING_MODE=lease\nPORT=1\n');
    // The named file is read instead of ./.env, not as well.
    expect(readEnvFile({ named: 'other.env', cwd: dir, env })?.set).toEqual(['BILLING_MODE']);
    expect(env).toEqual({ BILLING_MODE: 'hold' });
  });
});
