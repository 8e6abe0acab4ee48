// The operator's list of organisations: each with its balance, members, teams and live keys,
// searchable by id or name, newest first in pages; each links to its organisation's pages.
import { api, query } from '../api.ts';
import { Card, PagedRows, PageHeader, SearchForm, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { day, grouped, usd } from '../format.ts';
import { type Location, navigate } from '../router.ts';

const searchOf = (loc: Location) => loc.query.get('q') ?? '';
export const organisationsData = (loc: Location) => [api.organisations(searchOf(loc))];

export const organisationPage = (id: string) => `/console/admin/organisations/${encodeURIComponent(id)}`;

export function Organisations(props: { loc: Location }) {
  const q = searchOf(props.loc);
  const list = usePaged((cursor) => api.organisations(q, cursor));
  return (
    <>
      <PageHeader title="Organisations" />
      <Card>
        <SearchForm
          label="Search organisations"
          placeholder="Organisation id or part of its name"
          value={q}
          onSearch={(text) => navigate(`/console/admin/organisations${query({ q: text })}`)}
        />
      </Card>
      <Card>
        <PagedRows list={list} empty={q ? `No organisation matches “${q}”.` : 'No organisations yet.'}>
          {(rows) => (
            <Table stack label="Organisations" id="organisation-rows">
              <thead>
                <tr>
                  <th>Organisation</th>
                  <th class="num">Balance</th>
                  <th class="num">Available</th>
                  <th class="num">Members</th>
                  <th class="num">Teams</th>
                  <th class="num">Live keys</th>
                  <th>Made (UTC)</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((o) => (
                  <tr key={o.id} data-organisation-id={o.id}>
                    <td>
                      <a href={organisationPage(o.id)}>{o.name}</a>
                      <div class="muted small mono">{o.id}</div>
                    </td>
                    <td class="num nowrap" data-figure="balance">
                      {usd(o.balance_nano)}
                    </td>
                    <td class="num nowrap">{usd(o.available_nano)}</td>
                    <td class="num">{grouped(o.members)}</td>
                    <td class="num">{grouped(o.teams)}</td>
                    <td class="num">{grouped(o.live_keys)}</td>
                    <td class="nowrap">{day(o.created_at)}</td>
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
