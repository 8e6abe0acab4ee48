// OrganisationService's budget methods (docs/budgets.md#seeing-and-managing-them): owners and
// admins set, raise, reset and delete budgets; owners, admins and billing members see every budget,
// a member those over their own requests (and anyone, asking for them, only those). Every change is
// in the audit log with the budget or window before and after.
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import type { BudgetStateSchema, OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { badRequest } from '../errors/errors.ts';
import { checkBudget, periodColumns, usdField } from '../budgets/budget.ts';
import { deleteBudget, figuresOf, listBudgets, saveBudget, type BudgetFigures } from '../budgets/budget-store.ts';
import { raiseWindow, resetWindowSpend } from '../budgets/budget-window-changes.ts';
import { scopeNames } from '../budgets/scope-names.ts';
import { may } from '../organisations/roles.ts';
import { nanoToUsd } from '../money/money.ts';
import type { AccessChecks, OrganisationDeps } from './organisation-access.ts';

function stateOf(b: BudgetFigures, names?: Map<string, string>): MessageInitShape<typeof BudgetStateSchema> {
  const p = periodColumns(b.period);
  return {
    budgetId: b.id,
    spec: {
      scope: b.scope,
      scopeId: b.scopeId,
      name: b.name,
      amountUsd: nanoToUsd(b.amountNano),
      period: p.period,
      timeZone: p.timeZone,
      startDay: p.startDay,
      rollingHours: p.rollingHours,
      mode: b.mode,
      thresholds: b.thresholds,
    },
    amountNano: b.amountNano,
    windowStart: timestampFromDate(b.windowStart),
    ...(b.windowEnd ? { windowEnd: timestampFromDate(b.windowEnd) } : {}),
    spentNano: b.spentNano,
    heldNano: b.heldNano,
    remainingNano: b.remainingNano,
    raiseNano: b.raiseNano,
    forgivenNano: b.forgivenNano,
    subject: b.subject,
    scopeName: names?.get(b.scopeId) ?? '',
  };
}

const requireBudgetId = (id: string) => {
  if (!id) throw badRequest('budget_id is required', 'missing_required_parameter', 'budget_id');
};

/** A budget's state with its scope's name. */
async function namedState(db: OrganisationDeps['db'], b: BudgetFigures) {
  return stateOf(b, await scopeNames(db, b.accountId, [b]));
}

export function budgetMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<
  ServiceImpl<typeof OrganisationService>,
  'setBudget' | 'listBudgets' | 'deleteBudget' | 'raiseBudget' | 'resetBudgetSpend'
> {
  const { db } = deps;
  return {
    async setBudget(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.manage');
      if (!req.spec) throw badRequest('spec is required', 'missing_required_parameter', 'spec');
      const s = req.spec;
      const budget = checkBudget({
        scope: s.scope,
        scopeId: s.scopeId,
        name: s.name,
        amountUsd: s.amountUsd,
        period: s.period,
        timeZone: s.timeZone,
        startDay: s.startDay,
        rollingHours: s.rollingHours,
        mode: s.mode,
        thresholds: s.thresholds,
      });
      const id = await saveBudget(db, a.actor, a.accountId, budget, req.budgetId);
      deps.budgetsChanged?.(a.accountId);
      return {
        budget: await namedState(db, await figuresOf(db, { ...budget, id, accountId: a.accountId }, Date.now())),
      };
    },

    async listBudgets(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.read_own');
      // The operator makes no requests of its own: "mine" is every budget for them.
      const all = a.role === 'operator' || (may(a.role, 'budgets.read') && !req.applyingToMe);
      const list = await listBudgets(db, a.accountId, all ? undefined : { memberId: a.memberId });
      const names = await scopeNames(db, a.accountId, list);
      return { budgets: list.map((b) => stateOf(b, names)) };
    },

    async deleteBudget(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.manage');
      await deleteBudget(db, a.actor, a.accountId, req.budgetId);
      deps.budgetsChanged?.(a.accountId);
      return { deleted: true };
    },

    async raiseBudget(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.manage');
      requireBudgetId(req.budgetId);
      const raiseNano = usdField(req.raiseUsd, 'raise_usd');
      const target = { accountId: a.accountId, budgetId: req.budgetId, subject: req.subject };
      return { budget: await namedState(db, await raiseWindow(db, a.actor, target, raiseNano)) };
    },

    async resetBudgetSpend(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.manage');
      requireBudgetId(req.budgetId);
      const target = { accountId: a.accountId, budgetId: req.budgetId, subject: req.subject };
      const r = await resetWindowSpend(db, a.actor, target);
      return { budget: await namedState(db, r.figures), forgivenNano: r.forgivenNano };
    },
  };
}
