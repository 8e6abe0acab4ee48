// The Providers page's deployments (docs/providers.md#deployments): each model's routing and
// deployments with their live state on the instance that answers, asked again every few seconds
// while the page is shown, and what the operator does to them (deployment-actions.tsx): edit one,
// drain, disable or enable it, end its cooldown, add one to a model.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Badge, Card, Empty, ErrorNote, Loading, Note, Segmented, Table } from '../components/ui.tsx';
import { useApi, useLive } from '../data.ts';
import { grouped, time } from '../format.ts';
import type { DeploymentRow, ModelDeployments } from '../wire-types.ts';
import { type DeploymentAction, DeploymentActionDialogs } from './deployment-actions.tsx';

/** How often the deployments' live state is asked again. */
export const REFRESH_MS = 5_000;

/** The answers a deployment's error rate counts: its last this many on the instance (the gateway's RECENT_ANSWERS). */
const RECENT_ANSWERS = 50;

export function Deployments(props: { onBookChanged: () => void }) {
  const live = useLive(api.deployments(), REFRESH_MS);
  const providers = useApi(api.providers());
  const [all, setAll] = useState(false);
  const [action, setAction] = useState<DeploymentAction | undefined>();
  const [outcome, setOutcome] = useState<string | undefined>();
  const models = live.data?.models ?? [];
  const shown = all ? models : models.filter((m) => m.deployments.length > 1);
  const done = (text: string, bookChanged: boolean) => {
    setAction(undefined);
    setOutcome(text);
    live.reload();
    if (bookChanged) props.onBookChanged();
  };
  return (
    <Card title="Deployments" id="deployments" actions={<DeploymentsHead all={all} setAll={setAll} live={live} />}>
      <p class="muted small" id="deployments-updated">
        Live state on this gateway instance, asked again every {REFRESH_MS / 1000} s
        {live.at ? `; last at ${time(live.at.toISOString()).slice(11)} UTC` : ''}. Error rate: the failed answers (429,
        5xx, timeouts, refused connections) among a deployment’s last {RECENT_ANSWERS} answers here, however old.
      </p>
      {outcome ? <Note kind="ok">{outcome}</Note> : null}
      {live.error ? <ErrorNote error={live.error} /> : null}
      {live.loading && !live.data ? <Loading /> : null}
      {live.data && shown.length === 0 ? (
        <Empty>
          {all ? 'The book has no models.' : 'No model has more than one deployment: choose All models to see each.'}
        </Empty>
      ) : null}
      {shown.length > 0 ? <DeploymentTable models={shown} onAction={setAction} /> : null}
      <DeploymentActionDialogs
        action={action}
        providers={providers.data?.providers ?? []}
        onCancel={() => setAction(undefined)}
        onDone={done}
      />
    </Card>
  );
}

function DeploymentsHead(props: { all: boolean; setAll: (all: boolean) => void; live: { reload: () => void } }) {
  return (
    <div class="page-actions">
      <Segmented
        label="Which models"
        options={[
          { value: 'several', text: 'Several deployments' },
          { value: 'all', text: 'All models' },
        ]}
        value={props.all ? 'all' : 'several'}
        onChange={(v) => props.setAll(v === 'all')}
      />
      <button type="button" class="button button-small" onClick={props.live.reload}>
        Refresh
      </button>
    </div>
  );
}

const COLUMNS = 10;

function DeploymentTable(props: { models: ModelDeployments[]; onAction: (a: DeploymentAction) => void }) {
  return (
    <Table label="Deployments by model" id="deployment-rows">
      <thead>
        <tr>
          <th>Deployment</th>
          <th>Provider</th>
          <th class="th-wrap">Upstream model</th>
          <th class="num">Weight</th>
          <th class="num">Priority</th>
          <th>State</th>
          <th class="num th-wrap">Error rate (last {RECENT_ANSWERS} answers)</th>
          <th class="num th-wrap">p50 latency</th>
          <th class="th-wrap">Limit use this minute</th>
          <th>Actions</th>
        </tr>
      </thead>
      {props.models.map((m) => (
        <tbody key={m.model_id} data-model={m.model_id}>
          <tr class="group-row">
            <th colSpan={COLUMNS} scope="rowgroup">
              <div class="group-head">
                <span>
                  <span class="mono">{m.model_id}</span> <span class="muted">·</span>{' '}
                  <span data-figure="strategy">{m.strategy}</span> <span class="muted">routing</span>
                  <ModelBadge model={m} />
                </span>
                <button
                  type="button"
                  class="button button-small"
                  onClick={() => props.onAction({ kind: 'add', model: m.model_id })}
                >
                  Add deployment…
                </button>
              </div>
            </th>
          </tr>
          {m.deployments.map((d) => (
            <DeploymentLine key={d.key} model={m.model_id} deployment={d} onAction={props.onAction} />
          ))}
        </tbody>
      ))}
    </Table>
  );
}

function ModelBadge(props: { model: ModelDeployments }) {
  const m = props.model;
  if (!m.enabled)
    return (
      <>
        {' '}
        <Badge tone="neutral">disabled</Badge>
      </>
    );
  if (!m.available)
    return (
      <>
        {' '}
        <Badge tone="warn">not available here</Badge>
      </>
    );
  return null;
}

function DeploymentLine(props: { model: string; deployment: DeploymentRow; onAction: (a: DeploymentAction) => void }) {
  const d = props.deployment;
  const act = (kind: DeploymentAction['kind']) => () => props.onAction({ kind, model: props.model, deployment: d });
  return (
    <tr data-deployment={d.key} data-provider={d.provider} data-admission={d.admission} data-state={d.state}>
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
      <td class="num" data-figure="error-rate">
        <ErrorRate deployment={d} />
      </td>
      <td class="num nowrap" data-figure="p50">
        {d.p50_latency_ms === null ? '—' : `${grouped(d.p50_latency_ms)} ms`}
      </td>
      <td class="nowrap" data-figure="limits">
        <LimitUse deployment={d} />
      </td>
      <td class="deployment-actions">
        {d.from_setting ? (
          <span class="muted small">a setting’s, not the book’s</span>
        ) : (
          <div class="button-row">
            <button type="button" class="button button-small" onClick={act('edit')}>
              Edit…
            </button>
            {d.state !== 'enabled' ? (
              <button type="button" class="button button-small" onClick={act('enable')}>
                Enable…
              </button>
            ) : null}
            {d.state === 'enabled' ? (
              <button type="button" class="button button-small" onClick={act('drain')}>
                Drain…
              </button>
            ) : null}
            {d.state !== 'disabled' ? (
              <button type="button" class="button button-small button-danger" onClick={act('disable')}>
                Disable…
              </button>
            ) : null}
            {d.admission !== 'open' ? (
              <button type="button" class="button button-small" onClick={act('end-cooldown')}>
                End cooldown…
              </button>
            ) : null}
          </div>
        )}
      </td>
    </tr>
  );
}

/** "4%", then "2 of 50 answers failed, since 14:02:11 UTC": the rate, out of how many, over what. */
function ErrorRate(props: { deployment: DeploymentRow }) {
  const d = props.deployment;
  if (d.error_rate === null) return <span class="muted">—</span>;
  return (
    <>
      <span class="nowrap">{percentOf(d.error_rate)}</span>
      <div class="muted small" data-figure="error-count">
        {grouped(d.recent_failures)} of {grouped(d.recent_answers)} failed
        {d.recent_since ? ', ' : ''}
        {d.recent_since ? <span class="nowrap">since {time(d.recent_since).slice(11)} UTC</span> : null}
      </div>
    </>
  );
}

/** Healthy, trial, or cooling until a time (UTC); whether this instance can call it at all; the book's draining or disabled. */
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
      {d.state === 'draining' ? <div class="small traffic">draining: tried after every other</div> : null}
      {d.state === 'disabled' ? <div class="small traffic">disabled in the book</div> : null}
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
