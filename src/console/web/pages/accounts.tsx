// The operator's list of accounts: balance, held, spend over 30 days, last use and live keys,
// searchable by account id, key id or prefix, label or owner, newest first in pages.
import { api, query } from '../api.ts';
import { Card, PagedRows, PageHeader, SearchForm, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { grouped, time, usd } from '../format.ts';
import { type Location, navigate } from '../router.ts';

const searchOf = (loc: Location) => loc.query.get('q') ?? '';
export const accountsData = (loc: Location) => [api.accounts(searchOf(loc))];

export function Accounts(props: { loc: Location }) {
  const q = searchOf(props.loc);
  const list = usePaged((cursor) => api.accounts(q, cursor));
  return (
    <>
      <PageHeader title="Accounts" />
      <Card>
        <SearchForm
          label="Search accounts"
          placeholder="Account id, key prefix (prx-…), label or owner"
          value={q}
          onSearch={(text) => navigate(`/console/admin/accounts${query({ q: text })}`)}
        />
      </Card>
      <Card>
        <PagedRows list={list} empty={q ? `No account matches “${q}”.` : 'No accounts yet.'}>
          {(rows) => (
            <Table stack label="Accounts" id="account-rows">
              <thead>
                <tr>
                  <th>Account</th>
                  <th>Owner</th>
                  <th>Group</th>
                  <th class="num">Balance</th>
                  <th class="num">Held</th>
                  <th class="num">Spend, 30 days</th>
                  <th>Last used (UTC)</th>
                  <th class="num">Keys</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((a) => (
                  <tr key={a.account_id} data-account-id={a.account_id}>
                    <td>
                      <a class="mono" href={`/console/admin/accounts/${encodeURIComponent(a.account_id)}`}>
                        {a.account_id}
                      </a>
                      {a.label ? <div class="muted small">{a.label}</div> : null}
                    </td>
                    <td class="small">{a.owner || '—'}</td>
                    <td>{a.group || 'default'}</td>
                    <td class="num nowrap" data-figure="balance">
                      {usd(a.balance_nano)}
                    </td>
                    <td class="num nowrap">{usd(a.held_nano)}</td>
                    <td class="num nowrap" data-figure="spend-30d">
                      {usd(a.spend_30d_nano)}
                    </td>
                    <td class="nowrap">{a.last_used_at ? time(a.last_used_at) : 'never'}</td>
                    <td class="num">{grouped(a.keys)}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          )}
        </PagedRows>
      </Card>
    </>
  );
}
