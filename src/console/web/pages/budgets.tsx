// An organisation's budgets (docs/budgets.md): each with a bar of its current window (spent, held,
// left) and when the window resets. Owners and admins make, change and delete budgets, raise a
// window until it ends and reset what was spent in it; billing members see every budget, a member
// those over their own requests (theirs, their keys', their teams', the organisation's), read-only.
// What is offered follows the session's allowed actions; the service refuses the rest.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Badge, Card, Empty, ErrorNote, Loading, Note, Table } from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { big, time, usd } from '../format.ts';
import type { OrgPlace } from '../org.ts';
import type { Location } from '../router.ts';
import type { BudgetRow } from '../wire-types.ts';
import { BudgetForm, periodText, WindowChange, type WindowChangeKind } from './budget-dialogs.tsx';

export const budgetsData = (_loc: Location) => [api.budgets('own')];

type Change = { kind: 'new' } | { kind: 'edit' | WindowChangeKind; budget: BudgetRow };

export function Budgets(props: { place: OrgPlace }) {
  const { place } = props;
  const list = useApi(api.budgets(place.scope));
  const [change, setChange] = useState<Change | undefined>();
  const [done, setDone] = useState<string | undefined>();
  const manage = place.can('budgets.manage');
  const finished = (message: string) => {
    setChange(undefined);
    setDone(message);
    list.reload();
  };
  const rows = list.data?.rows;
  return (
    <Card
      title={place.can('budgets.read') ? 'Budgets' : 'Budgets over your requests'}
      id="budgets"
      actions={
        manage ? (
          <button
            type="button"
            class="button button-primary"
            onClick={() => (setDone(undefined), setChange({ kind: 'new' }))}
          >
            New budget…
          </button>
        ) : null
      }
    >
      <p class="muted small">
        A request is refused (402 budget_exceeded) before it goes upstream when a hard budget over it has no room left;
        a soft budget only counts. Each window starts with nothing spent.
      </p>
      {done ? <Note kind="ok">{done}</Note> : null}
      {list.error ? <ErrorNote error={list.error} /> : null}
      {list.loading && !rows ? <Loading /> : null}
      {rows && rows.length === 0 ? (
        <Empty>No budget {place.can('budgets.read') ? 'yet' : 'applies to you'}.</Empty>
      ) : null}
      {rows && rows.length > 0 ? (
        <BudgetTable rows={rows} place={place} onChange={(c) => (setDone(undefined), setChange(c))} />
      ) : null}
      <BudgetForm
        place={place}
        open={change?.kind === 'new' || change?.kind === 'edit'}
        budget={change?.kind === 'edit' ? change.budget : undefined}
        onClose={() => setChange(undefined)}
        onDone={finished}
      />
      <WindowChange
        place={place}
        kind={change && change.kind !== 'new' && change.kind !== 'edit' ? change.kind : undefined}
        budget={change && change.kind !== 'new' ? change.budget : undefined}
        onClose={() => setChange(undefined)}
        onDone={finished}
      />
    </Card>
  );
}

/** Whom a budget is over, in words. */
export function scopeText(b: BudgetRow, place: OrgPlace): string {
  const name = b.scope_name || b.scope_id;
  switch (b.scope) {
    case 'organisation':
      return 'The whole organisation';
    case 'team':
      return `Team ${name}`;
    case 'member':
      return b.scope_id === place.memberId ? 'You' : `Member ${name}`;
    case 'key':
      return `Key ${name}`;
    case 'customer':
      return b.scope_id === '' ? 'Each end customer' : `Each end customer of ${b.scope_id.replace(':', ' ')}`;
  }
}

function BudgetTable(props: { rows: BudgetRow[]; place: OrgPlace; onChange: (c: Change) => void }) {
  const { place } = props;
  const manage = place.can('budgets.manage');
  const act = (kind: Change['kind'], b: BudgetRow) => () => props.onChange({ kind, budget: b } as Change);
  return (
    <Table stack label="Budgets" id="budget-rows">
      <thead>
        <tr>
          <th>Budget</th>
          <th>Period</th>
          <th>This window</th>
          <th>Resets (UTC)</th>
          {manage ? (
            <th class="row-action" data-label="">
              Actions
            </th>
          ) : null}
        </tr>
      </thead>
      <tbody>
        {props.rows.map((b) => (
          <tr key={b.budget_id} data-budget-id={b.budget_id}>
            <td>
              <div>{scopeText(b, place)}</div>
              {b.name ? <div class="small">{b.name}</div> : null}
              <Badge tone={b.mode === 'hard' ? 'neutral' : 'warn'}>
                {b.mode === 'hard' ? 'hard' : 'soft: alerts only'}
              </Badge>
            </td>
            <td>{periodText(b)}</td>
            <td class="budget-window">
              <WindowFigures b={b} />
            </td>
            <td data-figure="resets">{resetText(b)}</td>
            {manage ? (
              <td class="row-action budget-actions">
                <div class="button-row">
                  <button type="button" class="button button-small" onClick={act('edit', b)}>
                    Edit…
                  </button>
                  <button type="button" class="button button-small" onClick={act('raise', b)}>
                    Raise…
                  </button>
                  <button type="button" class="button button-small" onClick={act('reset', b)}>
                    Reset spend…
                  </button>
                  <button type="button" class="button button-small button-danger" onClick={act('delete', b)}>
                    Delete…
                  </button>
                </div>
              </td>
            ) : null}
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

/** When the window resets (a rolling budget's oldest hour drops out instead; a lifetime budget's never). */
function resetText(b: BudgetRow): string {
  if (!b.window_end) return 'Never: lifetime';
  const at = `${time(b.window_end).slice(0, 16)} (${untilText(b.window_end)})`;
  return b.period === 'rolling' ? `Oldest hour drops out ${at}` : at;
}

/** "in 3 h 12 min", "in 2 days" until an ISO time. */
function untilText(iso: string): string {
  const minutes = Math.max(0, Math.round((Date.parse(iso) - Date.now()) / 60_000));
  if (minutes >= 2 * 24 * 60) return `in ${Math.floor(minutes / (24 * 60))} days`;
  if (minutes >= 60) return `in ${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  return `in ${minutes} min`;
}

/** A window's bar (spent, held, left of the amount and its raise) and its figures as text. */
function WindowFigures(props: { b: BudgetRow }) {
  const { b } = props;
  if (b.scope === 'customer' && b.subject === '')
    return <span class="muted">Each end customer has a window of its own of {usd(b.amount_nano)}.</span>;
  const amount = big(b.amount_nano) + big(b.raise_nano);
  const spent = big(b.spent_nano);
  const held = big(b.held_nano);
  const over = spent + held - amount;
  const label = `Spent ${usd(spent)}, held ${usd(held)}, left ${usd(b.remaining_nano)} of ${usd(amount)}`;
  return (
    <div class="budget-window-figures">
      <BudgetBar amount={amount} spent={spent} held={held} label={label} />
      <div class="budget-figures small">
        <span>
          Spent <strong data-figure="spent">{usd(spent)}</strong>
        </span>
        <span>
          held <span data-figure="held">{usd(held)}</span>
        </span>
        <span>
          left <strong data-figure="left">{usd(b.remaining_nano)}</strong>
        </span>
        <span>
          of <span data-figure="amount">{usd(b.amount_nano)}</span>
          {big(b.raise_nano) > 0n ? (
            <>
              {' '}
              + <span data-figure="raise">{usd(b.raise_nano)}</span> raised
            </>
          ) : null}
        </span>
      </div>
      {over > 0n ? <Badge tone="error">over by {usd(over)}</Badge> : null}
    </div>
  );
}

/** Thousandths of the bar: layout only, never shown as money. */
const share = (part: bigint, whole: bigint) => (whole <= 0n ? 0 : Number((part * 1000n) / whole));

/** The bar: an SVG (sizes are attributes, which the page's CSP allows, unlike inline styles). */
function BudgetBar(props: { amount: bigint; spent: bigint; held: bigint; label: string }) {
  const whole = props.amount > props.spent + props.held ? props.amount : props.spent + props.held;
  const spent = whole === 0n ? 1000 : share(props.spent, whole);
  const held = share(props.held, whole);
  return (
    <svg class="budget-bar" viewBox="0 0 1000 10" preserveAspectRatio="none" role="img" aria-label={props.label}>
      <rect
        class={props.spent + props.held > props.amount ? 'bar-over' : 'bar-spent'}
        x="0"
        y="0"
        width={spent}
        height="10"
      />
      <rect class="bar-held" x={spent} y="0" width={held} height="10" />
      <rect class="bar-left" x={spent + held} y="0" width={Math.max(0, 1000 - spent - held)} height="10" />
    </svg>
  );
}
