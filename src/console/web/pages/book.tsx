// The price book, for the operator: the models with their prices, the markups in force and
// scheduled, a model's price history; and a change to the whole book: edit the book document,
// see what it changes and what the last 30 days would have earned under it (Preview), then apply
// it in one transaction (with a confirmation).
import { useEffect, useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api, query } from '../api.ts';
import {
  Badge,
  Card,
  ConfirmDialog,
  Empty,
  ErrorNote,
  Loading,
  Note,
  PageHeader,
  Segmented,
  Table,
} from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { big, grouped, percent, since, usd } from '../format.ts';
import { type Location, navigate } from '../router.ts';
import type { BookAnswer, BookChange, BookPreview, Markup } from '../wire-types.ts';
import { PriceList, PricesByKind } from './models.tsx';

interface BookModel {
  id: string;
  kind: string;
  provider: string;
  enabled: boolean;
  prices: Record<string, string>;
}

interface BookDocument {
  models: BookModel[];
  aliases: Record<string, string>;
}

export const bookData = (loc: Location) => {
  const model = loc.query.get('model');
  return [api.book(), ...(model ? [api.priceHistory(model)] : [])];
};

export function Book(props: { loc: Location }) {
  const tab = props.loc.query.get('tab') === 'edit' ? 'edit' : 'prices';
  const book = useApi(api.book());
  const model = props.loc.query.get('model') ?? '';
  return (
    <>
      <PageHeader title="Price book">
        <Segmented
          label="View"
          value={tab}
          options={[
            { value: 'prices', text: 'Prices and markups' },
            { value: 'edit', text: 'Propose a change' },
          ]}
          onChange={(t) => navigate(`/console/admin/book${query({ tab: t === 'edit' ? 'edit' : '' })}`)}
        />
      </PageHeader>
      {book.error ? <ErrorNote error={book.error} /> : null}
      {book.loading && !book.data ? <Loading /> : null}
      {book.data && tab === 'prices' ? <Prices book={book.data} model={model} /> : null}
      {book.data && tab === 'edit' ? <Editor book={book.data} onApplied={book.reload} /> : null}
    </>
  );
}

function parseBook(text: string): BookDocument | undefined {
  try {
    const doc = JSON.parse(text) as Partial<BookDocument>;
    return { models: doc.models ?? [], aliases: doc.aliases ?? {} };
  } catch {
    return undefined;
  }
}

function scopeOf(m: Markup): string {
  const scope = m.model_id ? `model ${m.model_id}` : m.provider ? `provider ${m.provider}` : 'default';
  return m.account_group ? `${scope}, group ${m.account_group}` : scope;
}

function Prices(props: { book: BookAnswer; model: string }) {
  const doc = parseBook(props.book.document);
  const aliasesOf = new Map<string, string[]>();
  for (const [alias, id] of Object.entries(doc?.aliases ?? {}))
    aliasesOf.set(id, [...(aliasesOf.get(id) ?? []), alias]);
  return (
    <>
      {props.model ? <History id={props.model} /> : null}
      <Card title="Markups">
        <p class="muted small">Customers pay the provider’s price × (1 + markup); the most specific scope wins.</p>
        <MarkupTable rows={props.book.markups.in_force} id="markups-in-force" />
        {props.book.markups.scheduled.length > 0 ? (
          <>
            <h3>Scheduled</h3>
            <MarkupTable rows={props.book.markups.scheduled} id="markups-scheduled" />
          </>
        ) : null}
      </Card>
      {!doc ? <ErrorNote error={new Error('The book document could not be read.')} /> : null}
      <p class="muted small">
        Provider prices (USD per unit) as the book holds them; customers pay them with the markup.
      </p>
      <PricesByKind
        models={(doc?.models ?? []).map((m) => ({ ...m, aliases: aliasesOf.get(m.id) ?? [] }))}
        selected={props.model}
        name={(m) => (
          <a href={`/console/admin/book${query({ model: m.id })}`} title="Price history">
            {m.id}
          </a>
        )}
        extra={[
          {
            title: 'State',
            cell: (m) => (m.enabled ? <Badge tone="ok">enabled</Badge> : <Badge tone="neutral">disabled</Badge>),
          },
        ]}
      />
    </>
  );
}

function MarkupTable(props: { rows: Markup[]; id: string }) {
  if (props.rows.length === 0) return <Empty>None.</Empty>;
  return (
    <Table stack label="Markups" id={props.id}>
      <thead>
        <tr>
          <th>Scope</th>
          <th class="num">Markup</th>
          <th>From (UTC)</th>
          <th>Set by</th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((m) => (
          <tr key={String(m.id)}>
            <td>{scopeOf(m)}</td>
            <td class="num">{m.markup ? percent(m.markup) : 'cleared'}</td>
            <td class="nowrap">{since(m.effective_from)}</td>
            <td class="small">{[m.source, m.reason].filter(Boolean).join(': ') || '—'}</td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

function History(props: { id: string }) {
  const history = useApi(api.priceHistory(props.id));
  return (
    <Card
      title={`Price history of ${props.id}`}
      actions={
        <a class="button button-small" href="/console/admin/book">
          Close
        </a>
      }
      id="price-history"
    >
      {history.error ? <ErrorNote error={history.error} /> : null}
      {history.loading ? <Loading /> : null}
      {history.data ? (
        <Table stack label={`Price versions of ${props.id}`}>
          <thead>
            <tr>
              <th>In force from (UTC)</th>
              <th>Prices (USD)</th>
              <th>Set by</th>
            </tr>
          </thead>
          <tbody>
            {history.data.versions.map((v) => (
              <tr key={String(v.id)}>
                <td class="nowrap">{since(v.effective_from)}</td>
                <td>
                  <PriceList prices={v.prices} />
                </td>
                <td class="small">{[v.source, v.reason].filter(Boolean).join(': ') || '—'}</td>
              </tr>
            ))}
          </tbody>
        </Table>
      ) : null}
    </Card>
  );
}

function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/**
 * Preview (a dry-run apply, for what the document changes, and the usage priced again under it,
 * together) and Apply, with one error shown: the last step's. The apply is based on the version
 * the preview saw: a book changed since (another operator's apply) refuses it, nothing undone.
 */
function useBookChange(onApplied: () => void) {
  const check = useAction(async (document: string, days: number) => {
    const [dry, preview] = await Promise.all([api.applyBook(document, true), api.previewBook({ document, days })]);
    return { text: document, changes: dry.changes, preview, version: dry.version };
  });
  const apply = useAction(async (document: string, basedOn: string) => {
    const r = await api.applyBook(document, false, basedOn);
    check.reset();
    onApplied();
    return r.changes;
  });
  const preview = (document: string, days: number) => {
    apply.reset();
    void check.run(document, days);
  };
  return { check, apply, preview, busy: check.busy || apply.busy, error: check.error ?? apply.error };
}

function Editor(props: { book: BookAnswer; onApplied: () => void }) {
  const [text, setText] = useState(() => pretty(props.book.document));
  const [days, setDays] = useState(30);
  const [confirming, setConfirming] = useState(false);
  useEffect(() => setText(pretty(props.book.document)), [props.book.document]);
  const { check, apply, preview, busy, error } = useBookChange(props.onApplied);
  const checked = check.done;
  const applied = apply.done;
  const current = checked && checked.text === text ? checked : undefined;
  const confirmApply = async () => {
    await apply.run(text, current?.version ?? '');
    setConfirming(false);
  };

  return (
    <>
      <Card title="The book document">
        <p class="muted small">
          The whole book as JSON (models, aliases, markups; docs/price-book.md). Edit it, preview what it changes and
          what it would have earned, then apply it: all of it in one transaction, or nothing.
        </p>
        <textarea
          class="code-editor"
          name="document"
          aria-label="Book document"
          spellcheck={false}
          rows={18}
          value={text}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        />
        <div class="button-row">
          <UsagePeriod days={days} onChange={setDays} />
          <button
            type="button"
            class="button button-primary"
            id="preview-book"
            disabled={busy}
            onClick={() => preview(text, days)}
          >
            {check.busy ? 'Checking…' : 'Preview'}
          </button>
          <button
            type="button"
            class="button button-danger"
            id="apply-book"
            disabled={!current || current.changes.length === 0 || busy}
            onClick={() => setConfirming(true)}
          >
            Apply…
          </button>
          <button type="button" class="button" onClick={() => setText(pretty(props.book.document))}>
            Reset
          </button>
        </div>
        {error ? <ErrorNote error={error} /> : null}
        {checked && !current ? (
          <Note kind="warn">The document changed since the preview: preview it again.</Note>
        ) : null}
        {applied ? (
          <Note kind="ok">
            Applied {applied.length} change{applied.length === 1 ? '' : 's'}. The book in force is updated.
          </Note>
        ) : null}
      </Card>
      {current ? <Changes changes={current.changes} /> : null}
      {current ? <PreviewTable preview={current.preview} /> : null}
      <ApplyDialog
        open={confirming}
        changes={current?.changes.length ?? 0}
        busy={apply.busy}
        onCancel={() => setConfirming(false)}
        onConfirm={confirmApply}
      />
    </>
  );
}

/** How many days of recorded usage the preview prices again. */
function UsagePeriod(props: { days: number; onChange: (days: number) => void }) {
  return (
    <label class="field field-inline">
      <span>Usage of the last</span>
      <select
        name="days"
        value={String(props.days)}
        onChange={(e) => props.onChange(Number((e.target as HTMLSelectElement).value))}
      >
        {[7, 30, 90].map((d) => (
          <option key={d} value={String(d)}>
            {d} days
          </option>
        ))}
      </select>
    </label>
  );
}

function ApplyDialog(props: {
  open: boolean;
  changes: number;
  busy: boolean;
  onCancel: () => void;
  onConfirm: () => void;
}) {
  return (
    <ConfirmDialog
      open={props.open}
      title="Apply this book?"
      confirmText="Apply the book"
      danger
      busy={props.busy}
      onCancel={props.onCancel}
      onConfirm={props.onConfirm}
    >
      <p>
        {props.changes} change{props.changes === 1 ? '' : 's'} take effect now, for every new request, on every instance
        within its refresh interval.
      </p>
    </ConfirmDialog>
  );
}

function Changes(props: { changes: BookChange[] }) {
  return (
    <Card title={`What it changes (${props.changes.length})`}>
      {props.changes.length === 0 ? (
        <Empty>Nothing: this is the book in force.</Empty>
      ) : (
        <Table stack label="Changes" id="book-changes">
          <thead>
            <tr>
              <th>Change</th>
              <th>Subject</th>
              <th>Detail</th>
            </tr>
          </thead>
          <tbody>
            {props.changes.map((c, i) => (
              <tr key={`${c.kind}-${c.subject}-${i}`}>
                <td class="nowrap">{c.kind.replaceAll('_', ' ')}</td>
                <td class="mono">{c.subject}</td>
                <td class="small">{c.detail}</td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
    </Card>
  );
}

function PreviewTable(props: { preview: BookPreview }) {
  const p = props.preview;
  const diff = (a: string, b: string) => {
    const d = big(b) - big(a);
    return d === 0n ? '—' : `${d > 0n ? '+' : ''}${usd(d)}`;
  };
  return (
    <Card title={`Had it been in force (${p.from ? p.from.slice(0, 10) : ''} – ${p.to ? p.to.slice(0, 10) : ''})`}>
      {p.rows.length === 0 ? (
        <Empty>No recorded usage in this period.</Empty>
      ) : (
        <Table stack label="Preview" id="book-preview">
          <thead>
            <tr>
              <th>Model</th>
              <th class="num">Requests</th>
              <th class="num">Revenue</th>
              <th class="num">Proposed revenue</th>
              <th class="num">Change</th>
              <th class="num">Provider cost</th>
              <th class="num">Proposed cost</th>
            </tr>
          </thead>
          <tbody>
            {p.rows.map((r) => (
              <tr key={r.model_id} data-model={r.model_id}>
                <td class="mono">
                  {r.model_id}
                  {big(r.inexact_requests) > 0n ? (
                    <div class="muted small">{grouped(r.inexact_requests)} scaled, not exact</div>
                  ) : null}
                </td>
                <td class="num">{grouped(r.requests)}</td>
                <td class="num nowrap">{usd(r.revenue_nano)}</td>
                <td class="num nowrap">{usd(r.proposed_revenue_nano)}</td>
                <td class="num nowrap">{diff(r.revenue_nano, r.proposed_revenue_nano)}</td>
                <td class="num nowrap">{usd(r.provider_cost_nano)}</td>
                <td class="num nowrap">{usd(r.proposed_provider_cost_nano)}</td>
              </tr>
            ))}
          </tbody>
          {p.total ? (
            <tfoot>
              <tr>
                <th>Total</th>
                <td class="num">{grouped(p.total.requests)}</td>
                <td class="num nowrap">{usd(p.total.revenue_nano)}</td>
                <td class="num nowrap">{usd(p.total.proposed_revenue_nano)}</td>
                <td class="num nowrap">{diff(p.total.revenue_nano, p.total.proposed_revenue_nano)}</td>
                <td class="num nowrap">{usd(p.total.provider_cost_nano)}</td>
                <td class="num nowrap">{usd(p.total.proposed_provider_cost_nano)}</td>
              </tr>
            </tfoot>
          ) : null}
        </Table>
      )}
    </Card>
  );
}
