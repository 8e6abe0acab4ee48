// What `npm start -- <options>` may add to the settings: the options of the command line, and
// the .env file read before the settings are (with Node's own parser, util.parseEnv: no
// dependency). A variable already in the environment wins over the file's, as with Node's own
// --env-file; the file never changes one that is set, even to the empty string. (The option is
// --settings, not --env-file: Node 24 checks an --env-file anywhere on its command line, the
// script's own arguments included, and exits 9 when the file is missing, before any of ours runs.)
import fs from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { loadConfig, type Config, type EnvFileRead } from './config.ts';

export interface StartOptions {
  /** --demo: the shipped providers answered by the built-in demo provider (src/demo/). */
  demo: boolean;
  /** --settings <path>: the settings file to read instead of ./.env. */
  envFile: string | undefined;
  /** --help: print the options and exit. */
  help: boolean;
}

export const START_USAGE = [
  'npm start [-- options]',
  '  --demo             answer every shipped model with the built-in demo provider: made-up answers at the',
  '                     shipped prices, billed for real; no provider key needed (never on unless asked)',
  '  --settings <path>  read settings from this file instead of ./.env (variables already set win)',
  '  --help             this text',
].join('\n');

/** The options after `npm start --`; an Error naming the option when one is not known or lacks its value. */
export function parseStartArgs(argv: readonly string[]): StartOptions {
  const out: StartOptions = { demo: false, envFile: undefined, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--demo') out.demo = true;
    else if (arg === '--help' || arg === '-h') out.help = true;
    else if (arg === '--settings' || arg.startsWith('--settings=')) {
      const value = arg === '--settings' ? argv[++i] : arg.slice('--settings='.length);
      if (value === undefined || value === '' || value.startsWith('--'))
        throw new Error('--settings needs the path of a settings file, e.g. --settings ./production.env');
      out.envFile = value;
    } else
      throw new Error(`unknown option ${JSON.stringify(arg)}; npm start takes --demo, --settings <path> and --help`);
  }
  return out;
}

/**
 * Reads `named` (relative to `cwd`; it must exist) or else `cwd`/.env when there is one, into
 * `env`, leaving every variable `env` already has as it is. Undefined when there was no file to read.
 */
export function readEnvFile(opts: {
  named: string | undefined;
  cwd: string;
  env: NodeJS.ProcessEnv;
}): EnvFileRead | undefined {
  const file = path.resolve(opts.cwd, opts.named ?? '.env');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (opts.named === undefined && code === 'ENOENT') return undefined;
    throw new Error(`${opts.named === undefined ? '.env' : '--settings'}: cannot read ${file} (${code ?? err})`);
  }
  const read: EnvFileRead = { path: file, set: [], kept: [] };
  const entries = Object.entries(parseEnv(text)).sort(([a], [b]) => a.localeCompare(b));
  for (const [name, value] of entries) {
    if (opts.env[name] !== undefined) read.kept.push(name);
    else {
      opts.env[name] = value;
      read.set.push(name);
    }
  }
  return read;
}

/**
 * `npm start`'s configuration from its command line (`argv` after the script): the options, then
 * the settings file into `env`, then the settings. Undefined for --help. Throws an Error naming
 * what it cannot use.
 */
export function loadStartConfig(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): Config | undefined {
  const options = parseStartArgs(argv);
  if (options.help) return undefined;
  const envFile = readEnvFile({ named: options.envFile, cwd, env });
  return loadConfig(env, { demo: options.demo, envFile });
}
