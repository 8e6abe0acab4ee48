// A secret shown once (a new key, an invitation or sign-in link): the value with Copy, a warning
// that it will not be shown again, and a button that forgets it. Nothing keeps it after that.
import { useState } from 'preact/hooks';
import { Card, Note } from './ui.tsx';

export function SecretOnce(props: {
  title: string;
  secret: string;
  /** The element id of the value (tests read it). */
  id: string;
  note: string;
  hideText?: string;
  onHide: () => void;
}) {
  const [copied, setCopied] = useState<'yes' | 'no' | undefined>();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.secret);
      setCopied('yes');
    } catch {
      setCopied('no');
    }
  };
  return (
    <Card title={props.title}>
      <Note kind="warn">{props.note}</Note>
      <div class="secret-row">
        <code class="secret" id={props.id}>
          {props.secret}
        </code>
        <button type="button" class="button button-primary" onClick={copy}>
          {copied === 'yes' ? 'Copied' : 'Copy'}
        </button>
      </div>
      {copied === 'no' ? <p class="muted small">The browser did not allow copying: select it and copy it.</p> : null}
      <button type="button" class="button" onClick={props.onHide}>
        {props.hideText ?? 'I have saved it: hide it'}
      </button>
    </Card>
  );
}
