// How the operator CLI (and `npm run bot`) finds the gateway, the same way the gateway chose its port:
// GATEWAY_RPC_URL, else GRPC_PORT (with GRPC_HOST), else the address a running gateway wrote
// down in its DATA_DIR (`npm start` writes DATA_DIR/gateway.json and removes it when it stops),
// else the default port 8081. The file is trusted only when it is this user's (or root's), not
// writable by others, and its gateway process is still alive: the CLI sends ADMIN_TOKEN to
// whatever address it names. Part of the clients' configuration (cli-config.ts, bot-config.ts),
// and DATA_DIR is resolved here for the gateway too (config.ts).
import fs from 'node:fs';
import path from 'node:path';
import { nonEmpty } from './env.ts';

export const DEFAULT_RPC_PORT = 8081;

export interface GatewayAddress {
  rpcUrl: string;
  httpUrl: string;
  pid: number;
  startedAt: string;
}

export interface FoundGateway {
  rpcUrl: string;
  /** The gateway's HTTP address, when its address file says it ('' otherwise): for console links. */
  httpUrl?: string;
  /** Where the address came from, for messages: "GATEWAY_RPC_URL", "/x/data/gateway.json, written by gateway pid 12", … */
  source: string;
  /** Address files looked at and set aside, and why. */
  ignored: string[];
}

/** DATA_DIR as the gateway resolves it (relative to the working directory, default ./data). */
export function dataDirOf(env: NodeJS.ProcessEnv, cwd = process.cwd()): string {
  return path.resolve(cwd, nonEmpty(env.DATA_DIR) ?? 'data');
}

/**
 * Where a client on this machine (the CLI, `npm run bot`) finds the RPC port by default: the
 * gateway's GRPC_HOST and GRPC_PORT, with a wildcard address reached through loopback.
 */
export function localRpcUrl(env: NodeJS.ProcessEnv): string {
  const host = env.GRPC_HOST?.trim() || '127.0.0.1';
  const reachable = host === '0.0.0.0' || host === '::' || host === '[::]' ? '127.0.0.1' : host;
  return `http://${reachable.includes(':') && !reachable.startsWith('[') ? `[${reachable}]` : reachable}:${env.GRPC_PORT?.trim() || DEFAULT_RPC_PORT}`;
}

export function addressFilePath(dataDir: string): string {
  return path.join(dataDir, 'gateway.json');
}

/** Written by `npm start` once both ports listen; replaced atomically. */
export function writeGatewayAddress(dataDir: string, address: GatewayAddress): string {
  const file = addressFilePath(dataDir);
  fs.mkdirSync(dataDir, { recursive: true });
  const tmp = `${file}.${address.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(address, null, 2)}\n`, { mode: 0o644 });
  fs.renameSync(tmp, file);
  return file;
}

/** Removed at shutdown, unless another gateway has written its own address since. */
export function removeGatewayAddress(dataDir: string, pid: number): void {
  const file = addressFilePath(dataDir);
  try {
    const current = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<GatewayAddress>;
    if (current.pid === pid) fs.rmSync(file, { force: true });
  } catch {
    // gone or unreadable: nothing of ours to remove
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, belongs to someone else
  }
}

/** The address in `file`, or why it cannot be used. */
export function readGatewayAddress(file: string): { address: GatewayAddress } | { problem: string } | undefined {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch {
    return undefined;
  }
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid && stat.uid !== 0) return { problem: 'it belongs to another user' };
  if ((stat.mode & 0o022) !== 0) return { problem: 'others may write to it' };
  let address: Partial<GatewayAddress>;
  try {
    address = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<GatewayAddress>;
  } catch {
    return { problem: 'it is not valid JSON' };
  }
  if (typeof address.rpcUrl !== 'string' || !/^https?:\/\/[^/]+/.test(address.rpcUrl) || !Number.isInteger(address.pid))
    return { problem: 'it has no RPC address' };
  if (!alive(address.pid!)) return { problem: `its gateway (pid ${address.pid}) is no longer running` };
  return { address: address as GatewayAddress };
}

export function findGateway(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): FoundGateway {
  const explicit = nonEmpty(env.GATEWAY_RPC_URL);
  if (explicit) return { rpcUrl: explicit.replace(/\/+$/, ''), source: 'GATEWAY_RPC_URL', ignored: [] };
  const port = nonEmpty(env.GRPC_PORT);
  if (port) return { rpcUrl: localRpcUrl(env), source: `GRPC_PORT=${port}`, ignored: [] };
  const file = addressFilePath(dataDirOf(env, cwd));
  const found = readGatewayAddress(file);
  if (found && 'address' in found)
    return {
      rpcUrl: found.address.rpcUrl,
      httpUrl: found.address.httpUrl,
      source: `${file}, written by gateway pid ${found.address.pid}`,
      ignored: [],
    };
  return {
    rpcUrl: localRpcUrl({ ...env, GRPC_PORT: String(DEFAULT_RPC_PORT) }),
    source: 'the default port',
    ignored: found ? [`${file}: ${found.problem}`] : [],
  };
}
