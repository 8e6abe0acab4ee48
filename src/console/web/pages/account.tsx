// One account, for the operator: its figures, its keys (rate limits, revoke), top-ups and
// refunds on its ledger, its usage per day and its requests. Every change asks for confirmation
// and names what it does; a top-up carries one idempotency reference per form, so a repeated
// click credits once.
import { useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api, query } from '../api.ts';
import {
  Badge,
  Card,
  ConfirmDialog,
  ErrorNote,
  Loading,
  Note,
  PageHeader,
  Segmented,
  Table,
  Tiles,
} from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { grouped, parseUsd, time, usd } from '../format.ts';
import { type Location, navigate } from '../router.ts';
import type { AccountDetail, KeyRow, LedgerRow, LimitsRequest } from '../wire-types.ts';
import { Ledger } from './billing.tsx';
import { organisationPage } from './organisations.tsx';
import { daysOf, UsageCharts } from './overview.tsx';
import { filtersOf, RequestLog } from './requests.tsx';

type Tab = 'money' | 'usage' | 'requests';
const tabOf = (loc: Location): Tab => {
  const t = loc.query.get('tab');
  return t === 'usage' || t === 'requests' ? t : 'money';
};

/** The account, and the data of the section the address names (the section waits for the account to draw, not to ask). */
export const accountData = (loc: Location, id: string) => {
  const tab = tabOf(loc);
  const scope = { accountId: id };
  return [
    api.account(id),
    ...(tab === 'usage' ? [api.dailyUsage(scope, daysOf(loc))] : []),
    ...(tab === 'requests' ? [api.requests(scope, filtersOf(loc))] : []),
  ];
};

export function Account(props: { loc: Location; id: string }) {
  const tab = tabOf(props.loc);
  const account = useApi(api.account(props.id));
  const [changed, setChanged] = useState(0);
  const refresh = () => {
    account.reload();
    setChanged((n) => n + 1);
  };
  const pagePath = `/console/admin/accounts/${encodeURIComponent(props.id)}`;
  const a = account.data;
  const scope = a ? { accountId: a.account_id } : undefined;
  return (
    <>
      <PageHeader title="Account">
        <a class="button" href={organisationPage(props.id)}>
          Organisation ›
        </a>
        <a class="button" href="/console/admin/accounts">
          ‹ All accounts
        </a>
      </PageHeader>
      {account.error ? <ErrorNote error={account.error} /> : null}
      {account.loading && !a ? <Loading /> : null}
      {a && scope ? (
        <>
          <AccountFacts account={a} />
          <div class="tabs">
            <Segmented
              label="Section"
              value={tab}
              options={[
                { value: 'money', text: 'Keys and money' },
                { value: 'usage', text: 'Usage' },
                { value: 'requests', text: 'Requests' },
              ]}
              onChange={(t) => navigate(`${pagePath}${query({ tab: t === 'money' ? '' : t })}`, true)}
            />
          </div>
          {tab === 'money' ? (
            <>
              <Keys keys={a.keys_list} onChanged={refresh} />
              <TopUp accountId={a.account_id} onDone={refresh} />
              <Ledger
                scope={scope}
                reloadKey={changed}
                action={(row) =>
                  row.kind === 'topup' && row.external_id ? <Refund row={row} onDone={refresh} /> : null
                }
              />
            </>
          ) : null}
          {tab === 'usage' ? <AccountUsage id={a.account_id} loc={props.loc} pagePath={pagePath} /> : null}
          {tab === 'requests' ? (
            <RequestLog scope={scope} loc={props.loc} pagePath={pagePath} keep={{ tab: 'requests' }} models={[]} />
          ) : null}
        </>
      ) : null}
    </>
  );
}

function AccountFacts(props: { account: AccountDetail }) {
  const a = props.account;
  return (
    <>
      <dl class="facts facts-inline">
        <div>
          <dt>Account</dt>
          <dd class="mono" data-figure="account-id">
            {a.account_id}
          </dd>
        </div>
        <div>
          <dt>Label</dt>
          <dd>{a.label || '—'}</dd>
        </div>
        <div>
          <dt>Owner</dt>
          <dd>{a.owner || '—'}</dd>
        </div>
        <div>
          <dt>Price group</dt>
          <dd>{a.group || 'default'}</dd>
        </div>
        <div>
          <dt>Last used</dt>
          <dd>{a.last_used_at ? time(a.last_used_at) : 'never'}</dd>
        </div>
      </dl>
      <Tiles
        tiles={[
          { label: 'Balance', value: usd(a.balance_nano), figure: 'balance' },
          { label: 'Held', value: usd(a.held_nano), figure: 'held' },
          { label: 'Available', value: usd(a.available_nano), figure: 'available' },
          { label: 'Spend, 30 days', value: usd(a.spend_30d_nano), figure: 'spend-30d' },
        ]}
      />
    </>
  );
}

function AccountUsage(props: { id: string; loc: Location; pagePath: string }) {
  const days = daysOf(props.loc);
  const daily = useApi(api.dailyUsage({ accountId: props.id }, days));
  return (
    <UsageCharts
      daily={daily.data}
      error={daily.error}
      days={days}
      onDays={(d) => navigate(`${props.pagePath}${query({ tab: 'usage', days: d === 30 ? '' : d })}`, true)}
    />
  );
}

function limitText(v: KeyRow['rpm']): string {
  if (v === null) return 'default';
  return v === 0 ? 'unlimited' : grouped(v);
}

/** A limit as typed: empty = the gateway's default (null), else a whole number. */
function limitOf(text: string): number | null | 'bad' {
  const t = text.trim();
  if (t === '') return null;
  return /^\d+$/.test(t) ? Number(t) : 'bad';
}

/** The account's keys, each with its rate limits (Limits…) and Revoke…, both asked in a dialog. */
function Keys(props: { keys: KeyRow[]; onChanged: () => void }) {
  const [editing, setEditing] = useState<KeyRow | undefined>();
  const [revoking, setRevoking] = useState<KeyRow | undefined>();
  // The limits as typed in the dialog, from the key's own when it opens.
  const [typed, setTyped] = useState({ rpm: '', tpm: '' });
  // One state for both changes: the card shows the last one's outcome.
  const change = useAction(async (send: () => Promise<unknown>, message: string) => {
    await send();
    props.onChanged();
    return message;
  });
  const run = async (send: () => Promise<unknown>, message: string) => {
    await change.run(send, message);
    setEditing(undefined);
    setRevoking(undefined);
  };
  return (
    <Card title="Keys">
      {change.error ? <ErrorNote error={change.error} /> : null}
      {change.done ? <Note kind="ok">{change.done}</Note> : null}
      <KeyTable
        keys={props.keys}
        onLimits={(k) => {
          setTyped({ rpm: k.rpm === null ? '' : String(k.rpm), tpm: k.tpm === null ? '' : String(k.tpm) });
          change.dismiss();
          setEditing(k);
        }}
        onRevoke={(k) => {
          change.dismiss();
          setRevoking(k);
        }}
      />
      <LimitsDialog
        editing={editing}
        typed={typed}
        onType={setTyped}
        busy={change.busy}
        onCancel={() => setEditing(undefined)}
        onSave={(k, limits) => run(() => api.setKeyLimits(k.key_id, limits), `Limits of ${k.prefix}… saved.`)}
      />
      <ConfirmDialog
        open={revoking !== undefined}
        title="Revoke this key?"
        confirmText="Revoke key"
        danger
        busy={change.busy}
        onCancel={() => setRevoking(undefined)}
        onConfirm={() => revoking && run(() => api.revokeKey(revoking.key_id), `Key ${revoking.prefix}… revoked.`)}
      >
        <p>
          The key <span class="mono">{revoking?.prefix}…</span> stops working at once, for good. The account and its
          balance stay.
        </p>
      </ConfirmDialog>
    </Card>
  );
}

function KeyTable(props: { keys: KeyRow[]; onLimits: (k: KeyRow) => void; onRevoke: (k: KeyRow) => void }) {
  return (
    <Table stack label="Keys" id="key-rows">
      <thead>
        <tr>
          <th>Key</th>
          <th>Created (UTC)</th>
          <th>State</th>
          <th class="num">Requests / min</th>
          <th class="num">Tokens / min</th>
          <th class="row-action" data-label="">
            Actions
          </th>
        </tr>
      </thead>
      <tbody>
        {props.keys.map((k) => (
          <tr key={k.key_id} data-key-id={k.key_id}>
            <td>
              <span class="mono">{k.prefix}…</span>
              <div class="muted small mono">{k.key_id}</div>
            </td>
            <td class="nowrap">{time(k.created_at)}</td>
            <td>
              {k.revoked_at ? (
                <Badge tone="neutral">revoked {time(k.revoked_at).slice(0, 10)}</Badge>
              ) : (
                <Badge tone="ok">live</Badge>
              )}
            </td>
            <td class="num" data-figure="rpm">
              {limitText(k.rpm)}
            </td>
            <td class="num" data-figure="tpm">
              {limitText(k.tpm)}
            </td>
            <td class="row-action">
              {k.revoked_at ? null : (
                <div class="button-row">
                  <button type="button" class="button button-small" onClick={() => props.onLimits(k)}>
                    Limits…
                  </button>
                  <button type="button" class="button button-small button-danger" onClick={() => props.onRevoke(k)}>
                    Revoke…
                  </button>
                </div>
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

type TypedLimits = { rpm: string; tpm: string };

/** The rate limits of the key being edited (none: closed). */
function LimitsDialog(props: {
  editing: KeyRow | undefined;
  typed: TypedLimits;
  onType: (typed: TypedLimits) => void;
  busy: boolean;
  onCancel: () => void;
  onSave: (k: KeyRow, limits: LimitsRequest) => void;
}) {
  const { editing, typed } = props;
  const r = limitOf(typed.rpm);
  const t = limitOf(typed.tpm);
  return (
    <ConfirmDialog
      open={editing !== undefined}
      title={`Rate limits of ${editing?.prefix ?? ''}…`}
      confirmText="Save limits"
      busy={props.busy || r === 'bad' || t === 'bad'}
      onCancel={props.onCancel}
      onConfirm={() =>
        editing &&
        r !== 'bad' &&
        t !== 'bad' &&
        props.onSave(editing, { rpm: r, tpm: t, max_in_flight: editing.max_in_flight })
      }
    >
      <div class="form">
        <label class="field">
          <span>Requests per minute</span>
          <input
            name="rpm"
            inputMode="numeric"
            placeholder="default"
            value={typed.rpm}
            onInput={(e) => props.onType({ ...typed, rpm: (e.target as HTMLInputElement).value })}
          />
        </label>
        <label class="field">
          <span>Tokens per minute</span>
          <input
            name="tpm"
            inputMode="numeric"
            placeholder="default"
            value={typed.tpm}
            onInput={(e) => props.onType({ ...typed, tpm: (e.target as HTMLInputElement).value })}
          />
        </label>
        <p class="muted small">
          Empty: the gateway’s default. 0: unlimited. In force on every instance within seconds.
        </p>
        {r === 'bad' || t === 'bad' ? <p class="note note-error">Limits are whole numbers.</p> : null}
      </div>
    </ConfirmDialog>
  );
}

const newReference = () => `console:${crypto.randomUUID()}`;

/** Top up… with a fresh idempotency reference per form, so a repeated click credits once. */
function TopUp(props: { accountId: string; onDone: () => void }) {
  const [amount, setAmount] = useState('');
  const [reference, setReference] = useState(newReference);
  const [confirming, setConfirming] = useState(false);
  const nano = parseUsd(amount);
  const credit = useAction(async () => {
    const r = await api.topUp(props.accountId, {
      amount_usd: amount.trim().replace(/^\$/, '').replaceAll(',', ''),
      external_id: reference,
    });
    setAmount('');
    setReference(newReference());
    props.onDone();
    return r.applied
      ? `Credited ${usd(nano ?? 0n)}. Balance now ${usd(r.balance_nano)}.`
      : `This top-up (${reference}) was already applied; nothing changed. Balance ${usd(r.balance_nano)}.`;
  });

  const submit = (e: Event) => {
    e.preventDefault();
    credit.reset();
    if (nano === undefined || nano <= 0n)
      return credit.fail(new Error('Enter an amount in US dollars, e.g. 25 or 12.50.'));
    setConfirming(true);
  };
  const confirm = async () => {
    await credit.run();
    setConfirming(false);
  };
  return (
    <Card title="Top up">
      <form class="inline-form" onSubmit={submit}>
        <label class="field">
          <span>Amount (USD)</span>
          <input
            name="amount"
            inputMode="decimal"
            placeholder="25.00"
            value={amount}
            onInput={(e) => setAmount((e.target as HTMLInputElement).value)}
          />
        </label>
        <label class="field field-wide">
          <span>Reference (applied once)</span>
          <input
            name="external_id"
            value={reference}
            onInput={(e) => setReference((e.target as HTMLInputElement).value)}
          />
        </label>
        <button type="submit" class="button button-primary">
          Top up…
        </button>
      </form>
      {credit.error ? <ErrorNote error={credit.error} /> : null}
      {credit.done ? <Note kind="ok">{credit.done}</Note> : null}
      <ConfirmDialog
        open={confirming}
        title="Credit this account?"
        confirmText={`Credit ${usd(nano ?? 0n)}`}
        busy={credit.busy}
        onCancel={() => setConfirming(false)}
        onConfirm={confirm}
      >
        <p>
          Adds <strong>{usd(nano ?? 0n)}</strong> to account <span class="mono">{props.accountId}</span>, recorded with
          reference <span class="mono">{reference}</span>.
        </p>
      </ConfirmDialog>
    </Card>
  );
}

/** Refund… on a top-up of the ledger: once asked, its outcome replaces the button. */
function Refund(props: { row: LedgerRow; onDone: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const refund = useAction(async () => {
    const r = await api.refund(props.row.external_id);
    props.onDone();
    return r.applied ? `Refunded ${usd(r.refunded_nano)}` : `Already refunded (${usd(r.refunded_nano)})`;
  });
  const confirm = async () => {
    await refund.run();
    setConfirming(false);
  };
  const failure =
    refund.error instanceof Error ? refund.error.message : refund.error ? String(refund.error) : undefined;
  const result = refund.done ?? failure;
  return (
    <>
      {result ? (
        <span class="small">{result}</span>
      ) : (
        <button type="button" class="button button-small" onClick={() => setConfirming(true)}>
          Refund…
        </button>
      )}
      <ConfirmDialog
        open={confirming}
        title="Refund this top-up?"
        confirmText="Refund"
        danger
        busy={refund.busy}
        onCancel={() => setConfirming(false)}
        onConfirm={confirm}
      >
        <p>
          Takes back the {usd(props.row.amount_nano)} of top-up <span class="mono">{props.row.external_id}</span>, at
          most what the customer has not spent yet. A top-up is refunded once.
        </p>
      </ConfirmDialog>
    </>
  );
}
