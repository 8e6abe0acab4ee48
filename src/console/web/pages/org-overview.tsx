// An organisation's overview: the balance left, spend and tokens per UTC day by model (the key
// holder's charts), and spend by team, member, key or model as a table. What it covers is the
// service's answer for the session's role: the whole organisation's for owners, admins and
// billing members (and the operator), a `member`'s own usage otherwise, with the balance left.
import { api, query } from '../api.ts';
import { Card, Empty, ErrorNote, Loading, Note, Segmented, Table, Tiles } from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { grouped, usd } from '../format.ts';
import type { OrgPlace } from '../org.ts';
import { type Location, navigate } from '../router.ts';
import type { Balance, SpendBy, SpendReport } from '../wire-types.ts';
import { daysOf, UsageCharts } from './overview.tsx';

/** The groupings the table offers, and the words for each. */
const GROUPS: { value: SpendBy; text: string; heading: string }[] = [
  { value: 'member', text: 'Member', heading: 'Member' },
  { value: 'team', text: 'Team', heading: 'Team' },
  { value: 'key', text: 'Key', heading: 'Key' },
  { value: 'model', text: 'Model', heading: 'Model' },
];

export const spendByOf = (loc: Location): SpendBy => {
  const by = loc.query.get('by');
  return GROUPS.some((g) => g.value === by) ? (by as SpendBy) : 'member';
};

/** A member's overview at /console: what a team key's overview asks too (the address does not say the role). */
export const orgOverviewData = (loc: Location) => [api.balance(), api.dailyUsage('own', daysOf(loc))];

export function OrgOverview(props: { place: OrgPlace; loc: Location }) {
  const { place, loc } = props;
  const days = daysOf(loc);
  const by = spendByOf(loc);
  const figures = useApi<Balance>(place.scope === 'own' ? api.balance() : api.organisation(place.scope));
  const daily = useApi(api.dailyUsage(place.scope, days));
  const whole = place.can('spend.read');
  const go = (change: Record<string, string | number>) =>
    navigate(
      `${place.pagePath}${query({ ...place.keep, days: days === 30 ? '' : days, by: by === 'member' ? '' : by, ...change })}`,
      true,
    );
  return (
    <>
      {figures.error ? <ErrorNote error={figures.error} /> : null}
      {figures.data ? (
        <Tiles
          tiles={[
            { label: 'Balance', value: usd(figures.data.balance_nano), figure: 'balance' },
            {
              label: 'Held',
              value: usd(figures.data.held_nano),
              hint: 'Reserved for requests in flight',
              figure: 'held',
            },
            { label: 'Available', value: usd(figures.data.available_nano), figure: 'available' },
          ]}
        />
      ) : figures.loading ? (
        <Loading />
      ) : null}
      {whole ? null : (
        <Note>The balance is the organisation’s; the usage below is your own (your role shows no one else’s).</Note>
      )}
      <UsageCharts daily={daily.data} error={daily.error} days={days} onDays={(d) => go({ days: d === 30 ? '' : d })} />
      <SpendTable place={place} days={days} by={by} onBy={(b) => go({ by: b === 'member' ? '' : b })} />
    </>
  );
}

function SpendTable(props: { place: OrgPlace; days: number; by: SpendBy; onBy: (by: SpendBy) => void }) {
  const { place, days, by } = props;
  const spend = useApi<SpendReport>(api.spend(place.scope, by, days));
  const heading = GROUPS.find((g) => g.value === by)!.heading;
  const report = spend.data;
  return (
    <Card
      title={`${place.can('spend.read') ? 'Spend' : 'Your spend'} by ${heading.toLowerCase()} (last ${days} days)`}
      actions={<Segmented label="Group by" value={by} options={GROUPS} onChange={props.onBy} />}
    >
      {spend.error ? <ErrorNote error={spend.error} /> : null}
      {spend.loading && !report ? <Loading /> : null}
      {report && report.rows.length === 0 ? <Empty>No requests in the last {days} days.</Empty> : null}
      {report && report.rows.length > 0 ? <SpendRows report={report} by={by} heading={heading} /> : null}
    </Card>
  );
}

function SpendRows(props: { report: SpendReport; by: SpendBy; heading: string }) {
  const { report, by, heading } = props;
  return (
    <Table stack label={`Spend by ${heading.toLowerCase()}`} id="spend-rows">
      <thead>
        <tr>
          <th>{heading}</th>
          <th class="num">Requests</th>
          <th class="num">Input tokens</th>
          <th class="num">Output tokens</th>
          <th class="num">Spend</th>
        </tr>
      </thead>
      <tbody>
        {report.rows.map((r) => (
          <tr key={r.key} data-key={r.key}>
            <td class={by === 'model' || by === 'key' ? 'mono' : ''}>{spendName(by, r.key, r.label)}</td>
            <td class="num">{grouped(r.requests)}</td>
            <td class="num">{grouped(r.input_tokens)}</td>
            <td class="num">{grouped(r.output_tokens)}</td>
            <td class="num nowrap" data-figure="cost">
              {usd(r.cost_nano)}
            </td>
          </tr>
        ))}
      </tbody>
      {report.total ? (
        <tfoot>
          <tr>
            <th>Total</th>
            <td class="num">{grouped(report.total.requests)}</td>
            <td class="num">{grouped(report.total.input_tokens)}</td>
            <td class="num">{grouped(report.total.output_tokens)}</td>
            <td class="num nowrap" data-figure="total-cost">
              {usd(report.total.cost_nano)}
            </td>
          </tr>
        </tfoot>
      ) : null}
    </Table>
  );
}

/** A spend row's name: the team's or member's name, the key's prefix, the model. */
function spendName(by: SpendBy, key: string, label: string): string {
  if (by === 'team') return key ? label || key : 'No team (personal keys)';
  if (by === 'member') return key ? label || key : 'No member (team keys)';
  if (by === 'key') return `${label || key}…`;
  return key;
}
