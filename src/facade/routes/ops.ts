// The operator's routes on the HTTP port: GET /healthz (the process answers), GET /readyz (its
// dependencies answer too) and GET /metrics (Prometheus). No key: they are not under /v1/.
import type { FastifyPluginAsync } from 'fastify';
import { bearerMatches } from '../../config/bearer.ts';
import { isLoopbackPeer } from '../../config/exposure.ts';
import type { Metrics } from '../../log/metrics.ts';

export interface OpsRouteOptions {
  metrics: Metrics;
  /** Bearer token for GET /metrics; unset: loopback callers only. */
  metricsToken: string | undefined;
  /** Throws when a dependency (database, …) is not reachable. */
  ready: () => Promise<void>;
}

export const opsRoutes: FastifyPluginAsync<OpsRouteOptions> = async (app, { metrics, metricsToken, ready }) => {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/metrics', async (req, reply) => {
    // With METRICS_TOKEN: that bearer token, from anywhere. Without: callers on this machine only.
    if (
      metricsToken ? !bearerMatches(req.headers.authorization, metricsToken) : !isLoopbackPeer(req.socket.remoteAddress)
    ) {
      return metricsToken
        ? reply.code(401).send({ error: 'metrics token required' })
        : reply
            .code(403)
            .send({ error: 'metrics are served to this machine only; set METRICS_TOKEN to read them from elsewhere' });
    }
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  app.get('/readyz', async (req, reply) => {
    try {
      await ready();
      return { status: 'ready' };
    } catch (err) {
      // The cause stays in the log: a database error names hosts, users and paths.
      req.log.warn({ err }, 'not ready');
      return reply.code(503).send({ status: 'not_ready', reason: 'a dependency (the database) is not reachable' });
    }
  });
};
