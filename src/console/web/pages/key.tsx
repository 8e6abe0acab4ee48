// The key the session was opened with: its prefix, and rotation (a new key on the same account,
// the old one refused at once). The new key is shown once, here, with a copy button; the session
// moves to the new key, and nothing keeps the key after this page is left.
import { useState } from 'preact/hooks';
import { type Me, post } from '../api.ts';
import { Card, ConfirmDialog, ErrorNote, Note, PageHeader } from '../components/ui.tsx';

export function KeyPage(props: { me: Me; onRotated: (prefix: string) => void }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [fresh, setFresh] = useState<string | undefined>();
  const [copied, setCopied] = useState<'yes' | 'no' | undefined>();

  const rotate = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const r = await post<{ api_key: string; key_prefix: string }>('/key/rotate', { confirm: true });
      setFresh(r.api_key);
      setCopied(undefined);
      props.onRotated(r.key_prefix);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  };

  const copy = async () => {
    if (!fresh) return;
    try {
      await navigator.clipboard.writeText(fresh);
      setCopied('yes');
    } catch {
      setCopied('no');
    }
  };

  return (
    <>
      <PageHeader title="API key" />
      <Card title="This key">
        <dl class="facts">
          <div>
            <dt>Key</dt>
            <dd class="mono" data-figure="key-prefix">
              {props.me.key_prefix}…
            </dd>
          </div>
          <div>
            <dt>Account</dt>
            <dd class="mono">{props.me.account_id}</dd>
          </div>
          {props.me.group ? (
            <div>
              <dt>Price group</dt>
              <dd>{props.me.group}</dd>
            </div>
          ) : null}
        </dl>
      </Card>
      {fresh ? (
        <Card title="Your new key">
          <Note kind="warn">
            Copy it now: it is shown this once. The old key no longer works; put this one wherever the old one was used.
          </Note>
          <div class="secret-row">
            <code class="secret" id="new-key">
              {fresh}
            </code>
            <button type="button" class="button button-primary" onClick={copy}>
              {copied === 'yes' ? 'Copied' : 'Copy'}
            </button>
          </div>
          {copied === 'no' ? (
            <p class="muted small">The browser did not allow copying: select the key and copy it.</p>
          ) : null}
          <button type="button" class="button" onClick={() => setFresh(undefined)}>
            I have saved it: hide the key
          </button>
        </Card>
      ) : (
        <Card title="Rotate the key">
          <p>
            Rotating issues a new key for the same account, balance and history, and stops the current key at once. Use
            it when the key may have been seen by someone else.
          </p>
          {error ? <ErrorNote error={error} /> : null}
          <button type="button" class="button button-danger" id="rotate" onClick={() => setConfirming(true)}>
            Rotate key…
          </button>
        </Card>
      )}
      <ConfirmDialog
        open={confirming}
        title="Rotate this key?"
        confirmText="Rotate now"
        danger
        busy={busy}
        onConfirm={rotate}
        onCancel={() => setConfirming(false)}
      >
        <p>
          The key <span class="mono">{props.me.key_prefix}…</span> stops working immediately, for every program that
          uses it. The new key is shown once.
        </p>
      </ConfirmDialog>
    </>
  );
}
