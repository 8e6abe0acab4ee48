// `npm run cli -- budgets set|list|delete|raise|reset` (docs/budgets.md#seeing-and-managing-them):
// an organisation's budgets through OrganisationService as the operator. What a person types is
// checked here first, in the CLI's words (the flag that is wrong, exit 2), so a typo never reaches
// the gateway; the service checks it all again, as for any caller. `budgets set` prints the
// budget's id alone on stdout, so `BUDGET=$(npm run -s cli -- budgets set …)` works.
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { ConnectError } from '@connectrpc/connect';
import type { BudgetSpec, BudgetState } from '../gen/gateway/v1/organisations_pb.js';
import { SCOPES, usdField } from '../budgets/budget.ts';
import { isTimeZone } from '../budgets/windows.ts';
import { formatUsd } from '../money/format.ts';
import { need, result, table, type OrganisationCli } from './organisation-commands.ts';
import { isoSecond } from './usage-table.ts';

type Run = (cli: OrganisationCli, args: string[]) => Promise<void>;

const PERIODS = ['day', 'week', 'month', 'rolling', 'lifetime'];
const MODES = ['hard', 'soft'];

/** A USD amount typed as `what`, exactly as the service takes it, or a usage error saying what is wrong. */
function usd(cli: OrganisationCli, text: string | undefined, what: string): string {
  if (text === undefined) cli.usageError(`${what} is required (a USD amount such as 20 or 0.50)`);
  try {
    usdField(text, what);
  } catch (err) {
    if (err instanceof ConnectError) cli.usageError(err.rawMessage);
    throw err;
  }
  return text.trim();
}

/** A whole number of an option, from `min` to `max`, or undefined when not given. */
function whole(cli: OrganisationCli, flag: string, min: number, max: number): number | undefined {
  const v = (cli.options as Record<string, string | undefined>)[flag];
  if (v === undefined) return undefined;
  if (!/^\d{1,6}$/.test(v) || Number(v) < min || Number(v) > max)
    cli.usageError(`--${flag} must be a whole number from ${min} to ${max}; not ${JSON.stringify(v)}`);
  return Number(v);
}

function oneOf(cli: OrganisationCli, flag: string, allowed: readonly string[]): string | undefined {
  const v = (cli.options as Record<string, string | undefined>)[flag];
  if (v !== undefined && !allowed.includes(v))
    cli.usageError(
      `--${flag} must be ${allowed.slice(0, -1).join(', ')} or ${allowed.at(-1)}; not ${JSON.stringify(v)}`,
    );
  return v;
}

function thresholds(cli: OrganisationCli): number[] | undefined {
  const v = cli.options.thresholds;
  if (v === undefined) return undefined;
  if (!/^\d{1,4}(,\d{1,4}){0,9}$/.test(v))
    cli.usageError('--thresholds must be up to 10 whole percentages, comma-separated, such as 50,80,100');
  return v.split(',').map(Number);
}

/** The spec `budgets set` sends: the options given over `base` (the budget changed, or a new one's defaults). */
function specOf(cli: OrganisationCli, amountUsd: string, base: BudgetSpec | undefined) {
  const period = oneOf(cli, 'period', PERIODS) ?? base?.period;
  if (!period) cli.usageError(`budgets set needs --period ${PERIODS.join('|')}`);
  const timeZone = cli.options['time-zone'];
  if (timeZone !== undefined && !isTimeZone(timeZone))
    cli.usageError(
      `--time-zone must be an IANA time zone such as Europe/Berlin or UTC; not ${JSON.stringify(timeZone)}`,
    );
  return {
    scope: oneOf(cli, 'scope', SCOPES) ?? base?.scope ?? 'organisation',
    scopeId: cli.options['scope-id'] ?? base?.scopeId ?? '',
    name: cli.options.name ?? base?.name ?? '',
    amountUsd,
    period,
    timeZone: timeZone ?? base?.timeZone ?? 'UTC',
    startDay: whole(cli, 'start-day', 0, 28) ?? base?.startDay ?? 0,
    rollingHours: whole(cli, 'hours', 1, 8_784) ?? base?.rollingHours ?? 0,
    mode: oneOf(cli, 'mode', MODES) ?? base?.mode ?? 'hard',
    thresholds: thresholds(cli) ?? base?.thresholds ?? [],
  };
}

/** A budget's period in words: "day (UTC)", "month from the 1st (Europe/Berlin)", "rolling 24 h", "lifetime". */
export function periodText(s: BudgetSpec): string {
  switch (s.period) {
    case 'rolling':
      return `rolling ${s.rollingHours} h`;
    case 'lifetime':
      return 'lifetime';
    case 'week':
      return `week from ${['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][s.startDay]} (${s.timeZone})`;
    case 'month':
      return `month from day ${s.startDay} (${s.timeZone})`;
    default:
      return `day (${s.timeZone})`;
  }
}

/** Whom a budget is over: "organisation", "team Backend", "customers of key ci (prx-…)". */
const scopeText = (b: BudgetState) =>
  b.spec!.scope === 'organisation' ? 'organisation' : `${b.spec!.scope} ${b.scopeName || b.spec!.scopeId}`.trim();

/** When the window ends: a rolling budget's oldest hour drops out then; a lifetime budget's never does. */
const when = (b: BudgetState) =>
  !b.windowEnd
    ? 'never'
    : `${isoSecond(timestampDate(b.windowEnd))}${b.spec!.period === 'rolling' ? ' (oldest hour out)' : ''}`;

/** One budget's window in a line, for what raise and reset print. */
const windowLine = (b: BudgetState) =>
  `${b.budgetId}${b.subject ? ` (customer ${b.subject})` : ''}: spent ${formatUsd(b.spentNano)}, held ${formatUsd(b.heldNano)}, left ${formatUsd(b.remainingNano)} of ${formatUsd(b.amountNano + b.raiseNano)}; the window ends ${when(b)}`;

export const BUDGETS: Record<string, Run> = {
  async set(cli, args) {
    const [org, amount] = need(cli, args, ['organisation', 'usd'], 'budgets set');
    const amountUsd = usd(cli, amount, 'the amount');
    const changing = cli.options.budget ?? '';
    let base: BudgetSpec | undefined;
    if (changing) {
      const listed = await cli.orgs.listBudgets({ organisationId: org! });
      base = listed.budgets.find((b) => b.budgetId === changing)?.spec;
      if (!base) cli.usageError(`--budget ${changing} is no budget of ${org}: see budgets list ${org}`);
    }
    const spec = specOf(cli, amountUsd, base);
    const r = await cli.orgs.setBudget({ organisationId: org!, budgetId: changing, spec });
    const b = r.budget!;
    result(
      cli,
      b.budgetId,
      `${changing ? 'changed' : 'made'}: ${scopeText(b)}, ${periodText(b.spec!)}; ${windowLine(b)}`,
      b,
    );
  },
  async list(cli, args) {
    const [org] = need(cli, args, ['organisation'], 'budgets list');
    const r = await cli.orgs.listBudgets({ organisationId: org! });
    const money = (n: bigint) => (cli.options.csv ? String(n) : formatUsd(n));
    table(
      cli,
      r.budgets,
      [
        { header: 'budget id', align: 'left', cell: (b) => b.budgetId },
        { header: 'name', align: 'left', cell: (b) => b.spec!.name },
        { header: 'over', align: 'left', cell: scopeText },
        { header: 'period', align: 'left', cell: (b) => periodText(b.spec!) },
        { header: 'mode', align: 'left', cell: (b) => b.spec!.mode },
        { header: 'amount', align: 'point', cell: (b) => money(b.amountNano) },
        { header: 'raise', align: 'point', cell: (b) => money(b.raiseNano) },
        { header: 'spent', align: 'point', cell: (b) => money(b.spentNano) },
        { header: 'held', align: 'point', cell: (b) => money(b.heldNano) },
        { header: 'left', align: 'point', cell: (b) => money(b.remainingNano) },
        { header: 'resets', align: 'left', cell: when },
      ],
      r.budgets,
    );
  },
  async delete(cli, args) {
    const [org, budget] = need(cli, args, ['organisation', 'budget'], 'budgets delete');
    await cli.orgs.deleteBudget({ organisationId: org!, budgetId: budget! });
    cli.out('deleted', { deleted: true });
  },
  async raise(cli, args) {
    const [org, budget, amount] = need(cli, args, ['organisation', 'budget', 'usd'], 'budgets raise');
    const raiseUsd = usd(cli, amount, 'the raise');
    const r = await cli.orgs.raiseBudget({
      organisationId: org!,
      budgetId: budget!,
      subject: cli.options.customer ?? '',
      raiseUsd,
    });
    cli.out(`raised by ${formatUsd(r.budget!.raiseNano)} until the window ends: ${windowLine(r.budget!)}`, r.budget);
  },
  async reset(cli, args) {
    const [org, budget] = need(cli, args, ['organisation', 'budget'], 'budgets reset');
    const r = await cli.orgs.resetBudgetSpend({
      organisationId: org!,
      budgetId: budget!,
      subject: cli.options.customer ?? '',
    });
    cli.out(`forgave ${formatUsd(r.forgivenNano)} spent in this window: ${windowLine(r.budget!)}`, r);
  },
};
