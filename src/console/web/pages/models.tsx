// The models this key may call, each with the prices it is charged at (the price book's prices
// with the account group's markup: the customer's prices), grouped by kind. The operator's price
// book page lists the book's own (provider) prices with the same tables.
import type { ComponentChildren } from 'preact';
import { api } from '../api.ts';
import { Card, Empty, ErrorNote, Loading, PageHeader, Table } from '../components/ui.tsx';
import { useApi } from '../data.ts';
import { priceKeyLabel, usdText } from '../format.ts';
import type { Location } from '../router.ts';

export const modelsData = (_loc: Location) => [api.models()];

export function Models() {
  const models = useApi(api.models());
  return (
    <>
      <PageHeader title="Models and prices" />
      <p class="muted lead">
        What each request is charged, in US dollars per unit, with your account’s prices. A request costs its quantities
        at these prices, rounded up to the nano-dollar once.
      </p>
      {models.error ? <ErrorNote error={models.error} /> : null}
      {models.loading ? <Loading /> : null}
      {models.data && models.data.models.length === 0 ? <Empty>No models are available.</Empty> : null}
      {models.data ? (
        <PricesByKind
          models={models.data.models.map((m) => ({
            id: m.id,
            kind: m.kind,
            provider: m.provider,
            aliases: m.aliases,
            prices: m.pricing,
          }))}
        />
      ) : null}
    </>
  );
}

export interface PricedModel {
  id: string;
  kind: string;
  provider: string;
  aliases: string[];
  prices: Record<string, string>;
}

/** The prices most requests pay, as columns (per 1M tokens); the rest fold away. */
const MAIN_TOKEN_PRICES = [
  { key: 'input_per_mtok', title: 'Input / 1M' },
  { key: 'cached_input_per_mtok', title: 'Cached input / 1M' },
  { key: 'output_per_mtok', title: 'Output / 1M' },
];

const KIND_TITLES: Record<string, string> = {
  chat: 'Chat',
  embedding: 'Embeddings',
  image: 'Images',
  transcription: 'Transcription',
  speech: 'Speech',
  video: 'Video',
};

/** A longer list of prices (image sizes and qualities) folds away too. */
const FOLD_ABOVE = 4;

const KIND_ORDER = ['chat', 'embedding', 'image', 'transcription', 'speech', 'video'];

/**
 * One card per kind of model. Token-priced kinds (chat, embeddings) show their main token prices
 * as columns and fold the rest (cache writes, service tiers, long context, tools) behind a
 * "more prices" line; other kinds list all their prices.
 */
export function PricesByKind<M extends PricedModel>(props: {
  models: M[];
  /** The first cell's content (default: the id). */
  name?: (m: M) => ComponentChildren;
  /** Extra columns after the provider. */
  extra?: { title: string; cell: (m: M) => ComponentChildren }[];
  selected?: string;
}) {
  const byKind = new Map<string, M[]>();
  for (const m of props.models) byKind.set(m.kind, [...(byKind.get(m.kind) ?? []), m]);
  const kinds = [...byKind.keys()].sort((a, b) => rank(a) - rank(b));
  return (
    <>
      {kinds.map((kind) => {
        const list = byKind.get(kind)!;
        const columns = kind === 'chat' ? MAIN_TOKEN_PRICES : kind === 'embedding' ? MAIN_TOKEN_PRICES.slice(0, 1) : [];
        const title = KIND_TITLES[kind] ?? kind;
        return (
          <Card key={kind} title={`${title} (${list.length})`}>
            <Table stack label={`${title} models`} id={`prices-${kind}`}>
              <thead>
                <tr>
                  <th>Model</th>
                  <th>Provider</th>
                  {(props.extra ?? []).map((x) => (
                    <th key={x.title}>{x.title}</th>
                  ))}
                  {columns.map((c) => (
                    <th key={c.key} class="num">
                      {c.title}
                    </th>
                  ))}
                  <th>{columns.length > 0 ? 'Other prices' : 'Prices'}</th>
                </tr>
              </thead>
              <tbody>
                {list.map((m) => {
                  const rest = Object.fromEntries(
                    Object.entries(m.prices).filter(([k]) => !columns.some((c) => c.key === k)),
                  );
                  const restCount = Object.keys(rest).length;
                  return (
                    <tr key={m.id} data-model={m.id} class={m.id === props.selected ? 'selected' : ''}>
                      <td class="mono">
                        {props.name ? props.name(m) : m.id}
                        {m.aliases.length > 0 ? <div class="muted small">also: {m.aliases.join(', ')}</div> : null}
                      </td>
                      <td>{m.provider}</td>
                      {(props.extra ?? []).map((x) => (
                        <td key={x.title}>{x.cell(m)}</td>
                      ))}
                      {columns.map((c) => (
                        <td key={c.key} class="num nowrap" data-price-key={c.key}>
                          {m.prices[c.key] ? usdText(m.prices[c.key]!) : '—'}
                        </td>
                      ))}
                      <td>
                        {restCount === 0 ? (
                          <span class="muted">—</span>
                        ) : columns.length > 0 || restCount > FOLD_ABOVE ? (
                          <details class="more-prices">
                            <summary>
                              {columns.length > 0
                                ? `${restCount} more price${restCount === 1 ? '' : 's'}`
                                : `${restCount} prices`}
                            </summary>
                            <PriceList prices={rest} />
                          </details>
                        ) : (
                          <PriceList prices={rest} />
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </Table>
          </Card>
        );
      })}
    </>
  );
}

const rank = (kind: string) => (KIND_ORDER.includes(kind) ? KIND_ORDER.indexOf(kind) : KIND_ORDER.length);

/** Prices as "Input / 1M tokens  $2.50" lines, in the book's key order. */
export function PriceList(props: { prices: Record<string, string> }) {
  const entries = Object.entries(props.prices);
  if (entries.length === 0) return <span class="muted">—</span>;
  return (
    <dl class="prices">
      {entries.map(([k, v]) => (
        <div key={k} class="price" data-price-key={k}>
          <dt>{priceKeyLabel(k)}</dt>
          <dd>{usdText(v)}</dd>
        </div>
      ))}
    </dl>
  );
}
