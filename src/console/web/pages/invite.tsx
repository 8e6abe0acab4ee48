// The invitation page (/console/#invite=<token>): the new member says the name they go by and
// whether to make their first API key, and joins; they are then signed in as that member, and
// their first key (if asked for) is shown this once. The token was taken out of the address bar
// before this page showed, and is kept only in memory until it is used.
import { useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { ApiError, api, setCsrf } from '../api.ts';
import { SecretOnce } from '../components/secret.tsx';
import { ErrorNote } from '../components/ui.tsx';
import { ROLE_TEXT } from '../org.ts';
import type { RedeemAnswer } from '../wire-types.ts';

export function InvitePage(props: { token: string; onDone: () => void }) {
  const [name, setName] = useState('');
  const [withKey, setWithKey] = useState(true);
  const join = useAction(async (): Promise<RedeemAnswer> => {
    const r = await api.redeemInvitation({ token: props.token, name: name.trim(), create_key: withKey });
    setCsrf(r.csrf);
    if (!r.api_key) props.onDone();
    return r;
  });
  const joined = join.done;
  return (
    <main class="signin">
      <div class="signin-card">
        <h1 class="brand brand-large">
          <span class="brand-mark" aria-hidden="true" />
          {joined ? `Welcome to ${joined.organisation_name}` : 'Join an organisation'}
        </h1>
        {joined ? (
          <>
            <p>
              You are a member with the role <strong>{ROLE_TEXT[joined.org_role]}</strong>, signed in to the console.
            </p>
            <SecretOnce
              title="Your first API key"
              secret={joined.api_key}
              id="invite-key"
              note="Copy it now: it is shown this once. Use it as the API key of the OpenAI or Anthropic SDK, with this gateway as the base URL."
              hideText="I have saved it: go to the console"
              onHide={props.onDone}
            />
          </>
        ) : (
          <form
            class="form"
            onSubmit={(e) => {
              e.preventDefault();
              if (!name.trim()) return join.fail(new Error('Say the name you go by.'));
              void join.run();
            }}
          >
            <p class="muted">You were invited to an organisation on this gateway. The link works once.</p>
            <label class="field">
              <span>Your name</span>
              <input
                id="invite-name"
                name="name"
                maxLength={200}
                autocomplete="name"
                value={name}
                onInput={(e) => setName((e.target as HTMLInputElement).value)}
              />
            </label>
            <label class="choice">
              <input type="checkbox" name="create_key" checked={withKey} onChange={() => setWithKey(!withKey)} />
              Make my first API key now
            </label>
            {join.error ? <InviteProblem error={join.error} /> : null}
            <button type="submit" class="button button-primary button-block" disabled={join.busy}>
              {join.busy ? 'Joining…' : 'Join'}
            </button>
          </form>
        )}
      </div>
    </main>
  );
}

function InviteProblem(props: { error: unknown }) {
  const e = props.error;
  if (e instanceof ApiError && e.status === 404)
    return (
      <p class="note note-error" role="alert">
        This invitation link does not work: it was used, revoked or has expired, or it was mistyped. Ask whoever invited
        you for a new one.
      </p>
    );
  if (e instanceof ApiError && e.status === 429)
    return (
      <p class="note note-error" role="alert">
        Too many attempts. Try again in a few minutes.
      </p>
    );
  return <ErrorNote error={e} />;
}
