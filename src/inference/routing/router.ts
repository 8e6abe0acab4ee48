// Which deployment serves a request, and in what order the others are tried when it fails before
// the caller got anything (docs/providers.md#routing). Per model a strategy: `weighted` (weighted
// random within the first priority that has a deployment able to serve), `cheapest` (lowest
// provider cost for this request), `fastest` (lowest recent time to first byte); a deployment the
// book drains comes after all the others, whatever the strategy. A deployment that
// is cooling down takes nothing; one whose cooldown is over takes one trial request. Health is
// judged for the caller's account: a deployment cooling for that account alone takes nothing of it.
import type { ResolvedDeployment, ResolvedModel } from '../../catalogue/catalogue.ts';
import { usageCostParts } from '../../billing/pricing.ts';
import { costRational } from '../../money/money.ts';
import { unavailable } from '../../errors/errors.ts';
import type { DeploymentHealth } from './deployment-health.ts';

/** What the request may be priced by when the router compares costs: its bounds. */
export interface RequestShape {
  inputTokens: bigint;
  outputTokens: bigint;
}

export class Router {
  private readonly health: DeploymentHealth;
  private readonly random: () => number;

  constructor(health: DeploymentHealth, random: () => number = Math.random) {
    this.health = health;
    this.random = random;
  }

  /**
   * The deployments to try, best first. A model on one deployment always gets it (health only
   * reorders; nothing cools a model down to nothing). When every deployment is cooling for the
   * caller's `account`: the 503 it gets, with retry-after at the soonest one back.
   */
  order(model: ResolvedModel, shape: RequestShape, requestId: string, account: string): readonly ResolvedDeployment[] {
    const all = model.served;
    if (all.length <= 1) return all;
    const able = all.filter((d) => this.health.admission(d.key, account) !== 'cooling');
    if (able.length === 0) {
      const now = this.health.now();
      const soonest = Math.min(...all.map((d) => this.health.coolingUntil(d.key, account) || now + 1000));
      throw unavailable(
        'deployments_cooling',
        `Every deployment of '${model.id}' is cooling down after failures; try again shortly.`,
        { requestId, retryAfterSeconds: Math.max(1, Math.ceil((soonest - now) / 1000)) },
      );
    }
    return drainingLast(this.byStrategy(model, able, shape));
  }

  private byStrategy(model: ResolvedModel, able: ResolvedDeployment[], shape: RequestShape): ResolvedDeployment[] {
    switch (model.strategy) {
      case 'cheapest':
        return this.byScore(able, (d) => costScore(model, d, shape));
      case 'fastest':
        // Never measured counts as fastest: each deployment gets measured.
        return this.byScore(able, (d) => this.health.latencyOf(d.key) ?? 0);
      default:
        return this.weighted(able);
    }
  }

  /** Priorities in turn (0 first); within one, a weighted random order, weight-0 deployments last. */
  private weighted(list: ResolvedDeployment[]): ResolvedDeployment[] {
    const priorities = [...new Set(list.map((d) => d.priority))].sort((a, b) => a - b);
    return priorities.flatMap((p) => this.weightedOrder(list.filter((d) => d.priority === p)));
  }

  private weightedOrder(group: ResolvedDeployment[]): ResolvedDeployment[] {
    const left = group.filter((d) => d.weight > 0);
    const out: ResolvedDeployment[] = [];
    while (left.length > 0) {
      let total = 0;
      for (const d of left) total += d.weight;
      let r = this.random() * total;
      let i = 0;
      while (i < left.length - 1 && r >= left[i]!.weight) r -= left[i++]!.weight;
      out.push(left.splice(i, 1)[0]!);
    }
    return [...out, ...group.filter((d) => d.weight <= 0)];
  }

  /** Lowest score first; equal scores in the weighted order. */
  private byScore<T extends number | bigint>(list: ResolvedDeployment[], score: (d: ResolvedDeployment) => T) {
    const scored = this.weighted(list).map((d, i) => ({ d, s: score(d), i }));
    scored.sort((a, b) => (a.s < b.s ? -1 : a.s > b.s ? 1 : a.i - b.i));
    return scored.map((x) => x.d);
  }
}

/** A draining deployment is the last resort: its traffic moves off it, and no request is turned away for it. */
function drainingLast(order: ResolvedDeployment[]): ResolvedDeployment[] {
  return order.some((d) => d.draining)
    ? [...order.filter((d) => !d.draining), ...order.filter((d) => d.draining)]
    : order;
}

/**
 * What the deployment would cost the operator for this request at its bounds, in nano-USD
 * (truncated: only the order matters). Kinds not priced by tokens compare their price maps' sums.
 */
function costScore(model: ResolvedModel, d: ResolvedDeployment, shape: RequestShape): bigint {
  const usage = {
    inputTokens: shape.inputTokens,
    outputTokens: shape.outputTokens,
    cachedTokens: 0n,
    cacheWriteTokens: 0n,
  };
  const tokens = costRational(usageCostParts({ ...model, prices: { ...d.providerPrices } }, usage));
  const exact =
    tokens.num > 0n
      ? tokens
      : costRational(Object.values(d.providerPrices).map((priceUsd) => ({ quantity: 1n, priceUsd, perUnits: 1n })));
  return exact.num / exact.den;
}
