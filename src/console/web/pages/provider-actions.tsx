// Adding a provider (a change of the book, previewed then applied) and setting or rotating a
// provider's credential from the Providers page. The credential is typed into a password field,
// sent once to be sealed (or a variable's name, which every instance reads), and forgotten by the
// page as soon as it is sent: no answer carries it back, and nothing shows it again.
import { useEffect, useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api } from '../api.ts';
import { BookChangeDialog } from '../components/book-change.tsx';
import { ConfirmDialog, ErrorNote } from '../components/ui.tsx';
import type { ApplyAnswer, CredentialAnswer, NewProviderRequest, ProviderRow } from '../wire-types.ts';

const DIALECTS = ['openai', 'azure-openai', 'anthropic', 'cohere', 'bfl'];

const BLANK = { id: '', dialect: 'openai', base_url: '', api_version: '', timeout_ms: '', no_auth: false };
type ProviderForm = typeof BLANK;

function providerRequest(f: ProviderForm): NewProviderRequest | Error {
  if (f.id.trim() === '') return new Error('Name the provider.');
  if (f.base_url.trim() === '') return new Error('Give its base URL.');
  const timeout = f.timeout_ms.trim();
  if (timeout !== '' && !/^\d{1,9}$/.test(timeout)) return new Error('The timeout is a whole number of milliseconds.');
  return {
    provider: {
      id: f.id.trim(),
      dialect: f.dialect,
      base_url: f.base_url.trim(),
      ...(f.dialect === 'azure-openai' && f.api_version.trim() ? { api_version: f.api_version.trim() } : {}),
      ...(timeout ? { timeout_ms: Number(timeout) } : {}),
      ...(f.no_auth ? { auth: 'none' as const } : {}),
    },
  };
}

export function AddProviderDialog(props: {
  open: boolean;
  onCancel: () => void;
  onApplied: (a: ApplyAnswer, id: string) => void;
}) {
  const [f, setF] = useState(BLANK);
  useEffect(() => setF(BLANK), [props.open]);
  const text = (name: 'id' | 'base_url' | 'api_version' | 'timeout_ms', label: string, hint = '') => (
    <label class="field">
      <span>{label}</span>
      <input
        name={name}
        placeholder={hint}
        value={f[name]}
        onInput={(e) => setF({ ...f, [name]: (e.target as HTMLInputElement).value })}
      />
    </label>
  );
  return (
    <BookChangeDialog<NewProviderRequest>
      open={props.open}
      title="Add a provider"
      request={providerRequest(f)}
      send={api.addProvider}
      onCancel={props.onCancel}
      onApplied={(a) => props.onApplied(a, f.id.trim())}
    >
      {text('id', 'Provider id (a-z, 0-9, - and _)', 'azure-east')}
      <label class="field">
        <span>Dialect</span>
        <select
          name="dialect"
          value={f.dialect}
          onChange={(e) => setF({ ...f, dialect: (e.target as HTMLSelectElement).value })}
        >
          {DIALECTS.map((d) => (
            <option key={d} value={d}>
              {d}
            </option>
          ))}
        </select>
      </label>
      {text('base_url', 'Base URL', 'https://api.example.com/v1')}
      {f.dialect === 'azure-openai' ? text('api_version', 'API version', '2024-10-21') : null}
      {text('timeout_ms', 'Time to the response headers, ms (empty: the gateway’s)')}
      <label class="choice">
        <input
          type="checkbox"
          name="no_auth"
          checked={f.no_auth}
          onChange={(e) => setF({ ...f, no_auth: (e.target as HTMLInputElement).checked })}
        />
        <span>It checks no credential (a server in your own network)</span>
      </label>
      <p class="muted small">Set its credential next, on its row.</p>
    </BookChangeDialog>
  );
}

/**
 * Sets or rotates a provider's credential: the key itself (sealed in the database under
 * CREDENTIALS_KEY) or the name of a variable every instance has. Used from the next call on, here
 * at once and on the other instances within their refresh interval.
 */
export function CredentialDialog(props: {
  provider: ProviderRow | undefined;
  onCancel: () => void;
  onSet: (r: CredentialAnswer) => void;
}) {
  const p = props.provider;
  const [form, setForm] = useState<'secret' | 'env_name'>('secret');
  const [value, setValue] = useState('');
  const set = useAction(async (id: string, body: { secret: string } | { env_name: string }) => {
    try {
      return await api.setCredential(id, body);
    } finally {
      setValue(''); // sent once; the page keeps no copy, whatever the answer
    }
  });
  useEffect(() => {
    setValue('');
    setForm('secret');
    set.reset();
  }, [p?.id]);
  useEffect(() => {
    if (set.done) props.onSet(set.done);
  }, [set.done]);
  const rotating = p?.credential.form === 'sealed' || p?.credential.form === 'env';
  return (
    <ConfirmDialog
      open={p !== undefined}
      title={`${rotating ? 'Rotate' : 'Set'} the credential of ${p?.id ?? ''}`}
      confirmText={form === 'secret' ? 'Seal and use it' : 'Use the variable'}
      busy={set.busy}
      confirmDisabled={value.trim() === ''}
      onCancel={props.onCancel}
      onConfirm={() => p && set.run(p.id, form === 'secret' ? { secret: value.trim() } : { env_name: value.trim() })}
    >
      <fieldset class="choices">
        <legend>The credential</legend>
        <label class="choice">
          <input type="radio" name="form" checked={form === 'secret'} onChange={() => setForm('secret')} />
          <span>The key itself, sealed in the database</span>
        </label>
        <label class="choice">
          <input type="radio" name="form" checked={form === 'env_name'} onChange={() => setForm('env_name')} />
          <span>The name of an environment variable every instance has</span>
        </label>
      </fieldset>
      <label class="field">
        <span>{form === 'secret' ? 'API key' : 'Variable name'}</span>
        {form === 'secret' ? (
          <input
            name="secret"
            type="password"
            autoComplete="off"
            value={value}
            onInput={(e) => setValue((e.target as HTMLInputElement).value)}
          />
        ) : (
          <input
            name="env_name"
            autoComplete="off"
            spellcheck={false}
            placeholder="AZURE_EAST_KEY"
            value={value}
            onInput={(e) => setValue((e.target as HTMLInputElement).value)}
          />
        )}
      </label>
      <p class="muted small">
        {rotating ? `It replaces version ${p?.credential.version}` : 'It is used'} from the next call on, on every
        instance. It is never shown again.
      </p>
      {set.error ? <ErrorNote error={set.error} /> : null}
    </ConfirmDialog>
  );
}
