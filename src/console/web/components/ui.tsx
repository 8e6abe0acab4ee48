// Small building blocks every page uses. Styling is by class only (styles.css): the CSP allows
// no inline style attributes, and none is needed.
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api.ts';
import type { Paged, PagerState } from '../data.ts';

export function PageHeader(props: { title: string; children?: ComponentChildren }) {
  return (
    <div class="page-header">
      <h1>{props.title}</h1>
      {props.children ? <div class="page-actions">{props.children}</div> : null}
    </div>
  );
}

export function Card(props: { title?: string; actions?: ComponentChildren; children: ComponentChildren; id?: string }) {
  return (
    <section class="card" id={props.id}>
      {props.title || props.actions ? (
        <div class="card-head">
          {props.title ? <h2>{props.title}</h2> : <span />}
          {props.actions}
        </div>
      ) : null}
      {props.children}
    </section>
  );
}

export interface Tile {
  label: string;
  value: string;
  hint?: string;
  /** data-figure, for tests and for people reading the DOM. */
  figure: string;
}

export function Tiles(props: { tiles: Tile[] }) {
  return (
    <div class="tiles">
      {props.tiles.map((t) => (
        <div class="tile" key={t.figure}>
          <div class="tile-label">{t.label}</div>
          <div class="tile-value" data-figure={t.figure}>
            {t.value}
          </div>
          {t.hint ? <div class="tile-hint">{t.hint}</div> : null}
        </div>
      ))}
    </div>
  );
}

/**
 * A table that scrolls sideways inside its card on a narrow screen, instead of the page; with
 * `stack`, each row becomes a block of "label: value" lines there instead (the labels are the
 * column headings, copied onto the cells after each render; a heading's own data-label instead
 * when it has one, e.g. "" for a column of buttons).
 */
export function Table(props: { children: ComponentChildren; label: string; id?: string; stack?: boolean }) {
  const ref = useRef<HTMLTableElement>(null);
  useEffect(() => {
    const table = ref.current;
    if (!props.stack || !table) return;
    const headings = [...table.querySelectorAll('thead th')].map(
      (th) => th.getAttribute('data-label') ?? th.textContent ?? '',
    );
    for (const row of table.querySelectorAll('tbody tr, tfoot tr'))
      [...row.children].forEach((cell, i) => cell.setAttribute('data-label', headings[i] ?? ''));
  });
  return (
    <div
      class={props.stack ? 'table-wrap table-stack' : 'table-wrap'}
      role="region"
      aria-label={props.label}
      tabIndex={0}
    >
      <table id={props.id} ref={ref}>
        {props.children}
      </table>
    </div>
  );
}

export function Loading() {
  return <p class="muted loading">Loading…</p>;
}

export function Empty(props: { children: ComponentChildren }) {
  return <p class="muted empty">{props.children}</p>;
}

export function ErrorNote(props: { error: unknown }) {
  const e = props.error;
  // A refusal of the session's kind says so plainly; an organisation's refusals (a role's limit,
  // the last owner, an id of nothing here) are the service's own words.
  const text =
    e instanceof ApiError
      ? e.code === 'wrong_role' || e.code === 'csrf_failed'
        ? 'This is not available to this session.'
        : e.code === 'not_found'
          ? 'Not found.'
          : e.message
      : e instanceof Error
        ? e.message
        : String(e);
  return (
    <p class="note note-error" role="alert">
      {text}
    </p>
  );
}

export function Note(props: { kind?: 'ok' | 'warn' | 'info'; children: ComponentChildren }) {
  return (
    <p class={`note note-${props.kind ?? 'info'}`} role="status">
      {props.children}
    </p>
  );
}

/** A choice of a few values shown as joined buttons (e.g. 30 / 90 days). */
export function Segmented<T extends string | number>(props: {
  label: string;
  options: { value: T; text: string }[];
  value: T;
  onChange: (v: T) => void;
}) {
  return (
    <div class="segmented" role="group" aria-label={props.label}>
      {props.options.map((o) => (
        <button
          type="button"
          key={String(o.value)}
          class={o.value === props.value ? 'active' : ''}
          aria-pressed={o.value === props.value}
          onClick={() => props.onChange(o.value)}
        >
          {o.text}
        </button>
      ))}
    </div>
  );
}

/** Newer / Older over keyset pages (the cursor stack is the list's: usePaged in data.ts). */
export function Pager(props: PagerState) {
  const { cursors, next, onChange } = props;
  const newer = cursors.length > 1;
  if (!newer && !next) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" class="button" disabled={!newer} onClick={() => onChange(cursors.slice(0, -1))}>
        ‹ Newer
      </button>
      <span class="muted">Page {cursors.length}</span>
      <button type="button" class="button" disabled={!next} onClick={() => next && onChange([...cursors, next])}>
        Older ›
      </button>
    </nav>
  );
}

/**
 * A paged list's body: its error, Loading… before the first answer, `empty` for a page without
 * rows, the rows as `children` draws them, and the Pager.
 */
export function PagedRows<T>(props: {
  list: Paged<T>;
  empty: ComponentChildren;
  children: (rows: T[]) => ComponentChildren;
}) {
  const { list } = props;
  const rows = list.data?.rows;
  return (
    <>
      {list.error ? <ErrorNote error={list.error} /> : null}
      {list.loading && !list.data ? <Loading /> : null}
      {rows && rows.length === 0 ? <Empty>{props.empty}</Empty> : null}
      {rows && rows.length > 0 ? props.children(rows) : null}
      <Pager {...list.pager} />
    </>
  );
}

/**
 * A modal confirmation (the browser's <dialog>, so focus stays in it and Escape cancels).
 * Open while `open`; the page decides what confirm does.
 */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirmText: string;
  danger?: boolean;
  busy?: boolean;
  /** The confirm button only (the dialog's form is not complete yet); Cancel stays. */
  confirmDisabled?: boolean;
  /** Wider: a form of many fields (two columns where the screen has room), or a form and a table (a change of the book and its preview). */
  wide?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId(); // a page may hold several dialogs
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      class={props.wide ? 'dialog dialog-wide' : 'dialog'}
      aria-labelledby={titleId}
      onCancel={(e) => {
        e.preventDefault();
        props.onCancel();
      }}
    >
      <h2 id={titleId}>{props.title}</h2>
      <div class="dialog-body">{props.children}</div>
      <div class="dialog-actions">
        <button type="button" class="button" onClick={props.onCancel} disabled={props.busy}>
          Cancel
        </button>
        <button
          type="button"
          class={props.danger ? 'button button-danger' : 'button button-primary'}
          onClick={props.onConfirm}
          disabled={props.busy || props.confirmDisabled}
        >
          {props.busy ? 'Working…' : props.confirmText}
        </button>
      </div>
    </dialog>
  );
}

/** A status word as a coloured badge. */
export function Badge(props: { tone: 'ok' | 'error' | 'warn' | 'neutral'; children: ComponentChildren }) {
  return <span class={`badge badge-${props.tone}`}>{props.children}</span>;
}

/** A search box over a list whose search text is in the address (`value`); Search hands the typed text on. */
export function SearchForm(props: {
  label: string;
  placeholder: string;
  value: string;
  onSearch: (q: string) => void;
}) {
  const [draft, setDraft] = useState(props.value);
  useEffect(() => setDraft(props.value), [props.value]);
  return (
    <form
      class="search"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        props.onSearch(draft.trim());
      }}
    >
      <input
        type="search"
        name="q"
        aria-label={props.label}
        placeholder={props.placeholder}
        value={draft}
        onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
      />
      <button type="submit" class="button button-primary">
        Search
      </button>
    </form>
  );
}
