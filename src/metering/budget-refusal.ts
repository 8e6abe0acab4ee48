// The refusal of a request that a budget stands in the way of (docs/budgets.md#refusals): 402
// budget_exceeded in the route's own error shape, naming the scope and the budget, what is left of
// its window and when the window resets, so a caller's retry logic can tell it from the 429 of too
// many requests in flight (wait and retry) and from the balance's 402 (top up).
import type { BudgetShortfall } from '../billing/budget-holds.ts';
import { gatewayError } from '../errors/errors.ts';
import { nanoToUsd } from '../money/money.ts';

/** How a budget's scope is named to its caller. */
function scopeName(w: BudgetShortfall['window']): string {
  switch (w.scope) {
    case 'organisation':
      return "the organisation's";
    case 'customer':
      return `end customer '${w.subject}''s`;
    default:
      return `the ${w.scope}'s (${w.scopeId})`;
  }
}

export function budgetExceeded(short: BudgetShortfall, needNano: bigint, requestId: string) {
  const w = short.window;
  const resets = Number.isFinite(w.windowEnd)
    ? `; it resets at ${new Date(w.windowEnd).toISOString()}`
    : ' (a lifetime budget)';
  const name = w.name ? ` '${w.name}'` : '';
  const retry = Number.isFinite(w.windowEnd) ? Math.max(1, Math.ceil((w.windowEnd - Date.now()) / 1000)) : 0;
  return gatewayError({
    httpStatus: 402,
    type: 'insufficient_quota',
    code: 'budget_exceeded',
    message: `Budget exceeded: ${scopeName(w)} budget${name} (${w.budgetId}) has $${nanoToUsd(short.roomNano)} left of $${nanoToUsd(w.amountNano)} in this window, and this request needs at least $${nanoToUsd(needNano)}${resets}.`,
    retryAfterSeconds: retry,
    requestId,
    budget: {
      budgetId: w.budgetId,
      scope: w.scope,
      scopeId: w.scopeId,
      name: w.name,
      customer: w.scope === 'customer' ? w.subject : '',
      amountNano: w.amountNano,
      remainingNano: short.roomNano,
      resetsAtUnix: Number.isFinite(w.windowEnd) ? BigInt(Math.floor(w.windowEnd / 1000)) : 0n,
    },
  });
}
