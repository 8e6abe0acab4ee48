// The request log as CSV (docs/console.md#api, docs/rpc.md#the-operator-cli): a key holder's
// columns, and the operator's, which add the deployment, the attempts, the provider's cost and
// the margin after them (so a script that reads a holder's columns by position reads the
// operator's too). The console's downloads and the CLI's `keys usage --csv` write these lines.
import type { UsageRecord } from '../gen/gateway/v1/billing_pb.js';
import { nanoToUsd } from '../money/money.ts';
import { attemptsText } from './attempts.ts';

export const USAGE_CSV_HEADER =
  'created_at,request_id,route,model,requested_model,input_tokens,output_tokens,cached_tokens,cost_nano,cost_usd,status,http_status,latency_ms,key_prefix\n';

export const OPERATOR_USAGE_CSV_HEADER = `${USAGE_CSV_HEADER.trimEnd()},deployment,attempts,provider_cost_nano,provider_cost_usd,margin_nano,margin_usd,trace_id\n`;

/** A CSV field: quoted when it must be, and text a spreadsheet would run as a formula made inert. */
export function csvText(s: string): string {
  const inert = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return /[",\n\r]/.test(inert) ? `"${inert.replace(/"/g, '""')}"` : inert;
}

/** ISO 8601 to the millisecond, the rest cut off (a time is never shown later than it was). */
function isoOf(r: UsageRecord): string {
  const t = r.createdAt;
  return t ? new Date(Number(t.seconds) * 1000 + Math.floor(t.nanos / 1_000_000)).toISOString() : '';
}

/** A key holder's columns of a row, without the line's end. */
function holderFields(r: UsageRecord): (string | bigint | number)[] {
  return [
    isoOf(r),
    csvText(r.requestId),
    csvText(r.route),
    csvText(r.model),
    csvText(r.requestedModel),
    r.inputTokens,
    r.outputTokens,
    r.cachedTokens,
    r.costNano,
    nanoToUsd(r.costNano),
    csvText(r.status),
    r.httpStatus,
    r.latencyMs,
    csvText(r.keyPrefix),
  ];
}

/** A row as a key holder's export has it (USAGE_CSV_HEADER). */
export const usageCsvLine = (r: UsageRecord): string => `${holderFields(r).join(',')}\n`;

/** A row as the operator's export has it (OPERATOR_USAGE_CSV_HEADER): the attempts as the usage row keeps them. */
export function operatorUsageCsvLine(r: UsageRecord): string {
  return `${[
    ...holderFields(r),
    csvText(r.deployment),
    csvText(attemptsText(r.attempts, r.attemptsOmitted)),
    r.providerCostNano,
    nanoToUsd(r.providerCostNano),
    r.marginNano,
    nanoToUsd(r.marginNano),
    csvText(r.traceId),
  ].join(',')}\n`;
}
