// What the gateway exposes, and to whom, computed from the configuration alone: the startup log
// line, the refusal of an unsafe setup and any summary for people all read these facts.
import type { Config } from './config.ts';

/** Who can connect to a listening address. */
export type Reach = 'this machine' | 'the network';

export interface Exposure {
  http: {
    host: string;
    port: number;
    reach: Reach;
    /** GET /metrics: a bearer token (METRICS_TOKEN), or loopback callers only. */
    metrics: 'token' | 'loopback callers only';
  };
  rpc: {
    host: string;
    port: number;
    reach: Reach;
    /** Billing and Catalogue calls: a bearer token (ADMIN_TOKEN), or loopback callers only. */
    admin: 'token' | 'loopback callers only';
    /** Inference and Video calls always authenticate with the caller's own gateway key. */
    inference: 'gateway key';
  };
}

/** The shortest admin token accepted: a guessable token on an open port is no protection. */
export const MIN_ADMIN_TOKEN_LENGTH = 16;

/** True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || /^::ffff:127(\.\d{1,3}){3}$/.test(h);
}

/** A peer address as Node reports it (`remoteAddress`), loopback or not. */
export function isLoopbackPeer(address: string | undefined): boolean {
  return address !== undefined && isLoopback(address);
}

const reachOf = (host: string): Reach => (isLoopback(host) ? 'this machine' : 'the network');

/** The facts; `ports` are the bound ones when known (PORT=0 picks a free port). */
export function exposureOf(config: Config, ports: { http?: number; rpc?: number } = {}): Exposure {
  return {
    http: {
      host: config.host,
      port: ports.http ?? config.port,
      reach: reachOf(config.host),
      metrics: config.metricsToken ? 'token' : 'loopback callers only',
    },
    rpc: {
      host: config.grpcHost,
      port: ports.rpc ?? config.grpcPort,
      reach: reachOf(config.grpcHost),
      admin: config.adminToken ? 'token' : 'loopback callers only',
      inference: 'gateway key',
    },
  };
}

/** A configuration the gateway refuses to start with; the message says what to set. */
export class UnsafeExposureError extends Error {}

/** Why the gateway must not start with this configuration, or undefined when it may. */
export function unsafeExposure(config: Config): string | undefined {
  if (config.adminToken !== undefined && config.adminToken.length < MIN_ADMIN_TOKEN_LENGTH) {
    return `ADMIN_TOKEN is shorter than ${MIN_ADMIN_TOKEN_LENGTH} characters. Use a long random secret, e.g. \`openssl rand -hex 32\`.`;
  }
  if (!config.adminToken && !isLoopback(config.grpcHost)) {
    return (
      `GRPC_HOST=${config.grpcHost} opens the RPC port (BillingService: keys, balances, top-ups) to the network, and ADMIN_TOKEN is not set. ` +
      `Set ADMIN_TOKEN to a long random secret (Billing and Catalogue callers then send "authorization: Bearer <ADMIN_TOKEN>"; ` +
      `the CLI and \`npm run bot\` read ADMIN_TOKEN from their environment), or leave GRPC_HOST unset to listen on 127.0.0.1 only.`
    );
  }
  return undefined;
}

/** One line for people: what is reachable where. */
export function describeExposure(e: Exposure): string {
  return [
    `HTTP on ${e.http.host}:${e.http.port} (${e.http.reach}; /metrics: ${e.http.metrics === 'token' ? 'METRICS_TOKEN required' : 'loopback callers only'})`,
    `RPC on ${e.rpc.host}:${e.rpc.port} (${e.rpc.reach}; Billing/Catalogue: ${e.rpc.admin === 'token' ? 'ADMIN_TOKEN required' : 'loopback callers only, no admin token'}; Inference/Video: gateway key)`,
  ].join('; ');
}
