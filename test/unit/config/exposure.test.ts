// What the gateway exposes is computed from its configuration alone: safe by default, refused
// when the billing port is opened without a token, and tokens compared in constant time.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.ts';
import { describeExposure, exposureOf, isLoopback, unsafeExposure } from '../../../src/config/exposure.ts';
import { localRpcUrl } from '../../../src/config/gateway-address.ts';
import { bearerMatches } from '../../../src/config/bearer.ts';

describe('exposure', () => {
  it('npm start defaults: RPC on loopback, metrics for loopback callers only, nothing refused', () => {
    const config = loadConfig({});
    expect(config.grpcHost).toBe('127.0.0.1');
    expect(config.media.uploadTotalLimitBytes).toBe(64 * 1024 * 1024);
    expect(unsafeExposure(config)).toBeUndefined();
    expect(exposureOf(config)).toEqual({
      http: { host: '0.0.0.0', port: 8080, reach: 'the network', metrics: 'loopback callers only' },
      rpc: {
        host: '127.0.0.1',
        port: 8081,
        reach: 'this machine',
        admin: 'loopback callers only',
        inference: 'gateway key',
      },
    });
    expect(describeExposure(exposureOf(config))).toBe(
      'HTTP on 0.0.0.0:8080 (the network; /metrics: loopback callers only); RPC on 127.0.0.1:8081 (this machine; Billing/Catalogue: loopback callers only, no admin token; Inference/Video: gateway key)',
    );
  });

  it.each(['0.0.0.0', '::', '10.0.0.5', 'gateway.internal', '192.0.2.2'])(
    'GRPC_HOST=%s without ADMIN_TOKEN is refused with what to set',
    (host) => {
      const why = unsafeExposure(loadConfig({ GRPC_HOST: host }));
      expect(why).toContain(`GRPC_HOST=${host}`);
      expect(why).toContain('Set ADMIN_TOKEN');
      expect(
        unsafeExposure(loadConfig({ GRPC_HOST: host, ADMIN_TOKEN: 'a-long-enough-secret-token' })),
      ).toBeUndefined();
    },
  );

  it('a short admin token is refused anywhere', () => {
    expect(unsafeExposure(loadConfig({ ADMIN_TOKEN: 'short' }))).toContain('shorter than 16');
  });

  it('loopback addresses', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1'])
      expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '', '10.0.0.1', '128.0.0.1', '127.0.0.1.example.com', '::ffff:10.0.0.1'])
      expect(isLoopback(h), h).toBe(false);
  });

  it('clients on this machine find the RPC port from GRPC_HOST and GRPC_PORT', () => {
    expect(localRpcUrl({})).toBe('http://127.0.0.1:8081');
    expect(localRpcUrl({ GRPC_HOST: '0.0.0.0', GRPC_PORT: '9000' })).toBe('http://127.0.0.1:9000');
    expect(localRpcUrl({ GRPC_HOST: '10.1.2.3' })).toBe('http://10.1.2.3:8081');
    expect(localRpcUrl({ GRPC_HOST: '::1' })).toBe('http://[::1]:8081');
  });

  it('bearer tokens match exactly, whatever the length of the guess', () => {
    expect(bearerMatches('Bearer s3cret-token', 's3cret-token')).toBe(true);
    for (const wrong of [
      undefined,
      null,
      '',
      's3cret-token',
      'Bearer s3cret-toke',
      'Bearer s3cret-token ',
      'bearer s3cret-token',
      'Bearer s3cret-tokenX',
    ]) {
      expect(bearerMatches(wrong, 's3cret-token'), String(wrong)).toBe(false);
    }
  });
});
