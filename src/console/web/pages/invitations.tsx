// Invitations of an organisation: a new one (a role, optionally a team, a note, how long it stays
// open) whose link is shown once, and the list with each one's state, the open ones revocable.
// The link is /console/#invite=<token>: its token travels in the fragment, which no browser sends
// to a server, and the invitation page takes it out of the address bar.
import { useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api } from '../api.ts';
import { TeamPicker } from '../components/pickers.tsx';
import { SecretOnce } from '../components/secret.tsx';
import { Badge, Card, ConfirmDialog, ErrorNote, Note, PagedRows, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { time } from '../format.ts';
import { type OrgPlace, ROLE_TEXT, ROLES } from '../org.ts';
import type { InvitationRow, OrgRole } from '../wire-types.ts';

const HOURS = [
  { value: 24, text: '1 day' },
  { value: 72, text: '3 days' },
  { value: 168, text: '7 days' },
  { value: 720, text: '30 days' },
];

const STATE_TONE: Record<string, 'ok' | 'neutral' | 'warn'> = {
  open: 'ok',
  used: 'neutral',
  expired: 'warn',
  revoked: 'neutral',
};

export function Invitations(props: { place: OrgPlace }) {
  const { place } = props;
  const list = usePaged((cursor) => api.invitations(place.scope, cursor));
  const [revoking, setRevoking] = useState<InvitationRow | undefined>();
  const revoke = useAction(async (inv: InvitationRow) => {
    await api.revokeInvitation(place.scope, inv.id);
    list.reload();
    return 'The invitation was revoked: its link no longer works.';
  });
  return (
    <Card title="Invitations" id="invitations">
      {place.can('invitations.create') ? <NewInvitation place={place} onMade={list.reload} /> : null}
      {revoke.error ? <ErrorNote error={revoke.error} /> : null}
      {revoke.done ? <Note kind="ok">{revoke.done}</Note> : null}
      <PagedRows list={list} empty="No invitations yet.">
        {(rows) => (
          <Table stack label="Invitations" id="invitation-rows">
            <thead>
              <tr>
                <th>Role</th>
                <th>Note</th>
                <th>Made by</th>
                <th>Expires (UTC)</th>
                <th>State</th>
                <th class="row-action" data-label="">
                  Actions
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((inv) => (
                <tr key={inv.id} data-invitation-id={inv.id}>
                  <td>
                    {ROLE_TEXT[inv.role]}
                    {inv.team_id ? <div class="muted small mono">team {inv.team_id}</div> : null}
                  </td>
                  <td>{inv.note || '—'}</td>
                  <td class="small mono">{inv.created_by}</td>
                  <td class="nowrap">{time(inv.expires_at)}</td>
                  <td>
                    <Badge tone={STATE_TONE[inv.state] ?? 'neutral'}>{inv.state}</Badge>
                  </td>
                  <td class="row-action">
                    {inv.state === 'open' && place.can('invitations.revoke') ? (
                      <button type="button" class="button button-small button-danger" onClick={() => setRevoking(inv)}>
                        Revoke…
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </Table>
        )}
      </PagedRows>
      <ConfirmDialog
        open={revoking !== undefined}
        title="Revoke this invitation?"
        confirmText="Revoke invitation"
        danger
        busy={revoke.busy}
        onCancel={() => setRevoking(undefined)}
        onConfirm={async () => {
          if (revoking) await revoke.run(revoking);
          setRevoking(undefined);
        }}
      >
        <p>Its link stops working at once. Whoever has it can no longer join with it.</p>
      </ConfirmDialog>
    </Card>
  );
}

/** The form for a new invitation, and its link once made. */
function NewInvitation(props: { place: OrgPlace; onMade: () => void }) {
  const { place } = props;
  const [role, setRole] = useState<OrgRole>('member');
  const [team, setTeam] = useState('');
  const [note, setNote] = useState('');
  const [hours, setHours] = useState(72);
  const make = useAction(async () => {
    const r = await api.createInvitation(place.scope, { role, team_id: team, note: note.trim(), valid_hours: hours });
    setNote('');
    props.onMade();
    return `${window.location.origin}/console/#invite=${r.token}`;
  });
  // Only an owner (or the operator) makes an owner: the others are not offered it.
  const roles = ROLES.filter((r) => r !== 'owner' || place.myRole === 'owner' || place.myRole === '');
  if (make.done)
    return (
      <SecretOnce
        title="The invitation link"
        secret={make.done}
        id="invitation-link"
        note="Send it to the person you invite: it works once, until it expires. It is shown this once."
        onHide={make.reset}
      />
    );
  return (
    <form
      class="inline-form invite-form"
      aria-label="New invitation"
      onSubmit={(e) => {
        e.preventDefault();
        void make.run();
      }}
    >
      <label class="field">
        <span>Role</span>
        <select name="role" value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value as OrgRole)}>
          {roles.map((r) => (
            <option key={r} value={r}>
              {ROLE_TEXT[r]}
            </option>
          ))}
        </select>
      </label>
      <label class="field">
        <span>Valid for</span>
        <select
          name="valid_hours"
          value={hours}
          onChange={(e) => setHours(Number((e.target as HTMLSelectElement).value))}
        >
          {HOURS.map((h) => (
            <option key={h.value} value={h.value}>
              {h.text}
            </option>
          ))}
        </select>
      </label>
      <label class="field field-wide">
        <span>Note (who it is for)</span>
        <input
          name="note"
          maxLength={200}
          value={note}
          onInput={(e) => setNote((e.target as HTMLInputElement).value)}
        />
      </label>
      <TeamPicker scope={place.scope} label="Team (optional)" value={team} onChange={setTeam} />
      <button type="submit" class="button button-primary" disabled={make.busy}>
        {make.busy ? 'Making…' : 'Make an invitation link'}
      </button>
      {make.error ? <ErrorNote error={make.error} /> : null}
    </form>
  );
}
