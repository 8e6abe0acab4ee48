// OrganisationService's budget methods (docs/budgets.md#seeing-and-managing-them): owners and
// admins set and delete budgets; owners, admins and billing members see every budget, a member
// those over their own requests. Every change is in the audit log with the budget before and after.
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import type { BudgetStateSchema, OrganisationService } from '../gen/gateway/v1/organisations_pb.js';
import { badRequest } from '../errors/errors.ts';
import { checkBudget, periodColumns } from '../budgets/budget.ts';
import { deleteBudget, figuresOf, listBudgets, saveBudget, type BudgetFigures } from '../budgets/budget-store.ts';
import { may } from '../organisations/roles.ts';
import { nanoToUsd } from '../money/money.ts';
import type { AccessChecks, OrganisationDeps } from './organisation-access.ts';

function stateOf(b: BudgetFigures): MessageInitShape<typeof BudgetStateSchema> {
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
  };
}

export function budgetMethods(
  deps: OrganisationDeps,
  c: AccessChecks,
): Pick<ServiceImpl<typeof OrganisationService>, 'setBudget' | 'listBudgets' | 'deleteBudget'> {
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
      return { budget: stateOf(await figuresOf(db, { ...budget, id, accountId: a.accountId }, Date.now())) };
    },

    async listBudgets(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.read_own');
      const all = a.role === 'operator' || may(a.role, 'budgets.read');
      const list = await listBudgets(db, a.accountId, all ? undefined : { memberId: a.memberId });
      return { budgets: list.map(stateOf) };
    },

    async deleteBudget(req, ctx) {
      const a = await c.access(ctx, req.organisationId, 'budgets.manage');
      await deleteBudget(db, a.actor, a.accountId, req.budgetId);
      deps.budgetsChanged?.(a.accountId);
      return { deleted: true };
    },
  };
}
