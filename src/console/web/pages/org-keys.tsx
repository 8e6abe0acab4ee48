// An organisation's keys. A member sees the key they signed in with (rotate it: the session goes on
// with the new one), their own keys (make one, rotate, revoke) and, where their role reads every
// key, the organisation's: whose each is (a member's or a team's), made for a member or a team by
// those who manage keys. A new or rotated key is shown once. The operator sees every key.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api, type KeyFilter } from '../api.ts';
import { MemberPicker, TeamPicker } from '../components/pickers.tsx';
import { SecretOnce } from '../components/secret.tsx';
import { Badge, Card, ConfirmDialog, ErrorNote, PagedRows, Segmented, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { day } from '../format.ts';
import type { OrgPlace } from '../org.ts';
import type { Location } from '../router.ts';
import type { Me, NewOrgKey, OrgKeyRow } from '../wire-types.ts';
import { SessionKey } from './key.tsx';

export const orgKeysData = (_loc: Location) => [api.orgKeys('own', { mine: true })];

export function OrgKeys(props: { place: OrgPlace; me?: Me; onRotated?: (prefix: string, keyId: string) => void }) {
  const { place, me } = props;
  // A key made or rotated here: shown once, above the lists.
  const [fresh, setFresh] = useState<NewOrgKey | undefined>();
  const [round, setRound] = useState(0);
  const shown = (k: NewOrgKey) => {
    setFresh(k);
    setRound((n) => n + 1);
  };
  const sessionKeyId = me?.key_id ?? '';
  return (
    <>
      {me?.key_id && props.onRotated ? <SessionKey me={me} onRotated={props.onRotated} /> : null}
      {fresh ? (
        <SecretOnce
          title={`The new key ${fresh.key.prefix}…`}
          secret={fresh.api_key}
          id="new-org-key"
          note="Copy it now: it is shown this once."
          onHide={() => setFresh(undefined)}
        />
      ) : null}
      {place.scope === 'own' ? (
        <KeyList
          title="Your keys"
          id="own-keys"
          place={place}
          filter={{ mine: true }}
          round={round}
          sessionKeyId={sessionKeyId}
          onNew={shown}
          onRotated={props.onRotated}
          maker={<NewKey place={place} onMade={shown} own />}
        />
      ) : null}
      {place.can('keys.read') ? (
        <KeyList
          title="Every key of the organisation"
          id="all-keys"
          place={place}
          filter={{}}
          round={round}
          sessionKeyId={sessionKeyId}
          onNew={shown}
          onRotated={props.onRotated}
          maker={place.can('keys.manage') ? <NewKey place={place} onMade={shown} /> : null}
        />
      ) : null}
    </>
  );
}

function KeyList(props: {
  title: string;
  id: string;
  place: OrgPlace;
  filter: KeyFilter;
  round: number;
  sessionKeyId: string;
  onNew: (k: NewOrgKey) => void;
  onRotated: ((prefix: string, keyId: string) => void) | undefined;
  maker: ComponentChildren;
}) {
  const { place } = props;
  const [revoked, setRevoked] = useState(false);
  const list = usePaged((cursor) => api.orgKeys(place.scope, { ...props.filter, revoked }, cursor));
  // A key was made or rotated on this page: ask again.
  useEffect(() => {
    if (props.round) list.reload();
  }, [props.round]);
  const [change, setChange] = useState<KeyChange | undefined>();
  const act = useAction(async (c: KeyChange) => {
    if (c.kind === 'rotate') {
      const k = await api.rotateOrgKey(place.scope, c.key.key_id);
      if (c.key.key_id === props.sessionKeyId) props.onRotated?.(k.key.prefix, k.key.key_id);
      props.onNew(k);
    } else await api.revokeOrgKey(place.scope, c.key.key_id);
    list.reload();
  });
  const mayChange = (k: OrgKeyRow) =>
    !k.revoked_at && (place.can('keys.manage') || (k.member_id !== '' && k.member_id === place.memberId));
  return (
    <Card
      title={props.title}
      id={props.id}
      actions={
        <Segmented
          label="Which keys"
          value={revoked ? 'all' : 'live'}
          options={[
            { value: 'live', text: 'Live' },
            { value: 'all', text: 'With revoked' },
          ]}
          onChange={(v) => setRevoked(v === 'all')}
        />
      }
    >
      {props.maker}
      {act.error ? <ErrorNote error={act.error} /> : null}
      <PagedRows list={list} empty="No keys.">
        {(rows) => (
          <KeyTable
            id={`${props.id}-rows`}
            label={props.title}
            rows={rows}
            sessionKeyId={props.sessionKeyId}
            mayChange={mayChange}
            onChange={(c) => (act.reset(), setChange(c))}
          />
        )}
      </PagedRows>
      <KeyChangeDialog
        change={change}
        busy={act.busy}
        sessionKeyId={props.sessionKeyId}
        onCancel={() => setChange(undefined)}
        onConfirm={async () => {
          if (change) await act.run(change);
          setChange(undefined);
        }}
      />
    </Card>
  );
}

type KeyChange = { kind: 'rotate' | 'revoke'; key: OrgKeyRow };

/** Rotate… or Revoke… of a key, asked in a dialog that says what stops working. */
function KeyChangeDialog(props: {
  change: KeyChange | undefined;
  busy: boolean;
  sessionKeyId: string;
  onCancel: () => void;
  onConfirm: () => void;
}) {
  const { change } = props;
  return (
    <ConfirmDialog
      open={change !== undefined}
      title={change?.kind === 'rotate' ? 'Rotate this key?' : 'Revoke this key?'}
      confirmText={change?.kind === 'rotate' ? 'Rotate key' : 'Revoke key'}
      danger
      busy={props.busy}
      onCancel={props.onCancel}
      onConfirm={props.onConfirm}
    >
      <p>
        The key <span class="mono">{change?.key.prefix}…</span> stops working at once, for every program that uses it
        {change?.kind === 'rotate' ? '; the new one is shown once' : ''}.
        {change?.key.key_id === props.sessionKeyId && change?.kind === 'revoke'
          ? ' It is the key you signed in with: this signs you out.'
          : ''}
      </p>
    </ConfirmDialog>
  );
}

function KeyTable(props: {
  id: string;
  label: string;
  rows: OrgKeyRow[];
  sessionKeyId: string;
  mayChange: (k: OrgKeyRow) => boolean;
  onChange: (c: { kind: 'rotate' | 'revoke'; key: OrgKeyRow }) => void;
}) {
  return (
    <Table stack label={props.label} id={props.id}>
      <thead>
        <tr>
          <th>Key</th>
          <th>Whose</th>
          <th>Made (UTC)</th>
          <th>State</th>
          <th class="row-action" data-label="">
            Actions
          </th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((k) => (
          <tr key={k.key_id} data-key-id={k.key_id}>
            <td>
              <span class="mono">{k.prefix}…</span>
              {k.name ? <div class="small">{k.name}</div> : null}
              {k.key_id === props.sessionKeyId ? <Badge tone="neutral">this session’s key</Badge> : null}
            </td>
            <td>{k.team_id ? `Team ${k.team_name}` : k.member_name}</td>
            <td class="nowrap">{day(k.created_at)}</td>
            <td>
              {k.revoked_at ? <Badge tone="neutral">revoked {day(k.revoked_at)}</Badge> : <Badge tone="ok">live</Badge>}
            </td>
            <td class="row-action">
              {props.mayChange(k) ? (
                <div class="button-row">
                  <button
                    type="button"
                    class="button button-small"
                    onClick={() => props.onChange({ kind: 'rotate', key: k })}
                  >
                    Rotate…
                  </button>
                  <button
                    type="button"
                    class="button button-small button-danger"
                    onClick={() => props.onChange({ kind: 'revoke', key: k })}
                  >
                    Revoke…
                  </button>
                </div>
              ) : null}
            </td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

/** A new key: the member's own, or (managing keys) a member's or a team's. */
function NewKey(props: { place: OrgPlace; onMade: (k: NewOrgKey) => void; own?: boolean }) {
  const { place } = props;
  const [name, setName] = useState('');
  const [holder, setHolder] = useState<'member' | 'team'>('member');
  const [who, setWho] = useState('');
  const make = useAction(async () => {
    const body = props.own ? { name } : holder === 'team' ? { team_id: who, name } : { member_id: who, name };
    const k = await api.createOrgKey(place.scope, body);
    setName('');
    props.onMade(k);
  });
  return (
    <form
      class="inline-form"
      aria-label={props.own ? 'New key of your own' : 'New key for a member or a team'}
      onSubmit={(e) => {
        e.preventDefault();
        void make.run();
      }}
    >
      {props.own ? null : (
        <>
          <Segmented
            label="For"
            value={holder}
            options={[
              { value: 'member', text: 'A member' },
              { value: 'team', text: 'A team' },
            ]}
            onChange={(v) => (setHolder(v), setWho(''))}
          />
          {holder === 'member' ? (
            <MemberPicker scope={place.scope} label="For the member" value={who} onChange={setWho} />
          ) : (
            <TeamPicker scope={place.scope} label="For the team" value={who} onChange={setWho} />
          )}
        </>
      )}
      <label class="field field-wide">
        <span>The key’s name (optional)</span>
        <input
          name="key-name"
          maxLength={200}
          value={name}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
      </label>
      <button type="submit" class="button button-primary" disabled={make.busy || (!props.own && !who)}>
        {props.own ? 'Make a key' : 'Make the key'}
      </button>
      {make.error ? <ErrorNote error={make.error} /> : null}
    </form>
  );
}
