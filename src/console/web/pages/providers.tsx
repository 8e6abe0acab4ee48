// The providers the gateway calls and the models' deployments (docs/providers.md): each provider
// with its base URL, its credential's form and state on this instance (never the credential) and
// a test call; each model's routing and deployments with their live state on the instance that
// answers (health, recent error rate, median latency, limit use this minute), asked again every
// few seconds while the page is shown. Changes are made with the CLI or the price book.
import { useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api } from '../api.ts';
import { Badge, Card, Empty, ErrorNote, Loading, PageHeader, Segmented, Table } from '../components/ui.tsx';
import { useApi, useLive } from '../data.ts';
import { grouped, time } from '../format.ts';
import type { Location } from '../router.ts';
import type { DeploymentRow, ModelDeployments, ProviderCredential, ProviderRow } from '../wire-types.ts';

/** How often the deployments' live state is asked again. */
export const REFRESH_MS = 5_000;

export const providersData = (_loc: Location) => [api.providers(), api.deployments()];

export function Providers() {
  const providers = useApi(api.providers());
  return (
    <>
      <PageHeader title="Providers" />
      <p class="muted lead">
        The endpoints the gateway calls, each with its credential as this instance sees it (its form and state, never
        the credential), and each model’s deployments with their live state on this instance. They are price-book data:
        change them with the operator CLI (<code>providers …</code>) or the price book.
      </p>
      <Card title="Providers">
        {providers.error ? <ErrorNote error={providers.error} /> : null}
        {providers.loading && !providers.data ? <Loading /> : null}
        {providers.data && providers.data.providers.length === 0 ? <Empty>The book has no providers.</Empty> : null}
        {providers.data && providers.data.providers.length > 0 ? (
          <ProviderTable providers={providers.data.providers} />
        ) : null}
      </Card>
      <Deployments />
    </>
  );
}

function ProviderTable(props: { providers: ProviderRow[] }) {
  return (
    <Table stack label="Providers" id="provider-rows">
      <thead>
        <tr>
          <th>Provider</th>
          <th>Dialect</th>
          <th>Base URL</th>
          <th>Credential</th>
          <th class="num">Models</th>
          <th>Connection</th>
        </tr>
      </thead>
      <tbody>
        {props.providers.map((p) => (
          <ProviderLine key={p.id} provider={p} />
        ))}
      </tbody>
    </Table>
  );
}

function ProviderLine(props: { provider: ProviderRow }) {
  const p = props.provider;
  const test = useAction(() => api.testProvider(p.id));
  const moved = p.served_base_url !== '' && p.served_base_url !== p.base_url;
  return (
    <tr data-provider={p.id}>
      <td class="mono">{p.id}</td>
      <td class="mono">
        {p.dialect}
        {p.api_version ? <div class="muted small">api-version {p.api_version}</div> : null}
      </td>
      <td>
        <span class="mono small url">{p.served_base_url || p.base_url}</span>
        {moved ? <div class="muted small url">book: {p.base_url}</div> : null}
      </td>
      <td data-figure="credential">
        <CredentialState credential={p.credential} />
      </td>
      <td class="num" data-figure="models">
        {p.served_models === p.models ? grouped(p.models) : `${grouped(p.served_models)} of ${grouped(p.models)}`}
        {p.served_models !== p.models ? <div class="muted small nowrap">served here</div> : null}
      </td>
      <td class="connection">
        <button type="button" class="button button-small" onClick={() => test.run()} disabled={test.busy}>
          {test.busy ? 'Testing…' : 'Test connection'}
        </button>
        <div class="test-result" aria-live="polite">
          {test.error ? <ErrorNote error={test.error} /> : null}
          {test.done ? (
            <div data-figure="test-result" data-ok={String(test.done.ok)}>
              <Badge tone={test.done.ok ? 'ok' : 'error'}>{test.done.ok ? 'ok' : 'failed'}</Badge>{' '}
              <span>{test.done.message}</span>
              {test.done.latency_ms > 0 || test.done.http_status > 0 ? (
                <span class="muted"> · {grouped(test.done.latency_ms)} ms</span>
              ) : null}
              {test.done.url ? <div class="muted small mono url">GET {test.done.url}</div> : null}
            </div>
          ) : null}
        </div>
      </td>
    </tr>
  );
}

/** "sealed", "env OPENAI_KEY", "setting", "none" or "unreadable", coloured by whether it can be used here. */
function CredentialState(props: { credential: ProviderCredential }) {
  const c = props.credential;
  const text = c.unreadable ? 'unreadable' : c.form === 'env' ? `env ${c.env_name}` : c.form;
  const tone = c.usable ? 'ok' : c.unreadable ? 'error' : c.form === 'none' ? 'neutral' : 'warn';
  const stored = c.form === 'sealed' || c.form === 'env';
  return (
    <>
      <Badge tone={tone}>{text}</Badge>
      {c.form === 'setting' ? <div class="muted small">this instance’s API key setting</div> : null}
      {stored ? (
        <div class="muted small">
          v{c.version}
          {c.source ? ` by ${c.source}` : ''}
          {c.updated_at ? `, ${time(c.updated_at)} UTC` : ''}
        </div>
      ) : null}
      {c.problem ? <div class="small problem">{c.problem}</div> : null}
    </>
  );
}

function Deployments() {
  const live = useLive(api.deployments(), REFRESH_MS);
  const [all, setAll] = useState(false);
  const models = live.data?.models ?? [];
  const shown = all ? models : models.filter((m) => m.deployments.length > 1);
  return (
    <Card
      title="Deployments"
      id="deployments"
      actions={
        <div class="page-actions">
          <Segmented
            label="Which models"
            options={[
              { value: 'several', text: 'Several deployments' },
              { value: 'all', text: 'All models' },
            ]}
            value={all ? 'all' : 'several'}
            onChange={(v) => setAll(v === 'all')}
          />
          <button type="button" class="button button-small" onClick={live.reload}>
            Refresh
          </button>
        </div>
      }
    >
      <p class="muted small" id="deployments-updated">
        Live state on this gateway instance, asked again every {REFRESH_MS / 1000} s
        {live.at ? `; last at ${time(live.at.toISOString()).slice(11)} UTC` : ''}.
      </p>
      {live.error ? <ErrorNote error={live.error} /> : null}
      {live.loading && !live.data ? <Loading /> : null}
      {live.data && shown.length === 0 ? (
        <Empty>
          {all ? 'The book has no models.' : 'No model has more than one deployment: choose All models to see each.'}
        </Empty>
      ) : null}
      {shown.length > 0 ? <DeploymentTable models={shown} /> : null}
    </Card>
  );
}

const COLUMNS = 9;

function DeploymentTable(props: { models: ModelDeployments[] }) {
  return (
    <Table label="Deployments by model" id="deployment-rows">
      <thead>
        <tr>
          <th>Deployment</th>
          <th>Provider</th>
          <th>Upstream model</th>
          <th class="num">Weight</th>
          <th class="num">Priority</th>
          <th>State</th>
          <th class="num">Error rate</th>
          <th class="num">p50 latency</th>
          <th>Limit use this minute</th>
        </tr>
      </thead>
      {props.models.map((m) => (
        <tbody key={m.model_id} data-model={m.model_id}>
          <tr class="group-row">
            <th colSpan={COLUMNS} scope="rowgroup">
              <span class="mono">{m.model_id}</span> <span class="muted">·</span>{' '}
              <span data-figure="strategy">{m.strategy}</span> <span class="muted">routing</span>
              {!m.enabled ? (
                <>
                  {' '}
                  <Badge tone="neutral">disabled</Badge>
                </>
              ) : !m.available ? (
                <>
                  {' '}
                  <Badge tone="warn">not available here</Badge>
                </>
              ) : null}
            </th>
          </tr>
          {m.deployments.map((d) => (
            <DeploymentLine key={d.key} deployment={d} />
          ))}
        </tbody>
      ))}
    </Table>
  );
}

function DeploymentLine(props: { deployment: DeploymentRow }) {
  const d = props.deployment;
  return (
    <tr data-deployment={d.key} data-provider={d.provider} data-admission={d.admission}>
      <td class="mono">
        {d.id}
        {d.from_setting ? <div class="muted small">from a setting</div> : null}
        {d.own_prices ? <div class="muted small">own prices</div> : null}
      </td>
      <td class="mono">{d.provider}</td>
      <td class="mono">{d.upstream_id}</td>
      <td class="num">{d.weight}</td>
      <td class="num">{d.priority}</td>
      <td data-figure="state">
        <DeploymentState deployment={d} />
      </td>
      <td class="num nowrap" data-figure="error-rate">
        {d.error_rate === null ? '—' : percentOf(d.error_rate)}
      </td>
      <td class="num nowrap" data-figure="p50">
        {d.p50_latency_ms === null ? '—' : `${grouped(d.p50_latency_ms)} ms`}
      </td>
      <td class="nowrap" data-figure="limits">
        <LimitUse deployment={d} />
      </td>
    </tr>
  );
}

/** Healthy, trial, or cooling until a time (UTC); and whether this instance can call it at all. */
function DeploymentState(props: { deployment: DeploymentRow }) {
  const d = props.deployment;
  const badge =
    d.admission === 'cooling' ? (
      <Badge tone="error">
        cooling until {d.cool_until ? `${time(d.cool_until).slice(11)} UTC` : 'further notice'}
      </Badge>
    ) : d.admission === 'trial' ? (
      <Badge tone="warn">trial</Badge>
    ) : (
      <Badge tone="ok">healthy</Badge>
    );
  return (
    <>
      {d.served ? badge : <Badge tone="neutral">not served here</Badge>}
      {d.admission === 'trial' ? <div class="muted small">one request let through</div> : null}
      {d.consecutive_fails > 0 ? (
        <div class="muted small">
          {d.consecutive_fails} failure{d.consecutive_fails === 1 ? '' : 's'} in a row
        </div>
      ) : null}
      {d.cooldowns > 0 ? (
        <div class="muted small">
          {d.cooldowns} cooldown{d.cooldowns === 1 ? '' : 's'}
        </div>
      ) : null}
    </>
  );
}

/** "12 / 500 rpm" and "3,400 / 200,000 tpm": this minute's window on every instance. */
function LimitUse(props: { deployment: DeploymentRow }) {
  const d = props.deployment;
  if (d.rpm === 0 && d.tpm === 0 && d.concurrency === 0) return <span class="muted">no limits</span>;
  const line = (used: number, limit: number, unit: string) => (
    <div class={used >= limit * 0.9 ? 'near-limit' : ''}>
      {grouped(used)} / {grouped(limit)} {unit}
    </div>
  );
  return (
    <>
      {d.rpm > 0 ? line(d.window_requests, d.rpm, 'rpm') : null}
      {d.tpm > 0 ? line(d.window_tokens, d.tpm, 'tpm') : null}
      {d.concurrency > 0 ? line(d.in_flight, d.concurrency, 'in flight') : null}
    </>
  );
}

/** 0.25 -> "25%", 1/3 -> "33.3%" (a rate shown, not money: a float is fine). */
function percentOf(rate: number): string {
  const tenths = Math.round(rate * 1000);
  return `${tenths / 10}%`;
}
