// Everything the operator CLI (`npm run cli`) reads from its environment: where the gateway is
// (gateway-address.ts: GATEWAY_RPC_URL, GRPC_PORT and GRPC_HOST, DATA_DIR) and the admin token.
import { nonEmpty } from './env.ts';
import { findGateway, type FoundGateway } from './gateway-address.ts';

export interface CliConfig {
  gateway: FoundGateway;
  /** ADMIN_TOKEN, sent as a bearer token when set; the gateway requires it when it has one. */
  adminToken: string | undefined;
  /** A variable of the CLI's own environment: `providers set-credential --from-env VAR` sends its value. */
  variable(name: string): string | undefined;
}

export function loadCliConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): CliConfig {
  return {
    gateway: findGateway(env, cwd),
    adminToken: nonEmpty(env.ADMIN_TOKEN),
    variable: (name) => (Object.hasOwn(env, name) ? env[name] : undefined),
  };
}
