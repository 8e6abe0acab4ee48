// Runs the real coding agents from the npm registry (devDependencies) against the test gateway:
// Claude Code (@anthropic-ai/claude-code) and Codex CLI (@openai/codex), each in a throwaway
// HOME and working folder, with a clean environment. Two small servers watch them:
// - a recorder in front of the gateway that passes every request through and notes what the
//   client sent and what it got back (so a test can count requests and read headers);
// - a proxy that refuses everything, set as HTTP(S)_PROXY: any call a client makes to anywhere
//   but the gateway (telemetry, updates, plugin syncs) lands there and fails the test.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLAUDE_PACKAGE = path.join(ROOT, 'node_modules', '@anthropic-ai', 'claude-code');

/**
 * Claude Code's executable. The package ships a small placeholder at bin/claude.exe and links
 * the native binary from its platform package (an optional dependency) in a postinstall
 * script, which npm here does not run: this runs that same script (install.cjs, no network)
 * when the placeholder is still in place.
 */
export function claudeExecutable(): string {
  const bin = path.join(CLAUDE_PACKAGE, 'bin', 'claude.exe');
  if (fs.statSync(bin).size < 4096) {
    const r = spawnSync(process.execPath, [path.join(CLAUDE_PACKAGE, 'install.cjs')], {
      cwd: CLAUDE_PACKAGE,
      encoding: 'utf8',
    });
    if (r.status !== 0 || fs.statSync(bin).size < 4096)
      throw new Error(`could not link Claude Code's native binary: ${r.stderr || r.stdout}`);
  }
  return bin;
}

/** Codex's npm entry point (bin/codex.js), which starts the native binary of its platform package. */
export const codexEntry = (): string => path.join(ROOT, 'node_modules', '@openai', 'codex', 'bin', 'codex.js');

/** Claude Code's own switches for what it would otherwise send elsewhere than the API. */
export const CLAUDE_QUIET = {
  DISABLE_TELEMETRY: '1',
  DISABLE_ERROR_REPORTING: '1',
  DISABLE_AUTOUPDATER: '1',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
};

/** Codex's config.toml for the gateway, with its update check, analytics, feedback and plugin sync off. */
export function codexConfig(opts: { baseUrl: string; model: string }): string {
  return [
    `model = "${opts.model}"`,
    'model_provider = "gateway"',
    'web_search = "disabled"',
    'check_for_update_on_startup = false',
    '',
    '[model_providers.gateway]',
    'name = "gateway"',
    `base_url = "${opts.baseUrl}/v1"`,
    'env_key = "GATEWAY_API_KEY"',
    'wire_api = "responses"',
    '',
    '[features]',
    'plugins = false',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[feedback]',
    'enabled = false',
    '',
  ].join('\n');
}

export interface AgentRun {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** A throwaway HOME and working folder, removed by `cleanup`. */
export function scratchDirs(): { home: string; cwd: string; cleanup: () => void } {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-'));
  const home = path.join(base, 'home');
  const cwd = path.join(base, 'work');
  fs.mkdirSync(home);
  fs.mkdirSync(cwd);
  return { home, cwd, cleanup: () => fs.rmSync(base, { recursive: true, force: true }) };
}

/**
 * Runs a client to its end with nothing but `env` (plus PATH, TERM and the refusing proxy) and
 * no input. `timeoutMs` is a guard against a hung client, not a measurement.
 */
export function runAgent(
  command: string,
  args: string[],
  opts: { env: Record<string, string>; cwd: string; proxyUrl: string; timeoutMs: number },
): Promise<AgentRun> {
  const env: Record<string, string> = {
    PATH: `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    TERM: 'dumb',
    HTTPS_PROXY: opts.proxyUrl,
    HTTP_PROXY: opts.proxyUrl,
    https_proxy: opts.proxyUrl,
    http_proxy: opts.proxyUrl,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
    ...opts.env,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }, opts.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

export interface SeenRequest {
  method: string;
  path: string;
  /** The `model` of a JSON body, if any. */
  model: string | undefined;
  body: string;
  status: number;
  responseHeaders: http.IncomingHttpHeaders;
}

/** Passes requests through to `target` unchanged (streams too) and notes each one. */
export async function startRecorder(
  target: string,
): Promise<{ url: string; seen: SeenRequest[]; close: () => Promise<void> }> {
  const seen: SeenRequest[] = [];
  const t = new URL(target);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const up = http.request(
        {
          host: t.hostname,
          port: t.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: t.host },
        },
        (r) => {
          let model: string | undefined;
          try {
            model = (JSON.parse(body.toString('utf8')) as { model?: string }).model;
          } catch {
            /* not JSON */
          }
          seen.push({
            method: req.method ?? '',
            path: req.url ?? '',
            model,
            body: body.toString('utf8'),
            status: r.statusCode ?? 0,
            responseHeaders: r.headers,
          });
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      res.on('close', () => {
        if (!res.writableFinished) up.destroy();
      });
      up.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, seen, close: () => closeServer(server) };
}

/** An HTTP(S) proxy that refuses every request and tunnel, and remembers where each wanted to go. */
export async function startRefusingProxy(): Promise<{ url: string; attempts: string[]; close: () => Promise<void> }> {
  const attempts: string[] = [];
  const server = http.createServer((req, res) => {
    attempts.push(`${req.method} ${req.url}`);
    res.writeHead(403).end();
  });
  server.on('connect', (req, socket) => {
    attempts.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, attempts, close: () => closeServer(server) };
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Where an agent's requests go: the recorder in front of the gateway, the proxy refusing every other host, and how long a run may take. */
export interface AgentSetup {
  recorderUrl: string;
  proxyUrl: string;
  timeoutMs: number;
}

/** `claude <args>` with the base URL, the key and Claude Code's quiet switches; nothing about models. */
export async function runClaude(setup: AgentSetup, key: string, args: string[]): Promise<AgentRun> {
  const dirs = scratchDirs();
  try {
    return await runAgent(claudeExecutable(), args, {
      cwd: dirs.cwd,
      proxyUrl: setup.proxyUrl,
      timeoutMs: setup.timeoutMs,
      env: { HOME: dirs.home, ANTHROPIC_BASE_URL: setup.recorderUrl, ANTHROPIC_API_KEY: key, ...CLAUDE_QUIET },
    });
  } finally {
    dirs.cleanup();
  }
}

/** `codex exec <prompt>` with ~/.codex/config.toml pointing at the gateway and the key in GATEWAY_API_KEY. */
export async function runCodex(setup: AgentSetup, key: string, model: string, prompt: string): Promise<AgentRun> {
  const dirs = scratchDirs();
  try {
    fs.mkdirSync(path.join(dirs.home, '.codex'));
    fs.writeFileSync(path.join(dirs.home, '.codex', 'config.toml'), codexConfig({ baseUrl: setup.recorderUrl, model }));
    return await runAgent(process.execPath, [codexEntry(), 'exec', '--skip-git-repo-check', prompt], {
      cwd: dirs.cwd,
      proxyUrl: setup.proxyUrl,
      timeoutMs: setup.timeoutMs,
      env: { HOME: dirs.home, GATEWAY_API_KEY: key },
    });
  } finally {
    dirs.cleanup();
  }
}
