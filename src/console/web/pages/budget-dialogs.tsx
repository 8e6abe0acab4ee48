// The budgets page's dialogs: a budget made or changed (whom it is over, its amount, period and
// mode), and a change of its current window (a raise until the window ends, a reset of what was
// spent in it) or its deletion. Values are sent as typed; the service checks them and its refusal
// is shown as it words it.
import { useEffect, useId, useState } from 'preact/hooks';
import { nanoToUsd } from '../../../money/money.ts';
import { useAction } from '../action.ts';
import { api, type OrgScope } from '../api.ts';
import { MemberPicker, TeamPicker } from '../components/pickers.tsx';
import { ConfirmDialog, ErrorNote } from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { usd } from '../format.ts';
import type { OrgPlace } from '../org.ts';
import type { BudgetPeriod, BudgetRequest, BudgetRow, BudgetScope } from '../wire-types.ts';

const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** A budget's period in words: "Daily (UTC)", "Weekly from Monday (Europe/Berlin)", "Rolling 24 hours". */
export function periodText(b: Pick<BudgetRow, 'period' | 'time_zone' | 'start_day' | 'rolling_hours'>): string {
  switch (b.period) {
    case 'day':
      return `Daily (${b.time_zone})`;
    case 'week':
      return `Weekly from ${WEEKDAYS[b.start_day] ?? '?'} (${b.time_zone})`;
    case 'month':
      return `Monthly from day ${b.start_day} (${b.time_zone})`;
    case 'rolling':
      return `Rolling ${b.rolling_hours} hours`;
    case 'lifetime':
      return 'Lifetime';
  }
}

/** The form's fields as typed. */
interface Draft {
  scope: BudgetScope;
  /** The team, member or key; for a customer budget the team or key it is under ('' the organisation). */
  target: string;
  under: 'organisation' | 'team' | 'key';
  name: string;
  amount: string;
  period: BudgetPeriod;
  timeZone: string;
  weekStart: number;
  monthStart: string;
  hours: string;
  mode: 'hard' | 'soft';
  thresholds: string;
}

function draftOf(b: BudgetRow | undefined): Draft {
  const under = b?.scope === 'customer' ? (/^(team|key):/.exec(b.scope_id)?.[1] ?? 'organisation') : 'organisation';
  return {
    scope: b?.scope ?? 'organisation',
    target: b?.scope === 'customer' ? b.scope_id.replace(/^(team|key):/, '') : (b?.scope_id ?? ''),
    under: under as Draft['under'],
    name: b?.name ?? '',
    amount: b?.amount_usd ?? '',
    period: b?.period ?? 'day',
    timeZone: b && b.period !== 'rolling' && b.period !== 'lifetime' ? b.time_zone : 'UTC',
    weekStart: b?.period === 'week' ? b.start_day : 1,
    monthStart: String(b?.period === 'month' ? b.start_day : 1),
    hours: String(b?.rolling_hours || 24),
    mode: b?.mode ?? 'hard',
    thresholds: (b?.thresholds ?? [50, 80, 100]).join(', '),
  };
}

/** A whole number a person typed, or -1 (which the service refuses, saying what it takes). */
const whole = (text: string) => (/^\d{1,6}$/.test(text.trim()) ? Number(text.trim()) : -1);

/** The request the draft makes. */
function requestOf(d: Draft): BudgetRequest {
  const scopeId =
    d.scope === 'organisation'
      ? ''
      : d.scope === 'customer'
        ? d.under === 'organisation'
          ? ''
          : `${d.under}:${d.target}`
        : d.target;
  const thresholds = d.thresholds
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((t) => (/^\d{1,6}$/.test(t) ? Number(t) : Number.NaN));
  return {
    scope: d.scope,
    scope_id: scopeId,
    name: d.name.trim(),
    amount_usd: d.amount.trim(),
    period: d.period,
    time_zone: d.timeZone.trim(),
    start_day: d.period === 'week' ? d.weekStart : d.period === 'month' ? whole(d.monthStart) : 0,
    rolling_hours: d.period === 'rolling' ? whole(d.hours) : 0,
    mode: d.mode,
    thresholds: thresholds.some(Number.isNaN) ? [-1] : thresholds,
  };
}

/** What the form still needs before it can be sent ('' when complete). */
function missing(d: Draft): string {
  if (d.scope !== 'organisation' && !(d.scope === 'customer' && d.under === 'organisation') && !d.target)
    return 'Choose whom it is over.';
  return d.amount.trim() ? '' : 'Give its amount.';
}

export function BudgetForm(props: {
  place: OrgPlace;
  open: boolean;
  budget: BudgetRow | undefined;
  onClose: () => void;
  onDone: (message: string) => void;
}) {
  const [draft, setDraft] = useState<Draft>(() => draftOf(undefined));
  const set = (patch: Partial<Draft>) => setDraft((d) => ({ ...d, ...patch }));
  const save = useAction(async () => {
    const b = await api.setBudget(props.place.scope, requestOf(draft), props.budget?.budget_id ?? '');
    props.onDone(props.budget ? 'The budget was changed.' : `The budget of ${usd(b.amount_nano)} was made.`);
  });
  useEffect(() => {
    setDraft(draftOf(props.budget));
    save.reset();
  }, [props.open, props.budget]);
  const lacking = missing(draft);
  return (
    <ConfirmDialog
      open={props.open}
      title={props.budget ? 'Change this budget' : 'New budget'}
      confirmText={props.budget ? 'Save budget' : 'Make budget'}
      busy={save.busy}
      confirmDisabled={lacking !== ''}
      wide
      onCancel={props.onClose}
      onConfirm={() => void save.run()}
    >
      <div class="form form-columns">
        <ScopeFields scope={props.place.scope} draft={draft} set={set} />
        <TextField
          label="Amount (USD)"
          name="amount"
          decimal
          value={draft.amount}
          onValue={(amount) => set({ amount })}
        />
        <PeriodFields draft={draft} set={set} />
        <SelectField
          label="When it is reached"
          name="mode"
          value={draft.mode}
          options={MODES}
          onValue={(mode) => set({ mode: mode as Draft['mode'] })}
        />
        <TextField
          label="Alerts at (percent of the amount)"
          name="thresholds"
          value={draft.thresholds}
          onValue={(thresholds) => set({ thresholds })}
        />
        <TextField label="Name (optional)" name="budget-name" value={draft.name} onValue={(name) => set({ name })} />
      </div>
      {lacking ? <p class="muted small">{lacking}</p> : null}
      {save.error ? <ErrorNote error={save.error} /> : null}
    </ConfirmDialog>
  );
}

type Set = (patch: Partial<Draft>) => void;

const SCOPES: { value: BudgetScope; text: string }[] = [
  { value: 'organisation', text: 'The whole organisation' },
  { value: 'team', text: 'A team (its keys)' },
  { value: 'member', text: 'A member (their personal keys)' },
  { value: 'key', text: 'One key' },
  { value: 'customer', text: 'Each end customer' },
];

function ScopeFields(props: { scope: OrgScope; draft: Draft; set: Set }) {
  const { draft, set } = props;
  const kind = draft.scope === 'customer' ? draft.under : draft.scope;
  return (
    <>
      <label class={draft.scope === 'customer' ? 'field' : 'field field-span'}>
        <span>Over</span>
        <select
          name="scope"
          value={draft.scope}
          onChange={(e) =>
            set({ scope: (e.target as HTMLSelectElement).value as BudgetScope, target: '', under: 'organisation' })
          }
        >
          {SCOPES.map((s) => (
            <option key={s.value} value={s.value}>
              {s.text}
            </option>
          ))}
        </select>
      </label>
      {draft.scope === 'customer' ? (
        <label class="field">
          <span>Their requests through</span>
          <select
            name="under"
            value={draft.under}
            onChange={(e) => set({ under: (e.target as HTMLSelectElement).value as Draft['under'], target: '' })}
          >
            <option value="organisation">Any key of the organisation</option>
            <option value="team">One team’s keys</option>
            <option value="key">One key</option>
          </select>
        </label>
      ) : null}
      {kind === 'team' || kind === 'member' || kind === 'key' ? (
        <div class="field-span">
          {kind === 'team' ? (
            <TeamPicker scope={props.scope} value={draft.target} onChange={(target) => set({ target })} />
          ) : kind === 'member' ? (
            <MemberPicker scope={props.scope} value={draft.target} onChange={(target) => set({ target })} />
          ) : (
            <KeySelect scope={props.scope} value={draft.target} onChange={(target) => set({ target })} />
          )}
        </div>
      ) : null}
    </>
  );
}

/** One of the organisation's live keys (the newest 50), named with whose it is. */
function KeySelect(props: { scope: OrgScope; value: string; onChange: (keyId: string) => void }) {
  const keys = useApi(api.orgKeys(props.scope, {}));
  const rows = keys.data?.rows ?? [];
  return (
    <label class="field">
      <span>Key</span>
      <select name="key" value={props.value} onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}>
        <option value="">{keys.loading ? 'Loading…' : 'Choose…'}</option>
        {rows.map((k) => (
          <option key={k.key_id} value={k.key_id}>
            {k.name ? `${k.name} (${k.prefix}…)` : `${k.prefix}…`} · {k.team_id ? `team ${k.team_name}` : k.member_name}
          </option>
        ))}
      </select>
    </label>
  );
}

function PeriodFields(props: { draft: Draft; set: Set }) {
  const { draft, set } = props;
  const calendar = draft.period === 'day' || draft.period === 'week' || draft.period === 'month';
  return (
    <>
      <SelectField
        label="Period"
        name="period"
        value={draft.period}
        options={PERIODS}
        onValue={(period) => set({ period: period as BudgetPeriod })}
      />
      {calendar ? <TimeZoneField value={draft.timeZone} onValue={(timeZone) => set({ timeZone })} /> : null}
      {draft.period === 'week' ? (
        <SelectField
          label="Weeks start on"
          name="week-start"
          value={String(draft.weekStart)}
          options={WEEKDAYS.map((text, i) => ({ value: String(i), text }))}
          onValue={(v) => set({ weekStart: Number(v) })}
        />
      ) : null}
      {draft.period === 'month' ? (
        <TextField
          label="Months start on day (1 to 28)"
          name="month-start"
          numeric
          value={draft.monthStart}
          onValue={(monthStart) => set({ monthStart })}
        />
      ) : null}
      {draft.period === 'rolling' ? (
        <TextField
          label="Over the last … hours (1 to 8784)"
          name="hours"
          numeric
          value={draft.hours}
          onValue={(hours) => set({ hours })}
        />
      ) : null}
    </>
  );
}

function TimeZoneField(props: { value: string; onValue: (zone: string) => void }) {
  const zones = useId();
  return (
    <label class="field">
      <span>Time zone (where its days start)</span>
      <input
        name="time-zone"
        list={zones}
        value={props.value}
        onInput={(e) => props.onValue((e.target as HTMLInputElement).value)}
      />
      <datalist id={zones}>
        {Intl.supportedValuesOf('timeZone').map((z) => (
          <option key={z} value={z} />
        ))}
      </datalist>
    </label>
  );
}

const MODES = [
  { value: 'hard', text: 'Hard: refuse requests that do not fit' },
  { value: 'soft', text: 'Soft: count and alert only' },
];

const PERIODS = [
  { value: 'day', text: 'A day' },
  { value: 'week', text: 'A week' },
  { value: 'month', text: 'A month' },
  { value: 'rolling', text: 'Rolling hours' },
  { value: 'lifetime', text: 'Lifetime (never resets)' },
];

function TextField(props: {
  label: string;
  name: string;
  value: string;
  onValue: (v: string) => void;
  decimal?: boolean;
  numeric?: boolean;
}) {
  return (
    <label class="field">
      <span>{props.label}</span>
      <input
        name={props.name}
        maxLength={300}
        inputMode={props.decimal ? 'decimal' : props.numeric ? 'numeric' : undefined}
        value={props.value}
        onInput={(e) => props.onValue((e.target as HTMLInputElement).value)}
      />
    </label>
  );
}

function SelectField(props: {
  label: string;
  name: string;
  value: string;
  options: { value: string; text: string }[];
  onValue: (v: string) => void;
}) {
  return (
    <label class="field">
      <span>{props.label}</span>
      <select
        name={props.name}
        value={props.value}
        onChange={(e) => props.onValue((e.target as HTMLSelectElement).value)}
      >
        {props.options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.text}
          </option>
        ))}
      </select>
    </label>
  );
}

export type WindowChangeKind = 'raise' | 'reset' | 'delete';

/** Raise…, Reset spend… or Delete… of a budget, asked in a dialog that says what it does. */
export function WindowChange(props: {
  place: OrgPlace;
  kind: WindowChangeKind | undefined;
  budget: BudgetRow | undefined;
  onClose: () => void;
  onDone: (message: string) => void;
}) {
  const { kind, budget: b, place } = props;
  const [raise, setRaise] = useState('');
  const [customer, setCustomer] = useState('');
  const act = useAction(async () => {
    if (!b || !kind) return;
    const subject = b.scope === 'customer' ? customer : '';
    if (kind === 'delete') {
      await api.deleteBudget(place.scope, b.budget_id);
      props.onDone('The budget was deleted.');
    } else if (kind === 'raise') {
      const r = await api.raiseBudget(place.scope, b.budget_id, { raise_usd: raise.trim(), subject });
      props.onDone(`Raised by ${usd(r.raise_nano)} until the window ends: ${usd(r.remaining_nano)} left.`);
    } else {
      const r = await api.resetBudget(place.scope, b.budget_id, { subject });
      props.onDone(`Forgave ${usd(r.forgiven_nano)} spent in this window: ${usd(r.budget.remaining_nano)} left.`);
    }
  });
  useEffect(() => {
    setRaise(b && kind === 'raise' && b.raise_nano !== '0' ? nanoToUsd(BigInt(b.raise_nano)) : '');
    setCustomer('');
    act.reset();
  }, [kind, b]);
  const needsCustomer = kind !== 'delete' && b?.scope === 'customer';
  return (
    <ConfirmDialog
      open={kind !== undefined}
      title={
        kind === 'raise' ? 'Raise this window' : kind === 'reset' ? 'Reset this window’s spend?' : 'Delete this budget?'
      }
      confirmText={kind === 'raise' ? 'Raise' : kind === 'reset' ? 'Reset spend' : 'Delete budget'}
      danger={kind !== 'raise'}
      busy={act.busy}
      confirmDisabled={(kind === 'raise' && !raise.trim()) || (needsCustomer && !customer)}
      onCancel={props.onClose}
      onConfirm={() => void act.run()}
    >
      <p>{kind ? WINDOW_CHANGE_TEXT[kind] : ''}</p>
      {needsCustomer ? (
        <label class="field">
          <span>End customer’s id</span>
          <input
            name="customer"
            maxLength={256}
            value={customer}
            onInput={(e) => setCustomer((e.target as HTMLInputElement).value)}
          />
        </label>
      ) : null}
      {kind === 'raise' ? (
        <label class="field">
          <span>Raise by (USD, for this window)</span>
          <input
            name="raise"
            inputMode="decimal"
            placeholder="5"
            value={raise}
            onInput={(e) => setRaise((e.target as HTMLInputElement).value)}
          />
        </label>
      ) : null}
      {act.error ? <ErrorNote error={act.error} /> : null}
    </ConfirmDialog>
  );
}

const WINDOW_CHANGE_TEXT: Record<WindowChangeKind, string> = {
  raise:
    'Until the current window ends, its amount is the budget’s plus this raise. A new raise replaces the last; 0 takes it back.',
  reset:
    'What was spent so far in the current window is forgiven: it starts again from nothing spent. Requests in flight stay held. The audit log records it.',
  delete: 'No request is held against this budget from now on. Its windows are kept for the record.',
};
