// Prometheus metrics, one registry per gateway process.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: 'gateway_requests_total', help: 'HTTP requests by route, model and status', labelNames: ['route', 'model', 'status'] as const, registers: [this.registry] });
  readonly upstreamLatency = new Histogram({
    name: 'gateway_upstream_latency_seconds', help: 'Time to the upstream response headers', labelNames: ['provider', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers: [this.registry],
  });
  readonly addedLatency = new Histogram({
    name: 'gateway_added_latency_seconds', help: 'Gateway time before the upstream call (auth, parse, hold)', labelNames: ['route'] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1], registers: [this.registry],
  });
  readonly chargedNano = new Counter({ name: 'gateway_charged_nano_usd_total', help: 'Credits charged, nano-USD', labelNames: ['route', 'model'] as const, registers: [this.registry] });
  readonly holdsOpen = new Gauge({ name: 'gateway_holds_open', help: 'Holds placed by this process and not yet settled', registers: [this.registry] });
  readonly keyCacheLookups = new Counter({ name: 'gateway_key_cache_lookups_total', help: 'Key checks answered from memory (hit) or by the database (miss; off: the change listener is down). Keys with rate limits also take requests from their shared window, in grants', labelNames: ['result'] as const, registers: [this.registry] });
  readonly upstreamRetries = new Counter({ name: 'gateway_upstream_retries_total', help: 'Upstream attempts retried before the first byte', labelNames: ['provider', 'reason'] as const, registers: [this.registry] });

  // The per-request series, looked up by label values (in labelNames order) once and kept.
  readonly requestsOf = series(this.requests);
  readonly upstreamLatencyOf = series(this.upstreamLatency);
  readonly addedLatencyOf = series(this.addedLatency);
  readonly chargedNanoOf = series(this.chargedNano);
  readonly keyCacheLookupsOf = series(this.keyCacheLookups);

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'gateway_process_' });
  }
}

/** prom-client hashes a label object on every call; this finds a series by its values in one map lookup. */
function series<C>(metric: { labels(...values: string[]): C }): (...values: string[]) => C {
  const children = new Map<string, C>();
  return (...values) => {
    const key = values.join('\u0000');
    let child = children.get(key);
    if (!child) {
      child = metric.labels(...values);
      children.set(key, child);
    }
    return child;
  };
}
