// Prometheus metrics, one registry per gateway process.
//
// The metrics counted on every request (requests, latencies, charges, key cache lookups, open
// holds) are plain numbers in memory: one addition per event, read by the registry only when
// /metrics is scraped. prom-client's own metric objects validate and hash their labels on every
// call, a measurable cost on every request (docs/benchmark.md). The rarer ones (upstream retries)
// and the process metrics stay prom-client's; the exposition format is the same for all.
import { Counter, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { exportCounts } from '../tracing/tracing.ts';

export class Metrics {
  readonly registry = new Registry();
  readonly requests = new FastCounter(
    this.registry,
    'gateway_requests_total',
    'HTTP requests by route, model and status',
    ['route', 'model', 'status'],
  );
  readonly upstreamLatency = new FastHistogram(
    this.registry,
    'gateway_upstream_latency_seconds',
    'Time to the upstream response headers',
    ['provider', 'status'],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  );
  readonly addedLatency = new FastHistogram(
    this.registry,
    'gateway_added_latency_seconds',
    'Gateway time before the upstream call (auth, parse, hold)',
    ['route'],
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
  );
  readonly chargedNano = new FastCounter(this.registry, 'gateway_charged_nano_usd_total', 'Credits charged, nano-USD', [
    'route',
    'model',
  ]);
  readonly holdsOpen = new FastGauge(
    this.registry,
    'gateway_holds_open',
    'Holds placed by this process and not yet settled',
  );
  readonly keyCacheLookups = new FastCounter(
    this.registry,
    'gateway_key_cache_lookups_total',
    'Key checks answered from memory (hit) or by the database (miss; off: the change listener is down). Keys with rate limits also take requests from their shared window, in grants',
    ['result'],
  );
  readonly upstreamRetries = new Counter({
    name: 'gateway_upstream_retries_total',
    help: 'Upstream attempts retried before the first byte',
    labelNames: ['provider', 'reason'] as const,
    registers: [this.registry],
  });

  // The per-request series, found by their label values (in labelNames order).
  readonly requestsOf = (route: string, model: string, status: string) => this.requests.of(route, model, status);
  readonly deploymentRequests = new FastCounter(
    this.registry,
    'gateway_deployment_requests_total',
    'Upstream attempts by deployment (model/deployment) and how each ended: ok, 429, 5xx status, timeout, connection',
    ['deployment', 'provider', 'outcome'],
  );
  readonly deploymentLatency = new FastHistogram(
    this.registry,
    'gateway_deployment_latency_seconds',
    'Time to the upstream response headers, by deployment',
    ['deployment'],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  );
  readonly deploymentCooldowns = new FastCounter(
    this.registry,
    'gateway_deployment_cooldowns_total',
    'Times a deployment was cooled down for everyone after failures or a retry-after',
    ['deployment'],
  );
  readonly deploymentAccountCooldowns = new FastCounter(
    this.registry,
    'gateway_deployment_account_cooldowns_total',
    'Times a deployment was cooled down for one account alone, whose requests failed there while other accounts were served',
    ['deployment'],
  );
  readonly deploymentLimitWaits = new FastCounter(
    this.registry,
    'gateway_deployment_limit_waits_total',
    'Requests a deployment could not take because its rpm / tpm for the minute was used (they went to another deployment, or got a 503)',
    ['deployment'],
  );
  readonly concurrencyRefusals = new FastCounter(
    this.registry,
    'gateway_concurrency_refusals_total',
    'Requests refused 429 by a bound on requests in flight: key_concurrency_limit, account_concurrency_limit, deployment_share_limit',
    ['bound'],
  );
  readonly budgetAlerts = new FastCounter(
    this.registry,
    'gateway_budget_alerts_total',
    'Budget alerts fired: a window of a budget reached one of its thresholds (once per window and threshold)',
    ['scope', 'threshold'],
  );
  readonly streamStalls = new FastCounter(
    this.registry,
    'gateway_stream_stalls_total',
    'Streams cut because their client took in nothing for STREAM_STALL_TIMEOUT_MS',
    [],
  );
  readonly upstreamLatencyOf = (provider: string, status: string) => this.upstreamLatency.of(provider, status);
  readonly deploymentRequestsOf = (deployment: string, provider: string, outcome: string) =>
    this.deploymentRequests.of(deployment, provider, outcome);
  readonly deploymentLatencyOf = (deployment: string) => this.deploymentLatency.of(deployment);
  readonly addedLatencyOf = (route: string) => this.addedLatency.of(route);
  readonly chargedNanoOf = (route: string, model: string) => this.chargedNano.of(route, model);
  readonly keyCacheLookupsOf = (result: string) => this.keyCacheLookups.of(result);

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'gateway_process_' });
    // The trace export queue's counts (src/tracing/export-queue.ts), read when /metrics is written.
    new Counter({
      name: 'gateway_trace_spans_exported_total',
      help: 'Spans exported to the OTLP collector',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(exportCounts().exported);
      },
    });
    new Counter({
      name: 'gateway_trace_spans_dropped_total',
      help: 'Spans not exported: the export queue was full (a slow collector), or their export failed (a collector down)',
      labelNames: ['reason'] as const,
      registers: [this.registry],
      collect() {
        const c = exportCounts();
        this.reset();
        this.inc({ reason: 'queue_full' }, c.droppedQueueFull);
        this.inc({ reason: 'export_failed' }, c.droppedExportFailed);
      },
    });
  }
}

type Labels = Record<string, string>;
type Value = { labels: Labels; value: number; metricName?: string };

/** What prom-client's registry reads from a metric when it writes /metrics. */
abstract class FastMetric<S> {
  private readonly series = new Map<string, S>();
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  abstract readonly type: 'counter' | 'gauge' | 'histogram';
  readonly aggregator = 'sum';

  constructor(registry: Registry, name: string, help: string, labelNames: readonly string[]) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    registry.registerMetric(this as unknown as Metric);
  }

  protected abstract create(labels: Labels): S;
  protected abstract values(s: S): Value[];

  /** The series with these label values, in labelNames order (one map lookup once it exists). */
  protected find(values: string[]): S {
    const key = values.length === 1 ? values[0]! : values.join('\u0000');
    let s = this.series.get(key);
    if (!s) {
      if (values.length !== this.labelNames.length)
        throw new Error(`${this.name} takes ${this.labelNames.length} labels`);
      s = this.create(Object.fromEntries(this.labelNames.map((n, i) => [n, values[i]!])));
      this.series.set(key, s);
    }
    return s;
  }

  async get() {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: [...this.series.values()].flatMap((s) => this.values(s)),
    };
  }

  reset(): void {
    this.series.clear();
  }
}

interface CounterSeries {
  labels: Labels;
  value: number;
  inc(n?: number): void;
}

export class FastCounter extends FastMetric<CounterSeries> {
  readonly type = 'counter';

  of(...values: string[]): CounterSeries {
    return this.find(values);
  }

  protected create(labels: Labels): CounterSeries {
    return {
      labels,
      value: 0,
      inc(n = 1) {
        if (!(n >= 0)) throw new Error('a counter only goes up');
        this.value += n;
      },
    };
  }

  protected values(s: CounterSeries): Value[] {
    return [{ labels: s.labels, value: s.value }];
  }
}

interface GaugeSeries {
  labels: Labels;
  value: number;
}

/** A gauge without labels. */
export class FastGauge extends FastMetric<GaugeSeries> {
  readonly type = 'gauge';
  private readonly only: GaugeSeries;

  constructor(registry: Registry, name: string, help: string) {
    super(registry, name, help, []);
    this.only = this.find([]);
  }

  inc(n = 1): void {
    this.only.value += n;
  }

  dec(n = 1): void {
    this.only.value -= n;
  }

  get value(): number {
    return this.only.value;
  }

  protected create(labels: Labels): GaugeSeries {
    return { labels, value: 0 };
  }

  protected values(s: GaugeSeries): Value[] {
    return [{ labels: s.labels, value: s.value }];
  }

  override reset(): void {
    this.only.value = 0;
  }
}

interface HistogramSeries {
  labels: Labels;
  counts: Float64Array;
  sum: number;
  count: number;
  observe(v: number): void;
}

export class FastHistogram extends FastMetric<HistogramSeries> {
  readonly type = 'histogram';
  private readonly bounds: readonly number[];

  constructor(
    registry: Registry,
    name: string,
    help: string,
    labelNames: readonly string[],
    bounds: readonly number[],
  ) {
    super(registry, name, help, labelNames);
    this.bounds = [...bounds].sort((a, b) => a - b);
  }

  of(...values: string[]): HistogramSeries {
    return this.find(values);
  }

  protected create(labels: Labels): HistogramSeries {
    const bounds = this.bounds;
    return {
      labels,
      counts: new Float64Array(bounds.length),
      sum: 0,
      count: 0,
      observe(v: number) {
        if (!Number.isFinite(v)) throw new TypeError(`not a finite number: ${v}`);
        let i = 0;
        while (i < bounds.length && v > bounds[i]!) i++;
        if (i < bounds.length) this.counts[i]!++;
        this.sum += v;
        this.count++;
      },
    };
  }

  protected values(s: HistogramSeries): Value[] {
    const out: Value[] = [];
    let acc = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      acc += s.counts[i]!;
      out.push({ labels: { le: String(this.bounds[i]), ...s.labels }, value: acc, metricName: `${this.name}_bucket` });
    }
    out.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${this.name}_bucket` });
    out.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
    out.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` });
    return out;
  }
}
