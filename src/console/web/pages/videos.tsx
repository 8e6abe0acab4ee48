// Video jobs of every account, newest first, each with a link to its workflow in the Temporal UI
// (when the gateway knows the UI's address: that of the Temporal dev server it runs itself).
import { api } from '../api.ts';
import { Badge, Card, PagedRows, PageHeader, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { time, usd } from '../format.ts';
import type { Location } from '../router.ts';

export const videosData = (_loc: Location) => [api.videos()];

const TONES: Record<string, 'ok' | 'error' | 'warn' | 'neutral'> = {
  completed: 'ok',
  failed: 'error',
  cancelled: 'neutral',
  queued: 'warn',
  in_progress: 'warn',
};

export function Videos() {
  const list = usePaged(api.videos);
  return (
    <>
      <PageHeader title="Video jobs" />
      <Card>
        <PagedRows list={list} empty="No video jobs yet.">
          {(rows) => (
            <Table stack label="Video jobs" id="video-rows">
              <thead>
                <tr>
                  <th>Job</th>
                  <th>Account</th>
                  <th>Model</th>
                  <th>Status</th>
                  <th class="num">Seconds</th>
                  <th class="num">Cost</th>
                  <th>Created (UTC)</th>
                  <th>Workflow</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((v) => (
                  <tr key={v.id} data-video-id={v.id}>
                    <td class="mono small">{v.id}</td>
                    <td>
                      <a class="mono small" href={`/console/admin/accounts/${encodeURIComponent(v.account_id)}`}>
                        {v.account_id}
                      </a>
                    </td>
                    <td class="mono">{v.model}</td>
                    <td>
                      <Badge tone={TONES[v.status] ?? 'neutral'}>{v.status.replaceAll('_', ' ')}</Badge>
                      {v.error_code ? <div class="muted small">{v.error_code}</div> : null}
                    </td>
                    <td class="num">{v.seconds ?? '—'}</td>
                    <td class="num nowrap">{v.cost_nano ? usd(v.cost_nano) : '—'}</td>
                    <td class="nowrap">{time(v.created_at)}</td>
                    <td>
                      {v.temporal_url ? (
                        <a href={v.temporal_url} target="_blank" rel="noopener noreferrer" class="external">
                          Temporal UI
                        </a>
                      ) : (
                        <span class="muted small">UI address unknown</span>
                      )}
                    </td>
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
