// The request log: one row per request (time, route, model asked for and served, tokens, cost,
// status, latency, request id, and for the operator the deployment that answered with the attempts
// before it, the provider's cost, the margin and the request's trace), filtered by model,
// route, status and UTC date, newest first, in keyset pages (the server's cursor), and the same
// filters as a CSV download. The filters live in the address (?model=…&status=…), so a filtered
// view can be reloaded and shared.
import { Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { type AccountScope, api, query } from '../api.ts';
import { Badge, Card, PagedRows, PageHeader, Table } from '../components/ui.tsx';
import { useApi, usePaged } from '../data.ts';
import { attemptWords, big, deploymentName, grouped, time, usd } from '../format.ts';
import { type Location, navigate } from '../router.ts';
import type { RequestFilters, RequestRow } from '../wire-types.ts';

export const ROUTES = [
  '/v1/chat/completions',
  '/v1/messages',
  '/v1/responses',
  '/v1/embeddings',
  '/v1/images/generations',
  '/v1/images/edits',
  '/v1/audio/transcriptions',
  '/v1/audio/speech',
  '/v1/videos',
];

export const FILTER_NAMES: readonly (keyof RequestFilters)[] = ['model', 'route', 'status', 'from', 'to'];

export function filtersOf(loc: Location): RequestFilters {
  const f = {} as RequestFilters;
  for (const name of FILTER_NAMES) f[name] = loc.query.get(name) ?? '';
  return f;
}

export const requestsData = (loc: Location) => [api.requests('own', filtersOf(loc)), api.models()];

export function Requests(props: { loc: Location }) {
  const models = useApi(api.models());
  return (
    <>
      <PageHeader title="Requests" />
      <RequestLog
        scope="own"
        loc={props.loc}
        pagePath="/console/requests"
        models={models.data?.models.map((m) => m.id) ?? []}
      />
    </>
  );
}

/** Filters, the table, the pager and the CSV download; also on the operator's account page. */
export function RequestLog(props: {
  /** Whose requests: the session's own, or an account's. */
  scope: AccountScope;
  loc: Location;
  /** The page's own path, where filters are written into the address. */
  pagePath: string;
  models: string[];
  /** Query parameters of the page to keep when filters change. */
  keep?: Record<string, string>;
}) {
  const filters = filtersOf(props.loc);
  const filterKey = JSON.stringify(filters);
  const list = usePaged((cursor) => api.requests(props.scope, filters, cursor));
  const [draft, setDraft] = useState<RequestFilters>(filters);
  useEffect(() => setDraft(filters), [filterKey]);

  const apply = (e: Event) => {
    e.preventDefault();
    navigate(`${props.pagePath}${query({ ...props.keep, ...draft })}`);
  };
  const clear = () => navigate(`${props.pagePath}${query({ ...props.keep })}`);
  const anyFilter = FILTER_NAMES.some((n) => filters[n] !== '');
  const field = (name: keyof RequestFilters): FieldProps => ({
    name,
    value: draft[name],
    onInput: (e: Event) => setDraft({ ...draft, [name]: (e.target as HTMLInputElement).value }),
  });

  return (
    <>
      <Card>
        <form class="filters" onSubmit={apply} aria-label="Filters">
          <FilterFields field={field} models={props.models} />
          <div class="filter-actions">
            <button type="submit" class="button button-primary">
              Apply
            </button>
            {anyFilter ? (
              <button type="button" class="button" onClick={clear}>
                Clear
              </button>
            ) : null}
            <a class="button" id="csv-link" href={api.requestsCsvHref(props.scope, filters)} download>
              Download CSV
            </a>
          </div>
        </form>
      </Card>
      <Card>
        <PagedRows list={list} empty={anyFilter ? 'No request matches these filters.' : 'No requests yet.'}>
          {(rows) => <RequestTable rows={rows} />}
        </PagedRows>
      </Card>
    </>
  );
}

/** What a filter's input or select takes: its name, its draft value and the edit. */
type FieldProps = { name: keyof RequestFilters; value: string; onInput: (e: Event) => void };

/** The filters' inputs: model (with the names the page knows), route, status, and the UTC dates. */
function FilterFields(props: { field: (name: keyof RequestFilters) => FieldProps; models: string[] }) {
  const { field } = props;
  return (
    <>
      <label class="field field-span">
        <span>Model</span>
        <input {...field('model')} list="model-names" placeholder="Any model" autocomplete="off" />
        <datalist id="model-names">
          {props.models.map((m) => (
            <option key={m} value={m} />
          ))}
        </datalist>
      </label>
      <label class="field">
        <span>Route</span>
        <select {...field('route')}>
          <option value="">Any route</option>
          {ROUTES.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
      </label>
      <label class="field">
        <span>Status</span>
        <select {...field('status')}>
          <option value="">Any status</option>
          <option value="ok">Succeeded</option>
          <option value="error">Failed</option>
          {['400', '402', '429', '499', '500', '502', '503', '504'].map((s) => (
            <option key={s} value={s}>
              HTTP {s}
            </option>
          ))}
        </select>
      </label>
      <label class="field">
        <span>From (UTC)</span>
        <input type="date" {...field('from')} />
      </label>
      <label class="field">
        <span>To (UTC, inclusive)</span>
        <input type="date" {...field('to')} />
      </label>
    </>
  );
}

export function RequestTable(props: { rows: RequestRow[] }) {
  // An organisation's rows say whom each request was charged to; the operator's, where each was
  // served and what it earned (in the room of the latency, which goes under the status).
  const charged = props.rows.some((r) => r.member_id !== undefined);
  const operator = props.rows.some((r) => r.deployment !== undefined);
  return (
    <Table stack label="Requests" id="request-rows">
      <thead>
        <tr>
          <th>Time (UTC)</th>
          {charged ? <th>Charged to</th> : null}
          <th>Route</th>
          <th>Model</th>
          {operator ? <th>Deployment</th> : null}
          <th class="num">Input</th>
          <th class="num">Output</th>
          <th class="num">Cost</th>
          <th>Status</th>
          {operator ? null : <th class="num">Latency</th>}
          <th>Request id</th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((r) => (
          <RequestLine key={r.request_id} row={r} charged={charged} operator={operator} />
        ))}
      </tbody>
    </Table>
  );
}

/**
 * One request's row. The operator's has its deployment (and the attempts before it), under the
 * charge what the provider bills and the margin, and the latency under the status.
 */
function RequestLine(props: { row: RequestRow; charged: boolean; operator: boolean }) {
  const r = props.row;
  const latency = `${grouped(r.latency_ms)} ms`;
  return (
    <tr data-request-id={r.request_id}>
      {/* The operator's time may take two lines: the room is the money's. */}
      <td class={props.operator ? undefined : 'nowrap'}>{time(r.created_at)}</td>
      {props.charged ? (
        <td data-charged-to={r.member_id || r.team_id}>
          {r.team_id ? `Team ${r.team_name}` : r.member_name || '—'}
          <div class="muted small mono">{r.key_prefix}…</div>
        </td>
      ) : null}
      <td class="mono nowrap">{r.route}</td>
      <td class="mono">
        {r.model}
        {r.requested_model && r.requested_model !== r.model ? (
          <div class="muted small">asked for {r.requested_model}</div>
        ) : null}
      </td>
      {props.operator ? <DeploymentOf row={r} /> : null}
      <td class="num">
        {grouped(r.input_tokens)}
        {big(r.cached_tokens) > 0n ? <div class="muted small">{grouped(r.cached_tokens)} cached</div> : null}
      </td>
      <td class="num">{grouped(r.output_tokens)}</td>
      {props.operator ? (
        <MoneyOf row={r} />
      ) : (
        <td class="num nowrap" data-figure="cost">
          {usd(r.cost_nano)}
        </td>
      )}
      <td>
        <Badge tone={r.status === 'ok' ? 'ok' : 'error'}>
          {r.status === 'ok' ? 'ok' : r.status}
          {Number(r.http_status) ? ` ${r.http_status}` : ''}
        </Badge>
        {props.operator ? <div class="muted small nowrap">{latency}</div> : null}
      </td>
      {props.operator ? null : <td class="num nowrap">{latency}</td>}
      <td class="mono small">
        {r.request_id}
        <TraceOf row={r} />
      </td>
    </tr>
  );
}

/** The operator's money of a request: the charge, and under it what the provider bills and the margin (red for a loss). */
function MoneyOf(props: { row: RequestRow }) {
  const r = props.row;
  const loss = big(r.margin_nano) < 0n;
  return (
    <td class="num nowrap">
      <div data-figure="cost">{usd(r.cost_nano)}</div>
      <div class="muted small">
        provider <span data-figure="provider-cost">{usd(r.provider_cost_nano ?? '0')}</span>
      </div>
      <div class={loss ? 'small negative' : 'muted small'}>
        margin <span data-figure="margin">{usd(r.margin_nano ?? '0')}</span>
      </div>
    </td>
  );
}

/**
 * The deployment that answered (named within its model, as the book names it), and under it the
 * attempts when there was more than the one: "plain 429 › third ok", each attempt kept whole when
 * the line wraps. A request no deployment answered shows "—" with the attempts that failed.
 */
function DeploymentOf(props: { row: RequestRow }) {
  const r = props.row;
  const attempts = r.attempts ?? [];
  const omitted = r.attempts_omitted ?? 0;
  const words = attemptWords(attempts, omitted, r.model);
  return (
    <td class="deployment" data-deployment={r.deployment ?? ''}>
      <span class="mono">{r.deployment ? deploymentName(r.deployment, r.model) : '—'}</span>
      {attempts.length > 1 || omitted > 0 ? (
        <div class="muted small attempts" data-attempts={attempts.length + omitted}>
          {words.map((w, i) => (
            <Fragment key={`${i}-${w}`}>
              {i > 0 ? ' › ' : null}
              <span class="attempt">{w}</span>
            </Fragment>
          ))}
        </div>
      ) : null}
    </td>
  );
}

/**
 * The request's trace, on the operator's rows that have one: a link to it in the trace UI (a new
 * tab; the address is the server's, built from TRACE_UI_URL), or its id when the gateway knows no
 * UI address. Nothing on a key holder's rows, which carry no trace.
 */
function TraceOf(props: { row: RequestRow }) {
  const { trace_id: id, trace_url: url } = props.row;
  if (!id) return null;
  // The server writes only http(s) addresses (TRACE_UI_URL must be one); nothing else is linked.
  if (url && /^https?:\/\//i.test(url))
    return (
      <div>
        <a
          href={url}
          target="_blank"
          rel="noopener noreferrer"
          class="external"
          title={`Trace ${id}`}
          data-trace-id={id}
        >
          Trace
        </a>
      </div>
    );
  return (
    <div class="muted" data-trace-id={id}>
      trace {id}
    </div>
  );
}
