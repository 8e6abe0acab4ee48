// Revenue (what customers were charged), provider cost and margin, from the usage rows the price
// book priced: by UTC day as a chart and a table, by model, by the deployment that answered, and
// by organisation, team, member and key (whom each request was charged to, docs/organisations.md),
// over a date range (default: the last 30 UTC days).
import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api.ts';
import { StackedBars, type StackSeries, usdTick } from '../components/chart.tsx';
import { Card, Empty, ErrorNote, Loading, PageHeader, Table, Tiles } from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { big, grouped, usd, usdFloat, utcDate } from '../format.ts';
import { type Location, navigate } from '../router.ts';
import type { MarginBy, MarginReport, MarginRow } from '../wire-types.ts';

/** The tables under the chart: one grouping each, with what a row's first cell says. */
const GROUPED: {
  by: MarginBy;
  title: string;
  first: string;
  note?: string;
  /** A row of no such thing (a team's request has no member; a member's no team). */
  blank?: string;
  /** Where a row's id leads. */
  href?: (key: string) => string;
}[] = [
  { by: 'model', title: 'By model', first: 'Model' },
  {
    by: 'deployment',
    title: 'By deployment',
    first: 'Deployment',
    note: 'The deployment that answered (model/deployment), its provider cost at that deployment’s prices. Requests from before deployments, and those no deployment answered, are under the model’s id.',
  },
  {
    by: 'account',
    title: 'By organisation',
    first: 'Organisation',
    href: (id) => `/console/admin/accounts/${encodeURIComponent(id)}`,
  },
  {
    by: 'team',
    title: 'By team',
    first: 'Team',
    blank: '(no team)',
    note: 'The team whose key made the request; a member’s own keys belong to no team.',
  },
  { by: 'member', title: 'By member', first: 'Member', blank: '(a team’s key)' },
  { by: 'key', title: 'By key', first: 'Key' },
];

const rangeOf = (loc: Location) => ({ from: loc.query.get('from') ?? '', to: loc.query.get('to') ?? '' });
export const marginData = (loc: Location) => [
  api.margin(rangeOf(loc), 'day'),
  ...GROUPED.map((g) => api.margin(rangeOf(loc), g.by)),
];

export function Margin(props: { loc: Location }) {
  const range = rangeOf(props.loc);
  const byDay = useApi(api.margin(range, 'day'));
  return (
    <>
      <PageHeader title="Margin" />
      <PeriodForm range={range} />
      {byDay.error ? <ErrorNote error={byDay.error} /> : null}
      {byDay.loading && !byDay.data ? <Loading /> : null}
      {byDay.data ? <MarginByDay report={byDay.data} range={range} /> : null}
      {GROUPED.map((g) => (
        <Grouped key={g.by} grouping={g} range={range} />
      ))}
    </>
  );
}

/** One grouping's table, largest revenue first, with its total. */
function Grouped(props: { grouping: (typeof GROUPED)[number]; range: Range }) {
  const g = props.grouping;
  const { data, error, loading } = useApi(api.margin(props.range, g.by));
  return (
    <Card title={g.title}>
      {g.note ? <p class="muted small">{g.note}</p> : null}
      {error ? <ErrorNote error={error} /> : null}
      {loading && !data ? <Loading /> : null}
      {data && data.rows.length === 0 ? <Empty>No priced usage in this period.</Empty> : null}
      {data && data.rows.length > 0 ? (
        <MarginTable
          rows={[...data.rows].sort((a, b) => (big(b.revenue_nano) > big(a.revenue_nano) ? 1 : -1))}
          total={data.total}
          first={g.first}
          id={`margin-by-${g.first.toLowerCase()}`}
          {...(g.blank ? { blank: g.blank } : {})}
          {...(g.href ? { href: g.href } : {})}
        />
      ) : null}
    </Card>
  );
}

type Range = { from: string; to: string };

/** The period's dates, written into the address when shown. */
function PeriodForm(props: { range: Range }) {
  const { range } = props;
  const [draft, setDraft] = useState(range);
  useEffect(() => setDraft(range), [range.from, range.to]);
  const apply = (e: Event) => {
    e.preventDefault();
    navigate(`/console/admin/margin${query(draft)}`);
  };
  return (
    <Card>
      <form class="filters" onSubmit={apply} aria-label="Period">
        <label class="field">
          <span>From (UTC)</span>
          <input
            type="date"
            name="from"
            value={draft.from}
            onInput={(e) => setDraft({ ...draft, from: (e.target as HTMLInputElement).value })}
          />
        </label>
        <label class="field">
          <span>To (UTC, inclusive)</span>
          <input
            type="date"
            name="to"
            value={draft.to}
            onInput={(e) => setDraft({ ...draft, to: (e.target as HTMLInputElement).value })}
          />
        </label>
        <div class="filter-actions">
          <button type="submit" class="button button-primary">
            Show
          </button>
          {range.from || range.to ? (
            <a class="button" href="/console/admin/margin">
              Last 30 days
            </a>
          ) : null}
        </div>
      </form>
    </Card>
  );
}

/** The period's totals as tiles, and per day as bars (provider cost with the margin on top) and a table. */
function MarginByDay(props: { report: MarginReport; range: Range }) {
  const { report } = props;
  const total = report.total;
  const days = dayList(report, props.range);
  const series: StackSeries[] = [
    { label: 'Provider cost', values: days.map((d) => big(rowOf(report, d)?.provider_cost_nano)) },
    {
      label: 'Margin',
      values: days.map((d) => {
        const m = big(rowOf(report, d)?.margin_nano);
        return m > 0n ? m : 0n;
      }),
    },
  ];
  return (
    <>
      {total ? (
        <Tiles
          tiles={[
            {
              label: 'Revenue',
              value: usd(total.revenue_nano),
              figure: 'revenue',
              hint: `${grouped(total.requests)} requests`,
            },
            { label: 'Provider cost', value: usd(total.provider_cost_nano), figure: 'provider-cost' },
            {
              label: 'Margin',
              value: usd(total.margin_nano),
              figure: 'margin',
              hint: marginShare(total),
            },
          ]}
        />
      ) : null}
      <Card title="Revenue per day: provider cost and margin (UTC)">
        {report.rows.length === 0 ? (
          <Empty>No priced usage in this period.</Empty>
        ) : (
          <>
            <StackedBars
              label="Provider cost and margin per day"
              days={days}
              series={series}
              format={usd}
              toFloat={usdFloat}
              tick={usdTick}
            />
            <MarginTable
              rows={[...report.rows].sort((a, b) => b.key.localeCompare(a.key))}
              first="Day"
              id="margin-by-day"
            />
          </>
        )}
      </Card>
    </>
  );
}

function MarginTable(props: {
  rows: MarginRow[];
  total?: MarginRow | null;
  first: string;
  id: string;
  blank?: string;
  href?: (key: string) => string;
}) {
  return (
    <Table stack label={`Margin by ${props.first.toLowerCase()}`} id={props.id}>
      <thead>
        <tr>
          <th>{props.first}</th>
          <th class="num">Requests</th>
          <th class="num">Revenue</th>
          <th class="num">Provider cost</th>
          <th class="num">Margin</th>
          <th class="num">Share</th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((r) => (
          <tr key={r.key} data-key={r.key}>
            <td class="mono">
              {r.key === '' ? (
                <span class="muted">{props.blank ?? '—'}</span>
              ) : props.href ? (
                <a href={props.href(r.key)}>{r.key}</a>
              ) : (
                r.key
              )}
            </td>
            <td class="num">{grouped(r.requests)}</td>
            <td class="num nowrap" data-figure="revenue">
              {usd(r.revenue_nano)}
            </td>
            <td class="num nowrap" data-figure="provider-cost">
              {usd(r.provider_cost_nano)}
            </td>
            <td class={big(r.margin_nano) < 0n ? 'num nowrap negative' : 'num nowrap'} data-figure="margin">
              {usd(r.margin_nano)}
            </td>
            <td class="num">{marginShare(r)}</td>
          </tr>
        ))}
      </tbody>
      {props.total ? (
        <tfoot>
          <tr>
            <th>Total</th>
            <td class="num">{grouped(props.total.requests)}</td>
            <td class="num nowrap">{usd(props.total.revenue_nano)}</td>
            <td class="num nowrap">{usd(props.total.provider_cost_nano)}</td>
            <td class="num nowrap">{usd(props.total.margin_nano)}</td>
            <td class="num">{marginShare(props.total)}</td>
          </tr>
        </tfoot>
      ) : null}
    </Table>
  );
}

/** Margin as a share of revenue, to 0.1% (integer arithmetic, rounded half away from zero). */
function marginShare(r: MarginRow): string {
  const revenue = big(r.revenue_nano);
  if (revenue === 0n) return '—';
  const tenths = (big(r.margin_nano) * 2000n) / revenue; // in 1/20 of a percent... halved below
  const rounded = tenths >= 0n ? (tenths + 1n) / 2n : (tenths - 1n) / 2n;
  const sign = rounded < 0n ? '−' : '';
  const abs = rounded < 0n ? -rounded : rounded;
  return `${sign}${abs / 10n}.${abs % 10n}%`;
}

const rowOf = (report: MarginReport, day: string) => report.rows.find((r) => r.key === day);

/** Every UTC day of the period (the answer's from/to, else the last 30 days), plus any day a row names. */
function dayList(report: MarginReport, range: Range): string[] {
  // The answer's `to` is exclusive (the next day's 00:00 UTC): its last day is the one before.
  const lastOf = (iso: string | undefined) =>
    iso && Number.isFinite(Date.parse(iso)) ? new Date(Date.parse(iso) - 1).toISOString().slice(0, 10) : '';
  const first = (report.from ?? range.from).slice(0, 10) || utcDate(-29);
  const last = range.to || lastOf(report.to) || utcDate(0);
  const out = new Set<string>();
  let t = Date.parse(`${first}T00:00:00Z`);
  const end = Date.parse(`${last}T00:00:00Z`);
  for (let guard = 0; Number.isFinite(t) && t <= end && guard < 400; guard++, t += 86_400_000)
    out.add(new Date(t).toISOString().slice(0, 10));
  for (const r of report.rows) out.add(r.key);
  return [...out].sort();
}
