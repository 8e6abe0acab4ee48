// An organisation's budgets page's routes (docs/console.md#api, docs/budgets.md#seeing-and-managing-them):
// list (as the role may see them: every budget, or those over the member's own requests), set,
// change, delete, raise a window and reset its spend. Each is one OrganisationService call as the
// session's member or the operator, registered under /org and /admin/organisations/:org as the
// other organisation routes are (organisation-routes.ts); the service decides who may and checks
// every value, so a body's fields are only checked here for their JSON type.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { access, RouteKit } from './kit.ts';
import type { OrgAsk } from './org-money.ts';
import { budgetRow } from './org-wire.ts';
import { invalid, jsonObject, type Unchecked } from './wire.ts';
import type { BudgetRequest, BudgetRow, RaiseRequest, ResetAnswer, ResetRequest } from './web/wire-types.ts';

/** Where an organisation's routes are (organisation-routes.ts's Scope). */
interface BudgetScope {
  prefix: string;
  access: ReturnType<typeof access>;
  ask: (req: FastifyRequest) => OrgAsk;
}

/** A string field of a body ('' when absent), at most `max` characters. */
function text(body: Record<string, unknown>, name: string, max = 1000): string {
  const v = body[name];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string' || v.length > max) throw invalid(name, `a string of at most ${max} characters`);
  return v;
}

/** A whole-number field (0 when absent). */
function count(body: Record<string, unknown>, name: string): number {
  const v = body[name] ?? 0;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalid(name, 'a whole number');
  return v;
}

/** BudgetRequest's fields as SetBudget's spec. */
function specOf(body: Unchecked<BudgetRequest>) {
  const b = body as Record<string, unknown>;
  const thresholds = b.thresholds ?? [];
  if (!Array.isArray(thresholds) || thresholds.length > 10 || !thresholds.every((t) => Number.isSafeInteger(t)))
    throw invalid('thresholds', 'up to 10 whole percentages');
  return {
    scope: text(b, 'scope', 20),
    scopeId: text(b, 'scope_id', 100),
    name: text(b, 'name', 200),
    amountUsd: text(b, 'amount_usd', 40),
    period: text(b, 'period', 20),
    timeZone: text(b, 'time_zone', 64),
    startDay: count(b, 'start_day'),
    rollingHours: count(b, 'rolling_hours'),
    mode: text(b, 'mode', 10),
    thresholds: thresholds as number[],
  };
}

const idOf = (req: FastifyRequest) => (req.params as { id: string }).id;

export function registerBudgets(app: FastifyInstance, kit: RouteKit, { prefix, access, ask }: BudgetScope): void {
  const { orgs } = kit;
  app.get(`${prefix}/budgets`, access, async (req): Promise<{ rows: BudgetRow[] }> => {
    const a = ask(req);
    const r = await orgs.listBudgets({ organisationId: a.organisationId }, a.as);
    return { rows: r.budgets.map(budgetRow) };
  });

  app.post(`${prefix}/budgets`, access, async (req): Promise<BudgetRow> => {
    const a = ask(req);
    const spec = specOf(jsonObject<BudgetRequest>(req.body));
    return budgetRow((await orgs.setBudget({ organisationId: a.organisationId, spec }, a.as)).budget!);
  });

  app.post(`${prefix}/budgets/:id/change`, access, async (req): Promise<BudgetRow> => {
    const a = ask(req);
    const spec = specOf(jsonObject<BudgetRequest>(req.body));
    const r = await orgs.setBudget({ organisationId: a.organisationId, budgetId: idOf(req), spec }, a.as);
    return budgetRow(r.budget!);
  });

  app.post(`${prefix}/budgets/:id/delete`, access, async (req): Promise<{ deleted: boolean }> => {
    const a = ask(req);
    return {
      deleted: (await orgs.deleteBudget({ organisationId: a.organisationId, budgetId: idOf(req) }, a.as)).deleted,
    };
  });

  app.post(`${prefix}/budgets/:id/raise`, access, async (req): Promise<BudgetRow> => {
    const body = jsonObject<RaiseRequest>(req.body) as Record<string, unknown>;
    const a = ask(req);
    const r = await orgs.raiseBudget(
      {
        organisationId: a.organisationId,
        budgetId: idOf(req),
        subject: text(body, 'subject', 300),
        raiseUsd: text(body, 'raise_usd', 40),
      },
      a.as,
    );
    return budgetRow(r.budget!);
  });

  app.post(`${prefix}/budgets/:id/reset`, access, async (req): Promise<ResetAnswer> => {
    const body = jsonObject<ResetRequest>(req.body) as Record<string, unknown>;
    const a = ask(req);
    const r = await orgs.resetBudgetSpend(
      { organisationId: a.organisationId, budgetId: idOf(req), subject: text(body, 'subject', 300) },
      a.as,
    );
    return { budget: budgetRow(r.budget!), forgiven_nano: r.forgivenNano.toString() };
  });
}
