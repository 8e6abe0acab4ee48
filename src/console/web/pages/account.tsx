// One account, for the operator: its figures, its keys (rate limits, revoke), top-ups and
// refunds on its ledger, its usage per day and its requests. Every change asks for confirmation
// and names what it does; a top-up carries one idempotency reference per form, so a repeated
// click credits once.
import { useState } from 'preact/hooks';
import { API, type AccountDetail, type DailyUsage, type KeyRow, type LedgerRow, post, query } from '../api.ts';
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
import { Ledger } from './billing.tsx';
import { UsageCharts } from './overview.tsx';
import { filtersOf, RequestLog, requestsUrl } from './requests.tsx';

type Tab = 'money' | 'usage' | 'requests';
const tabOf = (loc: Location): Tab => {
  const t = loc.query.get('tab');
  return t === 'usage' || t === 'requests' ? t : 'money';
};

const accountPath = (id: string) => `/admin/accounts/${encodeURIComponent(id)}`;
const dailyOf = (id: string, loc: Location) =>
  `${accountPath(id)}/usage/daily?days=${loc.query.get('days') === '90' ? 90 : 30}`;

/** The account, and the data of the section the address names (the section waits for the account to draw, not to ask). */
export const accountUrls = (loc: Location, id: string) => {
  const tab = tabOf(loc);
  return [
    accountPath(id),
    ...(tab === 'usage' ? [dailyOf(id, loc)] : []),
    ...(tab === 'requests' ? [requestsUrl(`${accountPath(id)}/requests`, filtersOf(loc))] : []),
  ];
};

export function Account(props: { loc: Location; id: string }) {
  const tab = tabOf(props.loc);
  const account = useApi<AccountDetail>(accountPath(props.id));
  const [changed, setChanged] = useState(0);
  const refresh = () => {
    account.reload();
    setChanged((n) => n + 1);
  };
  const pagePath = `/console/admin/accounts/${encodeURIComponent(props.id)}`;
  const a = account.data;
  return (
    <>
      <PageHeader title="Account">
        <a class="button" href="/console/admin/accounts">
          ‹ All accounts
        </a>
      </PageHeader>
      {account.error ? <ErrorNote error={account.error} /> : null}
      {account.loading && !a ? <Loading /> : null}
      {a ? (
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
              { label: 'Available', value: usd(a.available_nano ?? '0'), figure: 'available' },
              { label: 'Spend, 30 days', value: usd(a.spend_30d_nano), figure: 'spend-30d' },
            ]}
          />
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
              <Keys accountId={a.account_id} keys={a.keys_list ?? []} onChanged={refresh} />
              <TopUp accountId={a.account_id} onDone={refresh} />
              <Ledger
                base={`${accountPath(a.account_id)}/ledger`}
                reloadKey={changed}
                action={(row) =>
                  row.kind === 'topup' && row.external_id ? <Refund row={row} onDone={refresh} /> : null
                }
              />
            </>
          ) : null}
          {tab === 'usage' ? <AccountUsage id={a.account_id} loc={props.loc} pagePath={pagePath} /> : null}
          {tab === 'requests' ? (
            <RequestLog
              base={`${accountPath(a.account_id)}/requests`}
              csv={`${API}${accountPath(a.account_id)}/requests.csv`}
              loc={props.loc}
              pagePath={pagePath}
              keep={{ tab: 'requests' }}
              models={[]}
            />
          ) : null}
        </>
      ) : null}
    </>
  );
}

function AccountUsage(props: { id: string; loc: Location; pagePath: string }) {
  const days = props.loc.query.get('days') === '90' ? 90 : 30;
  const daily = useApi<DailyUsage>(dailyOf(props.id, props.loc));
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
  if (v === null || v === undefined) return 'default';
  return Number(v) === 0 ? 'unlimited' : grouped(v);
}

function Keys(props: { accountId: string; keys: KeyRow[]; onChanged: () => void }) {
  const [editing, setEditing] = useState<KeyRow | undefined>();
  const [revoking, setRevoking] = useState<KeyRow | undefined>();
  const [rpm, setRpm] = useState('');
  const [tpm, setTpm] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<string | undefined>();

  const act = async (what: () => Promise<unknown>, message: string) => {
    setBusy(true);
    setError(undefined);
    try {
      await what();
      setDone(message);
      props.onChanged();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
      setEditing(undefined);
      setRevoking(undefined);
    }
  };
  const limit = (text: string): number | null | 'bad' => {
    const t = text.trim();
    if (t === '') return null;
    return /^\d+$/.test(t) ? Number(t) : 'bad';
  };
  const r = limit(rpm);
  const t = limit(tpm);

  return (
    <Card title="Keys">
      {error ? <ErrorNote error={error} /> : null}
      {done ? <Note kind="ok">{done}</Note> : null}
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
                    <button
                      type="button"
                      class="button button-small"
                      onClick={() => {
                        setRpm(k.rpm === null || k.rpm === undefined ? '' : String(k.rpm));
                        setTpm(k.tpm === null || k.tpm === undefined ? '' : String(k.tpm));
                        setDone(undefined);
                        setEditing(k);
                      }}
                    >
                      Limits…
                    </button>
                    <button
                      type="button"
                      class="button button-small button-danger"
                      onClick={() => {
                        setDone(undefined);
                        setRevoking(k);
                      }}
                    >
                      Revoke…
                    </button>
                  </div>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </Table>
      <ConfirmDialog
        open={editing !== undefined}
        title={`Rate limits of ${editing?.prefix ?? ''}…`}
        confirmText="Save limits"
        busy={busy || r === 'bad' || t === 'bad'}
        onCancel={() => setEditing(undefined)}
        onConfirm={() =>
          editing &&
          act(
            () => post(`/admin/keys/${encodeURIComponent(editing.key_id)}/limits`, { rpm: r, tpm: t }),
            `Limits of ${editing.prefix}… saved.`,
          )
        }
      >
        <div class="form">
          <label class="field">
            <span>Requests per minute</span>
            <input
              name="rpm"
              inputMode="numeric"
              placeholder="default"
              value={rpm}
              onInput={(e) => setRpm((e.target as HTMLInputElement).value)}
            />
          </label>
          <label class="field">
            <span>Tokens per minute</span>
            <input
              name="tpm"
              inputMode="numeric"
              placeholder="default"
              value={tpm}
              onInput={(e) => setTpm((e.target as HTMLInputElement).value)}
            />
          </label>
          <p class="muted small">
            Empty: the gateway’s default. 0: unlimited. In force on every instance within seconds.
          </p>
          {r === 'bad' || t === 'bad' ? <p class="note note-error">Limits are whole numbers.</p> : null}
        </div>
      </ConfirmDialog>
      <ConfirmDialog
        open={revoking !== undefined}
        title="Revoke this key?"
        confirmText="Revoke key"
        danger
        busy={busy}
        onCancel={() => setRevoking(undefined)}
        onConfirm={() =>
          revoking &&
          act(
            () => post(`/admin/keys/${encodeURIComponent(revoking.key_id)}/revoke`, {}),
            `Key ${revoking.prefix}… revoked.`,
          )
        }
      >
        <p>
          The key <span class="mono">{revoking?.prefix}…</span> stops working at once, for good. The account and its
          balance stay.
        </p>
      </ConfirmDialog>
    </Card>
  );
}

const newReference = () => `console:${crypto.randomUUID()}`;

function TopUp(props: { accountId: string; onDone: () => void }) {
  const [amount, setAmount] = useState('');
  const [reference, setReference] = useState(newReference);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<string | undefined>();
  const nano = parseUsd(amount);

  const submit = (e: Event) => {
    e.preventDefault();
    setDone(undefined);
    if (nano === undefined || nano <= 0n)
      return setError(new Error('Enter an amount in US dollars, e.g. 25 or 12.50.'));
    setError(undefined);
    setConfirming(true);
  };
  const credit = async () => {
    setBusy(true);
    try {
      const r = await post<{ applied: boolean; balance_nano: string }>(`${accountPath(props.accountId)}/topup`, {
        amount_usd: amount.trim().replace(/^\$/, '').replaceAll(',', ''),
        external_id: reference,
      });
      setDone(
        r.applied
          ? `Credited ${usd(nano ?? 0n)}. Balance now ${usd(r.balance_nano)}.`
          : `This top-up (${reference}) was already applied; nothing changed. Balance ${usd(r.balance_nano)}.`,
      );
      setAmount('');
      setReference(newReference());
      props.onDone();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
      setConfirming(false);
    }
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
      {error ? <ErrorNote error={error} /> : null}
      {done ? <Note kind="ok">{done}</Note> : null}
      <ConfirmDialog
        open={confirming}
        title="Credit this account?"
        confirmText={`Credit ${usd(nano ?? 0n)}`}
        busy={busy}
        onCancel={() => setConfirming(false)}
        onConfirm={credit}
      >
        <p>
          Adds <strong>{usd(nano ?? 0n)}</strong> to account <span class="mono">{props.accountId}</span>, recorded with
          reference <span class="mono">{reference}</span>.
        </p>
      </ConfirmDialog>
    </Card>
  );
}

function Refund(props: { row: LedgerRow; onDone: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<string | undefined>();
  const refund = async () => {
    setBusy(true);
    try {
      const r = await post<{ applied: boolean; refunded_nano: string; balance_nano: string }>('/admin/refunds', {
        external_id: props.row.external_id,
      });
      setResult(r.applied ? `Refunded ${usd(r.refunded_nano)}` : `Already refunded (${usd(r.refunded_nano)})`);
      props.onDone();
    } catch (err) {
      setResult(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  };
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
        busy={busy}
        onCancel={() => setConfirming(false)}
        onConfirm={refund}
      >
        <p>
          Takes back the {usd(props.row.amount_nano)} of top-up <span class="mono">{props.row.external_id}</span>, at
          most what the customer has not spent yet. A top-up is refunded once.
        </p>
      </ConfirmDialog>
    </>
  );
}
