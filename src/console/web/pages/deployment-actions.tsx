// What the operator does to a deployment on the Providers page: edit its weight, priority, upstream
// model, limits and own prices; drain, disable or enable it; add one to a model (each a change of
// the book, previewed then applied: components/book-change.tsx); end its cooldown by hand, on
// every instance (not a change of the book).
import { useEffect, useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api } from '../api.ts';
import { appliedText, BookChangeDialog } from '../components/book-change.tsx';
import { ConfirmDialog, ErrorNote, Loading } from '../components/ui.tsx';
import { useApi } from '../data.ts';
import type { DeploymentChangeRequest, DeploymentRow, NewDeploymentRequest, ProviderRow } from '../wire-types.ts';

export type DeploymentAction =
  | { kind: 'add'; model: string }
  | { kind: 'edit' | 'enable' | 'drain' | 'disable' | 'end-cooldown'; model: string; deployment: DeploymentRow };

/** `text`: what the page says it did; `bookChanged`: the book's history has a new version to show. */
type Done = (text: string, bookChanged: boolean) => void;

export function DeploymentActionDialogs(props: {
  action: DeploymentAction | undefined;
  providers: ProviderRow[];
  onCancel: () => void;
  onDone: Done;
}) {
  const a = props.action;
  return (
    <>
      <EditDialog action={a?.kind === 'edit' ? a : undefined} onCancel={props.onCancel} onDone={props.onDone} />
      <TrafficDialog action={trafficOf(a)} onCancel={props.onCancel} onDone={props.onDone} />
      <AddDialog
        model={a?.kind === 'add' ? a.model : undefined}
        providers={props.providers}
        onCancel={props.onCancel}
        onDone={props.onDone}
      />
      <EndCooldownDialog
        action={a?.kind === 'end-cooldown' ? a : undefined}
        onCancel={props.onCancel}
        onDone={props.onDone}
      />
    </>
  );
}

type OnRow = { model: string; deployment: DeploymentRow };
type TrafficAction = OnRow & { kind: 'enable' | 'drain' | 'disable' };

const trafficOf = (a: DeploymentAction | undefined): TrafficAction | undefined =>
  a && a.kind !== 'add' && (a.kind === 'enable' || a.kind === 'drain' || a.kind === 'disable')
    ? { model: a.model, deployment: a.deployment, kind: a.kind }
    : undefined;

const TRAFFIC = {
  enable: {
    state: 'enabled',
    title: 'Enable',
    says: 'takes its share of the traffic again.',
  },
  drain: {
    state: 'draining',
    title: 'Drain',
    says: 'is tried only after every other deployment of the model: its traffic moves to them, and its requests in flight finish.',
  },
  disable: {
    state: 'disabled',
    title: 'Disable',
    says: 'takes no requests (those in flight finish). A model with every deployment disabled is not available.',
  },
} as const;

function TrafficDialog(props: { action: TrafficAction | undefined; onCancel: () => void; onDone: Done }) {
  const a = props.action;
  const t = a ? TRAFFIC[a.kind] : TRAFFIC.enable;
  const key = a?.deployment.key ?? '';
  return (
    <BookChangeDialog<DeploymentChangeRequest>
      open={a !== undefined}
      title={`${t.title} ${key}?`}
      request={{ model: a?.model ?? '', deployment: a?.deployment.id ?? '', state: t.state }}
      send={api.changeDeployment}
      previewAtOnce
      danger={a?.kind === 'disable'}
      onCancel={props.onCancel}
      onApplied={(r) => props.onDone(appliedText(r, `${key} ${t.state}`), true)}
    >
      <p>
        <span class="mono">{key}</span> {t.says}
      </p>
    </BookChangeDialog>
  );
}

function EndCooldownDialog(props: { action: OnRow | undefined; onCancel: () => void; onDone: Done }) {
  const a = props.action;
  const end = useAction(async (row: OnRow) => api.endCooldown({ model: row.model, deployment: row.deployment.id }));
  useEffect(() => end.reset(), [a?.deployment.key]);
  const key = a?.deployment.key ?? '';
  return (
    <ConfirmDialog
      open={a !== undefined}
      title={`End the cooldown of ${key}?`}
      confirmText="End the cooldown"
      busy={end.busy}
      onCancel={props.onCancel}
      onConfirm={async () => {
        if (!a) return;
        await end.run(a);
      }}
    >
      <p>
        It takes requests again at once on every instance; its failures in a row are forgotten and a provider’s
        retry-after is lifted. Not a change of the book.
      </p>
      {end.error ? <ErrorNote error={end.error} /> : null}
      <EndedNote answer={end.done} keyName={key} onDone={props.onDone} />
    </ConfirmDialog>
  );
}

function EndedNote(props: { answer: { was_cooling: boolean } | undefined; keyName: string; onDone: Done }) {
  useEffect(() => {
    if (!props.answer) return;
    const here = props.answer.was_cooling ? 'it was cooling here' : 'it was not cooling here';
    props.onDone(`Cooldown of ${props.keyName} ended (${here}); every instance was told.`, false);
  }, [props.answer]);
  return null;
}

/** A whole number typed into a field: '' is `empty`, anything else not a whole number an Error. */
function whole(text: string, what: string, empty: number | null): number | null | Error {
  const t = text.trim().replaceAll(',', '');
  if (t === '') return empty;
  return /^\d{1,15}$/.test(t) ? Number(t) : new Error(`${what} is a whole number.`);
}

interface EditForm {
  weight: string;
  priority: string;
  upstream: string;
  rpm: string;
  tpm: string;
  concurrency: string;
  prices: Record<string, string>;
}

const formOf = (d: DeploymentRow, prices: Record<string, string>): EditForm => ({
  weight: String(d.weight),
  priority: String(d.priority),
  upstream: d.upstream_id,
  rpm: d.rpm ? String(d.rpm) : '',
  tpm: d.tpm ? String(d.tpm) : '',
  concurrency: d.concurrency ? String(d.concurrency) : '',
  prices,
});

/** The request a form makes: only what differs from the deployment as it is (`was`). */
function editRequest(row: OnRow, f: EditForm, was: EditForm, modelUpstream: string): DeploymentChangeRequest | Error {
  const out: DeploymentChangeRequest = { model: row.model, deployment: row.deployment.id };
  const fields = [whole(f.weight, 'Weight', 1), whole(f.priority, 'Priority', 0)];
  const limits = [whole(f.rpm, 'Requests per minute', null), whole(f.tpm, 'Tokens per minute', null)];
  const concurrency = whole(f.concurrency, 'Requests in flight', null);
  const bad = [...fields, ...limits, concurrency].find((x) => x instanceof Error);
  if (bad) return bad;
  if (f.weight !== was.weight) out.weight = fields[0] as number;
  if (f.priority !== was.priority) out.priority = fields[1] as number;
  if (f.upstream.trim() !== was.upstream)
    out.upstream_id = f.upstream.trim() === modelUpstream ? '' : f.upstream.trim();
  if (f.rpm !== was.rpm || f.tpm !== was.tpm || f.concurrency !== was.concurrency)
    out.limits = {
      rpm: limits[0] as number | null,
      tpm: limits[1] as number | null,
      concurrency: concurrency as number | null,
    };
  const typed = Object.entries(f.prices).filter(([, v]) => v.trim() !== '');
  if (JSON.stringify(f.prices) !== JSON.stringify(was.prices))
    out.prices = typed.length ? Object.fromEntries(typed.map(([k, v]) => [k, v.trim()])) : null;
  return Object.keys(out).length > 2 ? out : new Error('Change a field first.');
}

interface BookModel {
  id: string;
  upstreamId: string;
  prices: Record<string, string>;
  deployments?: { id: string; prices?: Record<string, string> }[];
}

/** The model's prices and the deployment's own, from the book document. */
function pricesIn(document: string | undefined, model: string, deployment: string) {
  if (!document) return undefined;
  const m = (JSON.parse(document) as { models: BookModel[] }).models.find((x) => x.id === model);
  const own = m?.deployments?.find((d) => d.id === deployment)?.prices ?? {};
  return { model: m?.prices ?? {}, upstream: m?.upstreamId ?? '', own };
}

function EditDialog(props: { action: OnRow | undefined; onCancel: () => void; onDone: Done }) {
  const a = props.action;
  const book = useApi(a ? api.book() : null);
  const prices = a ? pricesIn(book.data?.document, a.model, a.deployment.id) : undefined;
  const [was, setWas] = useState<EditForm | undefined>();
  const [form, setForm] = useState<EditForm | undefined>();
  useEffect(() => {
    if (!a || !prices) return setForm(undefined);
    const start = formOf(
      a.deployment,
      Object.fromEntries(Object.keys(prices.model).map((k) => [k, prices.own[k] ?? ''])),
    );
    setWas(start);
    setForm(start);
  }, [a?.deployment.key, book.data?.document]);
  const request = a && form && was && prices ? editRequest(a, form, was, prices.upstream) : new Error('Loading…');
  return (
    <BookChangeDialog<DeploymentChangeRequest>
      open={a !== undefined}
      title={`Edit ${a?.deployment.key ?? ''}`}
      request={request}
      send={api.changeDeployment}
      onCancel={props.onCancel}
      onApplied={(r) => props.onDone(appliedText(r, `${a?.deployment.key} changed`), true)}
    >
      {book.error ? <ErrorNote error={book.error} /> : null}
      {/* Closed, it shows nothing: a "Loading…" in a closed dialog would be a page that never finishes loading. */}
      {!a ? null : !form || !prices ? (
        <Loading />
      ) : (
        <EditFields form={form} onForm={setForm} modelPrices={prices.model} />
      )}
    </BookChangeDialog>
  );
}

function EditFields(props: { form: EditForm; onForm: (f: EditForm) => void; modelPrices: Record<string, string> }) {
  const f = props.form;
  const field = (name: keyof Omit<EditForm, 'prices'>, label: string, hint = '') => (
    <label class="field">
      <span>{label}</span>
      <input
        name={name}
        inputMode={name === 'upstream' ? 'text' : 'numeric'}
        placeholder={hint}
        value={f[name]}
        onInput={(e) => props.onForm({ ...f, [name]: (e.target as HTMLInputElement).value })}
      />
    </label>
  );
  return (
    <>
      <div class="field-grid">
        {field('weight', 'Weight (0–1,000,000)')}
        {field('priority', 'Priority (0 first)')}
      </div>
      {field('upstream', 'Upstream model')}
      <fieldset class="choices">
        <legend>Limits of the upstream key (empty: none)</legend>
        <div class="field-grid field-grid-3">
          {field('rpm', 'Requests / min', 'none')}
          {field('tpm', 'Tokens / min', 'none')}
          {field('concurrency', 'In flight', 'none')}
        </div>
      </fieldset>
      <fieldset class="choices">
        <legend>What it costs the operator, USD per unit (empty: the model’s price)</legend>
        <div class="field-grid field-grid-prices">
          {Object.entries(props.modelPrices).map(([k, modelPrice]) => (
            <label class="field" key={k}>
              <span class="mono">{k}</span>
              <input
                name={`price-${k}`}
                inputMode="decimal"
                placeholder={modelPrice}
                value={f.prices[k] ?? ''}
                onInput={(e) =>
                  props.onForm({ ...f, prices: { ...f.prices, [k]: (e.target as HTMLInputElement).value } })
                }
              />
            </label>
          ))}
        </div>
      </fieldset>
    </>
  );
}

function AddDialog(props: { model: string | undefined; providers: ProviderRow[]; onCancel: () => void; onDone: Done }) {
  const blank = { id: '', provider: '', upstream: '', weight: '1', priority: '0' };
  const [f, setF] = useState(blank);
  useEffect(() => setF({ ...blank, provider: props.providers[0]?.id ?? '' }), [props.model]);
  const weight = whole(f.weight, 'Weight', 1);
  const priority = whole(f.priority, 'Priority', 0);
  const request: NewDeploymentRequest | Error =
    weight instanceof Error
      ? weight
      : priority instanceof Error
        ? priority
        : f.id.trim() === ''
          ? new Error('Name the deployment.')
          : {
              model: props.model ?? '',
              deployment: {
                id: f.id.trim(),
                provider: f.provider,
                ...(f.upstream.trim() ? { upstream_id: f.upstream.trim() } : {}),
                weight: weight as number,
                priority: priority as number,
              },
            };
  const input = (name: keyof typeof blank, label: string) => (
    <label class="field">
      <span>{label}</span>
      <input
        name={name}
        value={f[name]}
        onInput={(e) => setF({ ...f, [name]: (e.target as HTMLInputElement).value })}
      />
    </label>
  );
  return (
    <BookChangeDialog<NewDeploymentRequest>
      open={props.model !== undefined}
      title={`Add a deployment to ${props.model ?? ''}`}
      request={request}
      send={api.addDeployment}
      onCancel={props.onCancel}
      onApplied={(r) => props.onDone(appliedText(r, `Deployment ${props.model}/${f.id.trim()} added`), true)}
    >
      {input('id', 'Deployment id (a-z, 0-9, ., - and _)')}
      <label class="field">
        <span>Provider</span>
        <select
          name="provider"
          value={f.provider}
          onChange={(e) => setF({ ...f, provider: (e.target as HTMLSelectElement).value })}
        >
          {props.providers.map((p) => (
            <option key={p.id} value={p.id}>
              {p.id} ({p.dialect})
            </option>
          ))}
        </select>
      </label>
      {input('upstream', 'Upstream model (empty: the model’s)')}
      <div class="field-grid">
        {input('weight', 'Weight')}
        {input('priority', 'Priority')}
      </div>
    </BookChangeDialog>
  );
}
