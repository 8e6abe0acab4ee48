// The money on a request's trace (docs/observability.md): a span for the hold and one for the
// settle, and on the request's own span (its RPC's) what a disputed charge needs: the charge and
// the provider cost in nano-USD, the price and markup versions, the hold, the billing mode, the
// request id, the account and key as opaque ids, the deployment that answered. The upstream
// attempt that answered is ended here too, with the usage it was billed for. Nothing of a key,
// a prompt or an answer.
import { toGatewayError } from '../errors/errors.ts';
import {
  activeSpan,
  contextWith,
  failSpan,
  nanoAttribute,
  NO_SPAN,
  type Span,
  SpanKind,
  startSpan,
  tracingOn,
} from '../tracing/spans.ts';
import type { ChargeInfo, Plan } from './plan.ts';

/** The hold's span, under the request's; the request's span is remembered for the settle. */
export function startHoldSpan(plan: Plan): Span {
  if (!tracingOn()) return NO_SPAN;
  const request = activeSpan();
  (plan.meter ??= {}).span = request;
  if (request.isRecording())
    request.setAttributes({
      'gateway.request_id': plan.requestId,
      'gateway.route': plan.route,
      'gateway.account.id': plan.caller.accountId,
      'gateway.key.id': plan.caller.keyId,
      'gen_ai.request.model': plan.model.id,
    });
  return startSpan('gateway.hold', SpanKind.INTERNAL, { 'gateway.request_id': plan.requestId });
}

/** Ends the hold's span: what it reserved and how, or why it was refused (401, 402, 409, 429). */
export function endHoldSpan(
  span: Span,
  plan: Plan,
  held: { amountNano: bigint; loweredOutputCap?: bigint } | undefined,
  err?: unknown,
): void {
  if (!span.isRecording()) return;
  if (held) {
    const mode = plan.meter?.lease ? 'lease' : 'hold';
    plan.meter!.heldNano = held.amountNano;
    span.setAttributes({
      'gateway.hold_nano': nanoAttribute(held.amountNano),
      'gateway.billing_mode': mode,
      ...(held.loweredOutputCap !== undefined ? { 'gateway.lowered_output_cap': Number(held.loweredOutputCap) } : {}),
    });
  } else if (err !== undefined) {
    const e = toGatewayError(err);
    failSpan(span, e.code || String(e.httpStatus), e.message);
    span.setAttribute('http.response.status_code', e.httpStatus);
  }
  span.end();
}

/** The settle's span, under the request's. */
export function startSettleSpan(plan: Plan): Span {
  const request = plan.meter?.span;
  if (!request?.isRecording()) return NO_SPAN;
  return startSpan('gateway.settle', SpanKind.INTERNAL, { 'gateway.request_id': plan.requestId }, contextWith(request));
}

/** What the settle wrote, on its span and the request's; the answering attempt ended with its usage. */
export function endSettleSpan(
  span: Span,
  plan: Plan,
  facts: {
    charge: ChargeInfo;
    providerCostNano: bigint;
    priceVersion: bigint;
    markupVersion: bigint;
    status: string;
    billingMode: 'lease' | 'hold';
  },
): void {
  const request = plan.meter?.span;
  if (!request?.isRecording() && !plan.answerSpan) return; // tracing off, or the request not sampled
  const usage = facts.charge.usage;
  const money = {
    'gateway.charge_nano': nanoAttribute(facts.charge.costNano),
    'gateway.provider_cost_nano': nanoAttribute(facts.providerCostNano),
    'gateway.price_version': Number(facts.priceVersion),
    'gateway.markup_version': Number(facts.markupVersion),
    'gateway.outcome': facts.status,
    'gateway.usage_estimated': usage.estimated,
    ...(facts.charge.deployment ? { 'gateway.deployment': facts.charge.deployment } : {}),
  };
  if (span.isRecording()) {
    span.setAttributes(money);
    span.end();
  }
  if (request?.isRecording()) {
    request.setAttributes({
      ...money,
      'gateway.hold_nano': nanoAttribute(plan.meter?.heldNano ?? 0n),
      'gateway.billing_mode': facts.billingMode,
      'gen_ai.usage.input_tokens': Number(usage.inputTokens),
      'gen_ai.usage.output_tokens': Number(usage.outputTokens),
    });
  }
  const answer = plan.answerSpan;
  if (answer?.isRecording()) {
    answer.setAttributes({
      'gen_ai.usage.input_tokens': Number(usage.inputTokens),
      'gen_ai.usage.output_tokens': Number(usage.outputTokens),
      ...(usage.cachedTokens > 0n ? { 'gen_ai.usage.cache_read.input_tokens': Number(usage.cachedTokens) } : {}),
      ...(usage.cacheWriteTokens > 0n
        ? { 'gen_ai.usage.cache_creation.input_tokens': Number(usage.cacheWriteTokens) }
        : {}),
    });
    answer.end();
  }
}

/** A video job's hold, on the span in force (its CreateVideo RPC's): the job settles later, in its workflow. */
export function noteJobHold(requestId: string, accountId: string, heldNano: bigint): void {
  const span = activeSpan();
  if (!span.isRecording()) return;
  span.setAttributes({
    'gateway.request_id': requestId,
    'gateway.account.id': accountId,
    'gateway.hold_nano': nanoAttribute(heldNano),
    'gateway.billing_mode': 'hold',
  });
}

/** A video job's charge, on the span in force (its settle activity's, in the job's trace). */
export function noteJobCharge(facts: {
  requestId: string;
  chargedNano: bigint;
  providerCostNano: bigint;
  priceVersion?: bigint;
  markupVersion: bigint;
}): void {
  const span = activeSpan();
  if (!span.isRecording()) return;
  span.setAttributes({
    'gateway.request_id': facts.requestId,
    'gateway.charge_nano': nanoAttribute(facts.chargedNano),
    'gateway.provider_cost_nano': nanoAttribute(facts.providerCostNano),
    'gateway.price_version': Number(facts.priceVersion ?? 0n),
    'gateway.markup_version': Number(facts.markupVersion),
    'gateway.outcome': 'ok',
  });
}
