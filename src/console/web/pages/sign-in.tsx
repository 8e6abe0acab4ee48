// Sign-in: a key holder pastes their key, the operator the ADMIN_TOKEN. Either is posted once to
// the API's session endpoint (api.signIn), which answers with an HttpOnly cookie; the field is
// cleared at once and the secret is kept nowhere in the page.
import { useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { ApiError, api } from '../api.ts';
import type { SessionAnswer, SignInRequest } from '../wire-types.ts';

type Mode = 'key' | 'admin';

export function SignIn(props: { onSignedIn: (s: SessionAnswer) => void; notice?: string }) {
  const [mode, setMode] = useState<Mode>('key');
  const [secret, setSecret] = useState('');
  const signIn = useAction(async (credential: SignInRequest) => {
    const session = await api.signIn(credential);
    setSecret('');
    props.onSignedIn(session);
  });
  const error = signIn.error === undefined ? undefined : signInProblem(signIn.error, mode);

  const submit = (e: Event) => {
    e.preventDefault();
    const value = secret.trim();
    if (!value) return signIn.fail(new Error(mode === 'key' ? 'Paste your API key.' : 'Paste the admin token.'));
    void signIn.run(mode === 'key' ? { key: value } : { admin_token: value });
  };
  const choose = (next: Mode) => {
    setMode(next);
    signIn.reset();
  };

  return (
    <main class="signin">
      <div class="signin-card">
        <h1 class="brand brand-large">
          <span class="brand-mark" aria-hidden="true" />
          Gateway console
        </h1>
        <p class="muted">Your balance, usage and requests; for the operator, the accounts and the price book.</p>
        {props.notice ? (
          <p class="note note-info" role="status">
            {props.notice}
          </p>
        ) : null}
        <ModeTabs mode={mode} onChoose={choose} />
        <form class="form" onSubmit={submit} autocomplete="off">
          <label class="field">
            <span>{mode === 'key' ? 'API key' : 'Admin token'}</span>
            <input
              id="signin-secret"
              name={mode === 'key' ? 'api-key' : 'admin-token'}
              type="password"
              autocomplete="off"
              spellcheck={false}
              placeholder={mode === 'key' ? 'prx-…' : 'ADMIN_TOKEN'}
              value={secret}
              onInput={(e) => setSecret((e.target as HTMLInputElement).value)}
            />
          </label>
          {error ? (
            <p class="note note-error" role="alert">
              {error}
            </p>
          ) : null}
          <button type="submit" class="button button-primary button-block" disabled={signIn.busy}>
            {signIn.busy ? 'Signing in…' : 'Sign in'}
          </button>
        </form>
        <p class="muted small">
          {mode === 'key'
            ? 'The key is exchanged for a session that ends when you sign out or after a while unused; the page does not keep it. Telegram users can ask the bot for a one-time link with /console.'
            : 'The operator signs in with the gateway’s ADMIN_TOKEN.'}
        </p>
      </div>
    </main>
  );
}

/** API key or Operator: what the one field takes. */
function ModeTabs(props: { mode: Mode; onChoose: (mode: Mode) => void }) {
  return (
    <div class="segmented segmented-wide" role="tablist" aria-label="Sign in with">
      <button
        type="button"
        role="tab"
        aria-selected={props.mode === 'key'}
        class={props.mode === 'key' ? 'active' : ''}
        onClick={() => props.onChoose('key')}
      >
        API key
      </button>
      <button
        type="button"
        role="tab"
        aria-selected={props.mode === 'admin'}
        class={props.mode === 'admin' ? 'active' : ''}
        onClick={() => props.onChoose('admin')}
      >
        Operator
      </button>
    </div>
  );
}

export function signInProblem(err: unknown, mode: 'key' | 'admin' | 'link'): string {
  if (err instanceof ApiError) {
    if (err.status === 429)
      return `Too many attempts. Try again in ${err.retryAfter ? `${Math.ceil(err.retryAfter / 60)} min` : 'a few minutes'}.`;
    if (err.status === 401)
      return mode === 'key'
        ? 'That key is not valid (it may have been rotated or revoked).'
        : mode === 'admin'
          ? 'That admin token is not valid.'
          : 'That sign-in link is not valid any more (links work once, for 10 minutes). Ask the bot for a new one.';
    return err.message;
  }
  return err instanceof Error ? err.message : String(err);
}
