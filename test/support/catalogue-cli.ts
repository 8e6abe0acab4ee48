// The operator CLI as an operator runs it: a Node process of its own (`npm run cli -- catalogue …`,
// `providers …`) against a gateway's RPC port, with no admin token.
import { spawn } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** Runs `catalogue <args>` against `rpcUrl`, `stdin` written to its standard input; its exit code and output. */
export function runCatalogueCli(
  rpcUrl: string,
  args: string[],
  stdin = '',
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCli(rpcUrl, ['catalogue', ...args], stdin);
}

/** Runs the CLI with `args` (`providers add …`, `catalogue apply …`) against `rpcUrl`, as runCatalogueCli does. */
export function runCli(
  rpcUrl: string,
  args: string[],
  stdin = '',
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['src/cli/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, GATEWAY_RPC_URL: rpcUrl, ADMIN_TOKEN: '', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    // A CLI that stops reading early closes its stdin: what is left unwritten is not an error here.
    child.stdin.on('error', () => {});
    child.stdin.end(stdin);
  });
}
