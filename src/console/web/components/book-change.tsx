// One change of the book asked for in a dialog, as the price book page's Apply is: the form's
// fields, then Preview (a dry run: what it changes, what it leaves to do, and the book version it
// was worked out against), then Apply, based on that version (the gateway refuses it with
// book_changed if anything was applied since, so what was previewed is what is applied). A form
// changed after its preview is previewed again before it can be applied.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import type { ApplyAnswer, BookWriteOptions } from '../wire-types.ts';
import { ConfirmDialog, Empty, ErrorNote, Note, Table } from './ui.tsx';

export interface BookChangeProps<B> {
  open: boolean;
  title: string;
  /** The form's request as it stands, or why it cannot be sent yet (shown; nothing is sent). */
  request: B | Error;
  send: (body: B & BookWriteOptions) => Promise<ApplyAnswer>;
  /** Previews at once when opened: a change with nothing to fill in (drain, disable, enable). */
  previewAtOnce?: boolean;
  danger?: boolean;
  onCancel: () => void;
  onApplied: (answer: ApplyAnswer) => void;
  children?: ComponentChildren;
}

export function BookChangeDialog<B>(props: BookChangeProps<B>) {
  const [reason, setReason] = useState('');
  const sent = props.request instanceof Error ? undefined : JSON.stringify(props.request);
  const preview = useAction(async (body: B, text: string) => ({
    text,
    answer: await props.send({ ...body, dry_run: true }),
  }));
  const apply = useAction((body: B, version: string) =>
    props.send({ ...body, dry_run: false, based_on: version, ...(reason.trim() ? { reason: reason.trim() } : {}) }),
  );
  useEffect(() => {
    if (!props.open) return;
    setReason('');
    preview.reset();
    apply.reset();
    if (props.previewAtOnce && !(props.request instanceof Error)) void preview.run(props.request, sent!);
  }, [props.open]);
  // The preview stands only for the form it was made of.
  const seen = preview.done && preview.done.text === sent ? preview.done.answer : undefined;
  const confirm = async () => {
    if (props.request instanceof Error) return preview.fail(props.request);
    if (!seen) return preview.run(props.request, sent!);
    await apply.run(props.request, seen.version);
  };
  useEffect(() => {
    if (apply.done) props.onApplied(apply.done);
  }, [apply.done]);
  return (
    <ConfirmDialog
      open={props.open}
      title={props.title}
      confirmText={seen ? 'Apply' : 'Preview'}
      danger={props.danger && seen !== undefined}
      busy={preview.busy || apply.busy}
      confirmDisabled={seen !== undefined && seen.changes.length === 0}
      wide
      onCancel={props.onCancel}
      onConfirm={() => void confirm()}
    >
      <div class="form">
        {props.children}
        <label class="field">
          <span>Reason (kept in the book’s history)</span>
          <input name="reason" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
        </label>
      </div>
      {preview.error || apply.error ? <ErrorNote error={apply.error ?? preview.error} /> : null}
      {preview.done && !seen ? <Note kind="warn">The form changed since the preview: preview it again.</Note> : null}
      {seen ? <Preview answer={seen} /> : null}
    </ConfirmDialog>
  );
}

/** What the dry run says the change would do, scrolled into view when it comes. */
function Preview(props: { answer: ApplyAnswer }) {
  const a = props.answer;
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => ref.current?.scrollIntoView({ block: 'nearest' }), [a]);
  return (
    <div class="book-preview" data-figure="book-preview" ref={ref}>
      <h3>What it changes</h3>
      {a.changes.length === 0 ? (
        <Empty>Nothing: the book already says this.</Empty>
      ) : (
        <Table stack label="What it changes">
          <thead>
            <tr>
              <th>Change</th>
              <th>Subject</th>
              <th>Detail</th>
            </tr>
          </thead>
          <tbody>
            {a.changes.map((c, i) => (
              <tr key={`${c.kind}-${c.subject}-${i}`}>
                <td class="nowrap">{c.kind.replaceAll('_', ' ')}</td>
                <td class="mono">{c.subject}</td>
                <td class="small detail">{c.detail}</td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      {a.warnings.map((w) => (
        <Note kind="warn" key={w.subject}>
          {w.message}
        </Note>
      ))}
      <p class="muted small">
        Worked out against book version <span class="mono">{a.version}</span>; applied only if the book is still that
        version.
      </p>
    </div>
  );
}

/** What the page says after a change of the book: how many changes, and the book's version now. */
export function appliedText(a: ApplyAnswer, what: string): string {
  if (!a.applied) return `${what}: nothing changed.`;
  return `${what}: ${a.changes.length} change${a.changes.length === 1 ? '' : 's'} applied; the book is version ${a.version}.`;
}
