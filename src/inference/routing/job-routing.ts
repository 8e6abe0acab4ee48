// The router and passive health for work outside a request: a video job's create goes over its
// model's deployments as a request does (src/video/deployments.ts), admitted by the same health
// the inference routes feed, and feeding it in turn. The process hands it to the video worker
// (video and inference are one layer and do not import each other).
import type { ResolvedDeployment, ResolvedModel } from '../../catalogue/catalogue.ts';
import type { Metrics } from '../../log/metrics.ts';
import type { Attempt, DeploymentHealth } from './deployment-health.ts';
import type { Router } from './router.ts';

export class JobRouting {
  private readonly router: Router;
  private readonly health: DeploymentHealth;
  private readonly metrics: Metrics | undefined;

  constructor(router: Router, health: DeploymentHealth, metrics?: Metrics) {
    this.router = router;
    this.health = health;
    this.metrics = metrics;
  }

  /** The deployments to try, best first (a job has no token bounds: `cheapest` compares prices); none while every one cools for `account`. */
  order(model: ResolvedModel, requestId: string, account: string): readonly ResolvedDeployment[] {
    try {
      return this.router.order(model, { inputTokens: 0n, outputTokens: 0n }, requestId, account);
    } catch {
      return []; // deployments_cooling: the job's create is retried after a backoff
    }
  }

  /** As UpstreamCalls admits a request: a cooling deployment takes nothing, one past its cooldown one trial. */
  admit(model: ResolvedModel, d: ResolvedDeployment, account: string): Attempt | undefined {
    const admission = model.served.length > 1 ? this.health.admission(d.key, account) : 'open';
    if (admission === 'cooling') return undefined;
    const trial = admission === 'trial' ? this.health.claimTrial(d.key, account) : undefined;
    if (admission === 'trial' && !trial) return undefined;
    return { key: d.key, account, sentAt: this.health.now(), trial };
  }

  succeeded(d: ResolvedDeployment, a: Attempt, latencyMs: number): void {
    this.health.succeeded(a, latencyMs);
    this.metrics?.deploymentRequestsOf(d.key, d.provider.id, 'ok').inc();
  }

  failed(d: ResolvedDeployment, a: Attempt, reason: string, retryAfterMs?: number): void {
    this.health.failed(a, reason, retryAfterMs);
    this.metrics?.deploymentRequestsOf(d.key, d.provider.id, reason).inc();
  }
}
