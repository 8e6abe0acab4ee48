// An organisation's audit log (owners, admins and the operator): every change to its members,
// roles, teams, keys and invitations, newest first, in keyset pages, with who made it, through
// what and from where, and what it was before and after; the whole log as CSV.
import { api, type OrgScope } from '../api.ts';
import { Card, PagedRows, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { time } from '../format.ts';
import type { Location } from '../router.ts';

export const auditData = (_loc: Location) => [api.audit('own')];

export function Audit(props: { scope: OrgScope }) {
  const list = usePaged((cursor) => api.audit(props.scope, cursor));
  return (
    <Card
      title="Audit log"
      actions={
        <a class="button" id="audit-csv" href={api.auditCsvHref(props.scope)} download>
          Download CSV
        </a>
      }
    >
      <PagedRows list={list} empty="Nothing has changed yet.">
        {(rows) => (
          <Table stack label="Audit log" id="audit-rows">
            <thead>
              <tr>
                <th>Time (UTC)</th>
                <th>Who</th>
                <th>What</th>
                <th>Target</th>
                <th>Before</th>
                <th>After</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((e) => (
                <tr key={e.id} data-audit-id={e.id}>
                  <td class="nowrap">{time(e.at)}</td>
                  <td class="small breakable">
                    <span class="mono">{e.actor}</span>
                    <div class="muted">
                      {e.via}
                      {e.from_address ? ` · ${e.from_address}` : ''}
                    </div>
                  </td>
                  <td class="mono small">{e.action}</td>
                  <td class="mono small breakable">{e.target}</td>
                  <td class="mono small breakable">{e.before || '—'}</td>
                  <td class="mono small breakable">{e.after || '—'}</td>
                </tr>
              ))}
            </tbody>
          </Table>
        )}
      </PagedRows>
    </Card>
  );
}
