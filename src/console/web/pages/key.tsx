// The key the session was opened with: its prefix, and rotation (a new key on the same account,
// the old one refused at once). The new key is shown once, here, with a copy button; the session
// moves to the new key, and nothing keeps the key after this page is left.
import { useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api } from '../api.ts';
import { SecretOnce } from '../components/secret.tsx';
import { Card, ConfirmDialog, ErrorNote, PageHeader } from '../components/ui.tsx';
import type { Me } from '../wire-types.ts';

export function KeyPage(props: { me: Me; onRotated: (prefix: string, keyId: string) => void }) {
  return (
    <>
      <PageHeader title="API key" />
      <SessionKey {...props} />
    </>
  );
}

/** The session's own key (its prefix, account and group) with Rotate key…; also on a member's Keys page. */
export function SessionKey(props: { me: Me; onRotated: (prefix: string, keyId: string) => void }) {
  const [confirming, setConfirming] = useState(false);
  // The new key is the rotation's answer: shown until "I have saved it" forgets it.
  const rotation = useAction(async () => {
    const r = await api.rotateKey();
    props.onRotated(r.key_prefix, r.key_id);
    return r;
  });
  const fresh = rotation.done?.api_key;
  const rotate = async () => {
    await rotation.run();
    setConfirming(false);
  };

  return (
    <>
      <Card title="This key">
        <dl class="facts">
          <div>
            <dt>Key</dt>
            <dd class="mono" data-figure="key-prefix">
              {props.me.key_prefix}…
            </dd>
          </div>
          <div>
            <dt>{props.me.organisation ? 'Organisation' : 'Account'}</dt>
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
        <NewKey apiKey={fresh} onHide={rotation.reset} />
      ) : (
        <Card title="Rotate the key">
          <p>
            Rotating issues a new key for the same account, balance and history, and stops the current key at once. Use
            it when the key may have been seen by someone else.
          </p>
          {rotation.error ? <ErrorNote error={rotation.error} /> : null}
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
        busy={rotation.busy}
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

/** The new key, shown this once, with Copy. */
export function NewKey(props: { apiKey: string; onHide: () => void }) {
  return (
    <SecretOnce
      title="Your new key"
      secret={props.apiKey}
      id="new-key"
      note="Copy it now: it is shown this once. The old key no longer works; put this one wherever the old one was used."
      hideText="I have saved it: hide the key"
      onHide={props.onHide}
    />
  );
}
