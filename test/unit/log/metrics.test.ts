import { describe, expect, it } from 'vitest';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { FastCounter, FastGauge, FastHistogram, Metrics } from '../../../src/log/metrics.ts';

// The per-request metrics are counted in plain numbers; what /metrics shows must be exactly what
// prom-client's own metrics would show for the same events.
describe('metrics', () => {
  it('the fast counter, gauge and histogram write what prom-client writes for the same events', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const bounds = [0.001, 0.01, 0.1, 1];
    const c = new FastCounter(ours, 'x_total', 'a counter', ['route', 'status']);
    const pc = new Counter({
      name: 'x_total',
      help: 'a counter',
      labelNames: ['route', 'status'],
      registers: [theirs],
    });
    const h = new FastHistogram(ours, 'lat_seconds', 'a histogram', ['route'], bounds);
    const ph = new Histogram({
      name: 'lat_seconds',
      help: 'a histogram',
      labelNames: ['route'],
      buckets: bounds,
      registers: [theirs],
    });
    const g = new FastGauge(ours, 'open', 'a gauge');
    const pg = new Gauge({ name: 'open', help: 'a gauge', registers: [theirs] });

    const events: [string, string, number][] = [
      ['/v1/a', '200', 0.0005],
      ['/v1/a', '200', 0.01],
      ['/v1/b', '429', 0.5],
      ['/v1/a', '500', 7],
      ['/v1/b', '429', 0.1],
    ];
    for (const [route, status, v] of events) {
      c.of(route, status).inc();
      pc.labels(route, status).inc();
      c.of(route, status).inc(3);
      pc.labels(route, status).inc(3);
      h.of(route).observe(v);
      ph.labels(route).observe(v);
      g.inc();
      pg.inc();
    }
    g.dec(2);
    pg.dec(2);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(g.value).toBe(3);
  });

  it('refuses what prom-client refuses: a counter going down, a non-finite observation, the wrong number of labels', () => {
    const r = new Registry();
    const c = new FastCounter(r, 'y_total', 'y', ['a']);
    const h = new FastHistogram(r, 'h_seconds', 'h', ['a'], [1]);
    expect(() => c.of('x').inc(-1)).toThrow();
    expect(() => h.of('x').observe(Number.NaN)).toThrow();
    expect(() => c.of('x', 'y')).toThrow();
  });

  it('the gateway registry lists every metric it had before, with the process metrics', async () => {
    const m = new Metrics();
    m.requestsOf('/v1/chat/completions', 'gpt-4o-mini', '200').inc();
    m.upstreamLatencyOf('openai', '200').observe(0.02);
    m.addedLatencyOf('/v1/chat/completions').observe(0.0003);
    m.chargedNanoOf('/v1/chat/completions', 'gpt-4o-mini').inc(11550);
    m.keyCacheLookupsOf('hit').inc();
    m.holdsOpen.inc();
    m.upstreamRetries.inc({ provider: 'openai', reason: '429' });
    const text = await m.registry.metrics();
    expect(text).toContain('gateway_requests_total{route="/v1/chat/completions",model="gpt-4o-mini",status="200"} 1');
    expect(text).toContain('gateway_upstream_latency_seconds_bucket{le="0.025",provider="openai",status="200"} 1');
    expect(text).toContain('gateway_upstream_latency_seconds_bucket{le="0.01",provider="openai",status="200"} 0');
    expect(text).toContain('gateway_added_latency_seconds_bucket{le="0.0005",route="/v1/chat/completions"} 1');
    expect(text).toContain('gateway_charged_nano_usd_total{route="/v1/chat/completions",model="gpt-4o-mini"} 11550');
    expect(text).toContain('gateway_key_cache_lookups_total{result="hit"} 1');
    expect(text).toContain('gateway_holds_open 1');
    expect(text).toContain('gateway_upstream_retries_total{provider="openai",reason="429"} 1');
    expect(text).toMatch(/^gateway_process_process_cpu_user_seconds_total \d/m);
  });
});
