// The steps every priced request takes before its upstream call, in one place: the bill policy's
// refusal, the hold (with the rate-limit admission), and the upstream body's rewrite (the model
// as the provider names it, a lowered output cap, the fields the policy sets). A route declares
// only what differs: its plan and policy, the fields that carry its output cap, and any rewrite
// of its own (BodyRewrite).
import type { BillPolicy, Refusal } from './bill-policy.ts';
import type { Metering } from './metering.ts';
import type { Held, Json, Plan } from './plan.ts';
import { gatewayError } from '../errors/errors.ts';

/** A policy refusal as the route's 400. */
export function refusal(r: Refusal) {
  return gatewayError({
    httpStatus: 400,
    type: 'invalid_request_error',
    code: r.code,
    param: r.param,
    message: r.message,
  });
}

/** Throws the policy's refusal, if it has one. */
export function refuseIfRefused(policy: BillPolicy): void {
  if (policy.refusal) throw refusal(policy.refusal);
}

/**
 * What goes upstream: the caller's bytes unless a field must change; then the body with the
 * changes, encoded once. A translated request (no caller's bytes to keep) is always encoded.
 */
export class BodyRewrite {
  private readonly body: Json;
  private readonly raw: Uint8Array | undefined;
  private out: Json | undefined;

  constructor(body: Json, raw?: Uint8Array) {
    this.body = body;
    this.raw = raw;
  }

  get(field: string): unknown {
    return (this.out ?? this.body)[field];
  }

  set(field: string, value: unknown): void {
    (this.out ??= { ...this.body })[field] = value;
  }

  delete(field: string): void {
    delete (this.out ??= { ...this.body })[field];
  }

  get changed(): boolean {
    return this.out !== undefined;
  }

  bytes(): string | Uint8Array {
    return this.out ? JSON.stringify(this.out) : (this.raw ?? JSON.stringify(this.body));
  }
}

export interface PricedRequest {
  plan: Plan;
  policy: BillPolicy;
  /** The upstream body being prepared (the caller's, or its translation). */
  upstream: BodyRewrite;
  /** The fields that carry the output cap upstream: a lowered cap is written into each. */
  capFields: readonly string[];
}

/** Refusal, hold, rewrite: the request is held and its upstream body owns what the gateway must own. */
export async function preparePriced(metering: Metering, r: PricedRequest): Promise<Held> {
  refuseIfRefused(r.policy);
  const held = await metering.hold(r.plan);
  const upstreamId = r.plan.model.upstreamId;
  if (r.upstream.get('model') !== upstreamId) r.upstream.set('model', upstreamId);
  if (held.loweredOutputCap !== undefined)
    for (const f of r.capFields) r.upstream.set(f, Number(held.loweredOutputCap));
  if (r.policy.set) for (const [k, v] of Object.entries(r.policy.set)) r.upstream.set(k, v);
  return held;
}
