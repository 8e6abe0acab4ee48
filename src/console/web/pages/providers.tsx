// The providers the gateway calls and the models' deployments (docs/providers.md): each provider
// with its base URL, its credential's form and state on this instance (never the credential) and
// a test call; each model's routing and deployments with their live state on the instance that
// answers (health, the error rate of its last answers, median latency, limit use this minute),
// asked again every few seconds while the page is shown. And the changes an operator makes to
// them: a provider or a deployment added, a deployment's weight, priority, upstream model, limits,
// prices or traffic (enabled, draining, disabled), each a change of the book previewed and applied
// as the price book page does it (components/book-change.tsx); a credential set or rotated (sealed,
// never shown again); a cooldown ended by hand on every instance. The book's history of providers
// and model definitions is below them.
import { useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api } from '../api.ts';
import { appliedText } from '../components/book-change.tsx';
import { Badge, Card, Empty, ErrorNote, Loading, Note, PageHeader, Table } from '../components/ui.tsx';
import { type Loaded, useApi } from '../data.ts';
import { grouped, time } from '../format.ts';
import type { Location } from '../router.ts';
import type { ApplyAnswer, BookHistory, ProviderCredential, ProviderRow } from '../wire-types.ts';
import { Deployments } from './deployments.tsx';
import { AddProviderDialog, CredentialDialog } from './provider-actions.tsx';

export { REFRESH_MS } from './deployments.tsx';

/** The history's kinds shown here: providers and model definitions (a model's deployments are in its definition). */
const HISTORY_KINDS = 'provider,model';
const HISTORY_ROWS = 10;

export const providersData = (_loc: Location) => [
  api.providers(),
  api.deployments(),
  api.bookHistory(HISTORY_KINDS, HISTORY_ROWS),
];

export function Providers() {
  // Each change of the book shows in the history: asked again after one.
  const history = useApi(api.bookHistory(HISTORY_KINDS, HISTORY_ROWS));
  return (
    <>
      <PageHeader title="Providers" />
      <p class="muted lead">
        The endpoints the gateway calls, each with its credential as this instance sees it (its form and state, never
        the credential), and each model’s deployments with their live state on this instance. Each change here is
        previewed, then applied as a new version of the price book.
      </p>
      <ProvidersCard onBookChanged={history.reload} />
      <Deployments onBookChanged={history.reload} />
      <BookHistoryCard history={history} />
    </>
  );
}

function ProvidersCard(props: { onBookChanged: () => void }) {
  const providers = useApi(api.providers());
  const [adding, setAdding] = useState(false);
  const [crediting, setCrediting] = useState<ProviderRow | undefined>();
  const [outcome, setOutcome] = useState<string | undefined>();
  const added = (a: ApplyAnswer, id: string) => {
    setAdding(false);
    setOutcome(appliedText(a, `Provider ${id} added`));
    providers.reload();
    props.onBookChanged();
  };
  return (
    <Card
      title="Providers"
      id="providers"
      actions={
        <button type="button" class="button button-small" id="add-provider" onClick={() => setAdding(true)}>
          Add provider…
        </button>
      }
    >
      {outcome ? <Note kind="ok">{outcome}</Note> : null}
      {providers.error ? <ErrorNote error={providers.error} /> : null}
      {providers.loading && !providers.data ? <Loading /> : null}
      {providers.data && providers.data.providers.length === 0 ? <Empty>The book has no providers.</Empty> : null}
      {providers.data && providers.data.providers.length > 0 ? (
        <ProviderTable providers={providers.data.providers} onCredential={setCrediting} />
      ) : null}
      <AddProviderDialog open={adding} onCancel={() => setAdding(false)} onApplied={added} />
      <CredentialDialog
        provider={crediting}
        onCancel={() => setCrediting(undefined)}
        onSet={(r) => {
          setCrediting(undefined);
          setOutcome(
            `Credential of ${r.provider_id} stored: ${credentialText(r.credential)}. It is never shown again.`,
          );
          providers.reload();
        }}
      />
    </Card>
  );
}

function ProviderTable(props: { providers: ProviderRow[]; onCredential: (p: ProviderRow) => void }) {
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
          <th class="row-action">Actions</th>
        </tr>
      </thead>
      <tbody>
        {props.providers.map((p) => (
          <ProviderLine key={p.id} provider={p} onCredential={() => props.onCredential(p)} />
        ))}
      </tbody>
    </Table>
  );
}

function ProviderLine(props: { provider: ProviderRow; onCredential: () => void }) {
  const p = props.provider;
  const test = useAction(() => api.testProvider(p.id));
  const moved = p.served_base_url !== '' && p.served_base_url !== p.base_url;
  const stored = p.credential.form === 'sealed' || p.credential.form === 'env';
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
                <span class="muted"> · {grouped(test.done.latency_ms)} ms</span>
              ) : null}
              {test.done.url ? <div class="muted small mono url">GET {test.done.url}</div> : null}
            </div>
          ) : null}
        </div>
      </td>
      <td class="row-action">
        {p.credential.form === 'not_needed' ? (
          <span class="muted small">needs no credential</span>
        ) : (
          <button type="button" class="button button-small" onClick={props.onCredential}>
            {stored ? 'Rotate credential…' : 'Set credential…'}
          </button>
        )}
      </td>
    </tr>
  );
}

/** "sealed v3", "env OPENAI_KEY v1": what a credential's state says in a sentence. */
function credentialText(c: ProviderCredential): string {
  const form = c.form === 'env' ? `the variable ${c.env_name}` : c.form;
  return `${form}, version ${c.version}${c.usable ? '' : ` (not usable here${c.problem ? `: ${c.problem}` : ''})`}`;
}

/** "sealed", "env OPENAI_KEY", "setting", "none" or "unreadable", coloured by whether it can be used here. */
function CredentialState(props: { credential: ProviderCredential }) {
  const c = props.credential;
  const text = c.unreadable ? 'unreadable' : c.form === 'env' ? `env ${c.env_name}` : c.form.replace('_', ' ');
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

/** The book's versions of providers and model definitions, newest first: who changed what, when and why. */
function BookHistoryCard(props: { history: Loaded<BookHistory> }) {
  const h = props.history;
  return (
    <Card title="Changes to providers and models" id="book-history">
      <p class="muted small">The newest versions of providers and model definitions (which hold the deployments).</p>
      {h.error ? <ErrorNote error={h.error} /> : null}
      {h.loading && !h.data ? <Loading /> : null}
      {h.data && h.data.versions.length === 0 ? <Empty>None yet.</Empty> : null}
      {h.data && h.data.versions.length > 0 ? (
        <Table stack label="Changes to providers and models" id="book-history-rows">
          <thead>
            <tr>
              <th>When (UTC)</th>
              <th>Version</th>
              <th>Of</th>
              <th>By</th>
              <th>Reason</th>
            </tr>
          </thead>
          <tbody>
            {h.data.versions.map((v) => (
              <tr key={`${v.kind}-${v.id}`} data-kind={v.kind} data-subject={v.subject}>
                <td class="nowrap">{v.created_at ? time(v.created_at) : '—'}</td>
                <td class="nowrap">
                  {v.kind === 'model' ? 'model definition' : v.kind} #{v.id}
                  {v.value_json === 'null' ? <div class="muted small">removed</div> : null}
                </td>
                <td class="mono">{v.subject}</td>
                <td class="small">{v.source}</td>
                <td class="small">{v.reason || '—'}</td>
              </tr>
            ))}
          </tbody>
        </Table>
      ) : null}
    </Card>
  );
}
