// A key holder's first page: balance, held and available (GetBalance's figures), then spend and
// tokens per UTC day by model for the last 30 or 90 days, as stacked bars and as tables.
import { useMemo } from 'preact/hooks';
import { api } from '../api.ts';
import { compact, StackedBars, type StackSeries, usdTick } from '../components/chart.tsx';
import { Card, Empty, ErrorNote, Loading, PageHeader, Segmented, Table, Tiles } from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { big, grouped, usd, usdFloat } from '../format.ts';
import { type Location, navigate } from '../router.ts';
import type { DailyUsage, DailyUsageRow } from '../wire-types.ts';

export const daysOf = (loc: Location): 30 | 90 => (loc.query.get('days') === '90' ? 90 : 30);
export const overviewData = (loc: Location) => [api.balance(), api.dailyUsage('own', daysOf(loc))];

/** At most this many models get a colour of their own; the rest are one "Other models" band. */
const MAX_SERIES = 8;

export function Overview(props: { loc: Location }) {
  const days = daysOf(props.loc);
  const balance = useApi(api.balance());
  const daily = useApi(api.dailyUsage('own', days));
  return (
    <>
      <PageHeader title="Overview" />
      {balance.error ? <ErrorNote error={balance.error} /> : null}
      {balance.data ? (
        <Tiles
          tiles={[
            { label: 'Balance', value: usd(balance.data.balance_nano), figure: 'balance' },
            {
              label: 'Held',
              value: usd(balance.data.held_nano),
              hint: 'Reserved for requests in flight',
              figure: 'held',
            },
            { label: 'Available', value: usd(balance.data.available_nano), figure: 'available' },
          ]}
        />
      ) : balance.loading ? (
        <Loading />
      ) : null}
      <UsageCharts
        daily={daily.data}
        error={daily.error}
        days={days}
        onDays={(d) => navigate(d === 30 ? '/console' : `/console?days=${d}`, true)}
      />
    </>
  );
}

export interface DayTotals {
  day: string;
  requests: bigint;
  input: bigint;
  output: bigint;
  cost: bigint;
}

/** The charts and tables of daily usage (also on the operator's account page). */
export function UsageCharts(props: {
  daily: DailyUsage | undefined;
  error: unknown;
  days: number;
  onDays: (d: 30 | 90) => void;
}) {
  const shaped = useMemo(() => (props.daily ? shape(props.daily.rows, props.days) : undefined), [props.daily]);
  const toggle = (
    <Segmented
      label="Period"
      value={props.days}
      options={[
        { value: 30, text: '30 days' },
        { value: 90, text: '90 days' },
      ]}
      onChange={(d) => props.onDays(d as 30 | 90)}
    />
  );
  return (
    <>
      <Card title={`Spend per day, by model (last ${props.days} days, UTC)`} actions={toggle}>
        {props.error ? <ErrorNote error={props.error} /> : null}
        {!shaped ? (
          props.error ? null : (
            <Loading />
          )
        ) : shaped.byDay.length === 0 ? (
          <Empty>No requests in the last {props.days} days.</Empty>
        ) : (
          <StackedBars
            label={`Spend per day by model, last ${props.days} days`}
            days={shaped.days}
            series={shaped.cost}
            format={usd}
            toFloat={usdFloat}
            tick={usdTick}
          />
        )}
      </Card>
      {shaped && shaped.byDay.length > 0 ? (
        <>
          <Card title="Tokens per day, by model (input + output)">
            <StackedBars
              label={`Tokens per day by model, last ${props.days} days`}
              days={shaped.days}
              series={shaped.tokens}
              format={(v) => `${grouped(v)} tokens`}
              toFloat={Number}
              tick={compact}
            />
          </Card>
          <UsageTables shaped={shaped} />
        </>
      ) : null}
    </>
  );
}

/** The period's figures as tables: by model (with the total) and by day. */
function UsageTables(props: { shaped: Shaped }) {
  const { shaped } = props;
  return (
    <div class="columns">
      <Card title="By model">
        <Table stack label="Usage by model" id="usage-by-model">
          <thead>
            <tr>
              <th>Model</th>
              <th class="num">Requests</th>
              <th class="num">Input tokens</th>
              <th class="num">Output tokens</th>
              <th class="num">Spend</th>
            </tr>
          </thead>
          <tbody>
            {shaped.byModel.map((m) => (
              <tr key={m.model} data-model={m.model}>
                <td class="mono">{m.model}</td>
                <td class="num">{grouped(m.requests)}</td>
                <td class="num">{grouped(m.input)}</td>
                <td class="num">{grouped(m.output)}</td>
                <td class="num" data-figure="cost">
                  {usd(m.cost)}
                </td>
              </tr>
            ))}
          </tbody>
          <tfoot>
            <tr>
              <th>Total</th>
              <td class="num">{grouped(shaped.total.requests)}</td>
              <td class="num">{grouped(shaped.total.input)}</td>
              <td class="num">{grouped(shaped.total.output)}</td>
              <td class="num" data-figure="total-cost">
                {usd(shaped.total.cost)}
              </td>
            </tr>
          </tfoot>
        </Table>
      </Card>
      <Card title="By day">
        <Table label="Usage by day" id="usage-by-day">
          <thead>
            <tr>
              <th>Day (UTC)</th>
              <th class="num">Requests</th>
              <th class="num">Tokens</th>
              <th class="num">Spend</th>
            </tr>
          </thead>
          <tbody>
            {shaped.byDay.map((d) => (
              <tr key={d.day} data-day={d.day}>
                <td class="nowrap">{d.day}</td>
                <td class="num">{grouped(d.requests)}</td>
                <td class="num">{grouped(d.input + d.output)}</td>
                <td class="num" data-figure="cost">
                  {usd(d.cost)}
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      </Card>
    </div>
  );
}

interface ModelTotals {
  model: string;
  requests: bigint;
  input: bigint;
  output: bigint;
  cost: bigint;
}

type Shaped = ReturnType<typeof shape>;

/** The API's rows (day × model) as the charts' series and the tables' totals. */
function shape(rows: DailyUsageRow[], days: number) {
  // Every day of the period, so quiet days show as gaps, plus any day a row names.
  const daySet = new Set<string>();
  const today = Date.parse(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`);
  for (let i = days - 1; i >= 0; i--) daySet.add(new Date(today - i * 86_400_000).toISOString().slice(0, 10));
  for (const r of rows) daySet.add(r.day.slice(0, 10));
  const dayList = [...daySet].sort();
  const dayIndex = new Map(dayList.map((d, i) => [d, i]));

  const models = new Map<string, ModelTotals>();
  const byDay = new Map<string, DayTotals>();
  const total: ModelTotals = { model: '', requests: 0n, input: 0n, output: 0n, cost: 0n };
  for (const r of rows) {
    const m = models.get(r.model) ?? { model: r.model, requests: 0n, input: 0n, output: 0n, cost: 0n };
    const d = byDay.get(r.day.slice(0, 10)) ?? {
      day: r.day.slice(0, 10),
      requests: 0n,
      input: 0n,
      output: 0n,
      cost: 0n,
    };
    for (const t of [m, d, total]) {
      t.requests += big(r.requests);
      t.input += big(r.input_tokens);
      t.output += big(r.output_tokens);
      t.cost += big(r.cost_nano);
    }
    models.set(r.model, m);
    byDay.set(d.day, d);
  }
  const byModel = [...models.values()].sort((a, b) =>
    b.cost === a.cost ? a.model.localeCompare(b.model) : b.cost > a.cost ? 1 : -1,
  );
  // The costliest models each get a band; the rest share one.
  const named = byModel.slice(0, byModel.length > MAX_SERIES ? MAX_SERIES - 1 : MAX_SERIES).map((m) => m.model);
  const bandOf = (model: string) => (named.includes(model) ? model : 'Other models');
  const bands = [...named, ...(byModel.length > named.length ? ['Other models'] : [])];
  const cost: StackSeries[] = bands.map((label) => ({ label, values: dayList.map(() => 0n) }));
  const tokens: StackSeries[] = bands.map((label) => ({ label, values: dayList.map(() => 0n) }));
  for (const r of rows) {
    const b = bands.indexOf(bandOf(r.model));
    const d = dayIndex.get(r.day.slice(0, 10))!;
    cost[b]!.values[d]! += big(r.cost_nano);
    tokens[b]!.values[d]! += big(r.input_tokens) + big(r.output_tokens);
  }
  return {
    days: dayList,
    cost,
    tokens,
    byModel,
    byDay: [...byDay.values()].sort((a, b) => b.day.localeCompare(a.day)),
    total,
  };
}
