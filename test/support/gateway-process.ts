// Runs the gateway as its own process, exactly as `npm start` does, with its logs in a file.
// Billing is per-request holds unless the test asks for leases: most tests look at the hold
// and settle rows a request leaves; leases.test.ts, key-cache.test.ts and a soak seed run leases.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from './ports.ts';

export interface GatewayProcess {
  httpUrl: string;
  rpcUrl: string;
  logFile: string;
  child: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export async function startGatewayProcess(
  opts: { env: Record<string, string>; logFile: string; command?: string[]; cwd?: string },
  attempt = 1,
): Promise<GatewayProcess> {
  // `npm start` reads ./.env before its settings: a developer's would change every test gateway's.
  if (opts.cwd === undefined && fs.existsSync(path.join(ROOT, '.env')))
    throw new Error(
      `${path.join(ROOT, '.env')} would be read by every gateway the tests start: move it away while they run`,
    );
  const port = Number(opts.env.PORT) || (await freePort());
  const grpcPort = Number(opts.env.GRPC_PORT) || (await freePort());
  const logStart = fs.existsSync(opts.logFile) ? fs.statSync(opts.logFile).size : 0;
  const log = fs.openSync(opts.logFile, 'a');
  const [cmd, ...args] = opts.command ?? [process.execPath, 'src/process/main.ts'];
  const child = spawn(cmd!, args, {
    cwd: opts.cwd ?? ROOT,
    // A DATA_DIR of its own unless the test names one: a test gateway never writes its address
    // (gateway.json) into the checkout's ./data, where a developer's own gateway keeps it.
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      GRPC_HOST: '127.0.0.1',
      BILLING_MODE: 'hold',
      DATA_DIR: fs.mkdtempSync(path.join(path.dirname(opts.logFile), 'data-')),
      ...opts.env,
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
    },
    stdio: ['ignore', log, log],
    // Own process group, so stopping `npm start` stops the node process under it too.
    detached: true,
  });
  fs.closeSync(log);
  const httpUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) {
      // A free port found here can be taken by another process before the gateway binds it:
      // ports this function chose are chosen again.
      const ownPorts = !Number(opts.env.PORT) || !Number(opts.env.GRPC_PORT);
      if (ownPorts && attempt < 3 && fs.readFileSync(opts.logFile, 'utf8').slice(logStart).includes('EADDRINUSE'))
        return startGatewayProcess(opts, attempt + 1);
      throw new Error(
        `gateway exited with ${child.exitCode}; log: ${fs.readFileSync(opts.logFile, 'utf8').slice(-3000)}`,
      );
    }
    try {
      const r = await fetch(`${httpUrl}/readyz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline)
      throw new Error(`gateway not ready in time; log: ${fs.readFileSync(opts.logFile, 'utf8').slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    httpUrl,
    rpcUrl: `http://127.0.0.1:${grpcPort}`,
    logFile: opts.logFile,
    child,
    stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
      return new Promise((resolve) => {
        child.once('exit', (code) => resolve(code));
        try {
          process.kill(-child.pid!, signal);
        } catch {
          child.kill(signal);
        }
      });
    },
  };
}
