// An organisation's members, searchable, in keyset pages: each with their role (changed in place
// where the session may set roles), their teams and live keys; a one-time sign-in link for a
// member; and removal, which revokes the leaver's keys or hands them to another member or a team
// (the admin's choice). Every change asks first in a dialog; the service decides what is allowed
// (the last owner, an admin and an owner, raising one's own role) and its refusal is shown.
import { useEffect, useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api, query } from '../api.ts';
import { MemberPicker, TeamPicker } from '../components/pickers.tsx';
import { SecretOnce } from '../components/secret.tsx';
import { Badge, Card, ConfirmDialog, ErrorNote, Note, PagedRows, SearchForm, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { day } from '../format.ts';
import { type OrgPlace, ROLE_TEXT, ROLES } from '../org.ts';
import { type Location, navigate } from '../router.ts';
import type { MemberRow, OrgRole } from '../wire-types.ts';
import { Invitations } from './invitations.tsx';

export const searchOf = (loc: Location) => loc.query.get('q') ?? '';
export const membersData = (loc: Location) => [api.members('own', searchOf(loc))];

/** The members card and, for those who may see them, the invitations. */
export function Members(props: { place: OrgPlace; loc: Location }) {
  return (
    <>
      <MemberList {...props} />
      {props.place.can('invitations.read') ? <Invitations place={props.place} /> : null}
    </>
  );
}

type Change =
  | { kind: 'role'; member: MemberRow; role: OrgRole }
  | { kind: 'remove'; member: MemberRow }
  | { kind: 'link'; member: MemberRow };

function MemberList(props: { place: OrgPlace; loc: Location }) {
  const { place } = props;
  const q = searchOf(props.loc);
  const list = usePaged((cursor) => api.members(place.scope, q, '', cursor));
  const [change, setChange] = useState<Change | undefined>();
  const [done, setDone] = useState<string | undefined>();
  const finished = (message: string) => {
    setChange(undefined);
    setDone(message);
    list.reload();
  };
  return (
    <Card title="Members">
      <SearchForm
        label="Search members"
        placeholder="Part of a name"
        value={q}
        onSearch={(text) => navigate(`${place.pagePath}${query({ ...place.keep, q: text })}`)}
      />
      {done ? <Note kind="ok">{done}</Note> : null}
      <PagedRows list={list} empty={q ? `No member matches “${q}”.` : 'No members.'}>
        {(rows) => <MemberTable rows={rows} place={place} onChange={(c) => (setDone(undefined), setChange(c))} />}
      </PagedRows>
      <RoleDialog
        place={place}
        change={change?.kind === 'role' ? change : undefined}
        onClose={() => setChange(undefined)}
        onDone={finished}
      />
      <RemoveDialog
        place={place}
        change={change?.kind === 'remove' ? change : undefined}
        onClose={() => setChange(undefined)}
        onDone={finished}
      />
      <LinkDialog
        place={place}
        member={change?.kind === 'link' ? change.member : undefined}
        onClose={() => setChange(undefined)}
      />
    </Card>
  );
}

function MemberTable(props: { rows: MemberRow[]; place: OrgPlace; onChange: (c: Change) => void }) {
  const { place } = props;
  const setRoles = place.can('members.set_role');
  return (
    <Table stack label="Members" id="member-rows">
      <thead>
        <tr>
          <th>Name</th>
          <th>Role</th>
          <th class="num">Teams</th>
          <th class="num">Live keys</th>
          <th>Joined (UTC)</th>
          <th class="row-action" data-label="">
            Actions
          </th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((m) => (
          <tr key={m.member_id} data-member-id={m.member_id}>
            <td>
              {m.name}
              {m.member_id === place.memberId ? <Badge tone="neutral">you</Badge> : null}
              {m.telegram ? <div class="muted small">Telegram</div> : null}
            </td>
            <td>
              {setRoles ? (
                <select
                  name="role"
                  aria-label={`Role of ${m.name}`}
                  value={m.role}
                  onChange={(e) => {
                    const role = (e.target as HTMLSelectElement).value as OrgRole;
                    (e.target as HTMLSelectElement).value = m.role; // shown as it is until confirmed
                    if (role !== m.role) props.onChange({ kind: 'role', member: m, role });
                  }}
                >
                  {ROLES.map((r) => (
                    <option key={r} value={r}>
                      {ROLE_TEXT[r]}
                    </option>
                  ))}
                </select>
              ) : (
                ROLE_TEXT[m.role]
              )}
            </td>
            <td class="num">{m.team_ids.length}</td>
            <td class="num">{m.live_keys}</td>
            <td class="nowrap">{day(m.joined_at)}</td>
            <td class="row-action">
              <div class="button-row">
                {place.can('members.sign_in_link') ? (
                  <button
                    type="button"
                    class="button button-small"
                    onClick={() => props.onChange({ kind: 'link', member: m })}
                  >
                    Sign-in link…
                  </button>
                ) : null}
                {place.can('members.remove') && m.member_id !== place.memberId ? (
                  <button
                    type="button"
                    class="button button-small button-danger"
                    onClick={() => props.onChange({ kind: 'remove', member: m })}
                  >
                    Remove…
                  </button>
                ) : null}
              </div>
            </td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

interface DialogProps<C> {
  place: OrgPlace;
  change: C | undefined;
  onClose: () => void;
  onDone: (message: string) => void;
}

function RoleDialog(props: DialogProps<{ member: MemberRow; role: OrgRole }>) {
  const { change } = props;
  const act = useAction(async (memberId: string, role: OrgRole, name: string) => {
    await api.setRole(props.place.scope, memberId, role);
    props.onDone(`${name} is now ${ROLE_TEXT[role].toLowerCase()}.`);
  });
  useEffect(() => act.reset(), [change]);
  return (
    <ConfirmDialog
      open={change !== undefined}
      title="Change this member’s role?"
      confirmText="Change role"
      busy={act.busy}
      onCancel={props.onClose}
      onConfirm={() => change && act.run(change.member.member_id, change.role, change.member.name)}
    >
      <p>
        <strong>{change?.member.name}</strong> goes from {change ? ROLE_TEXT[change.member.role] : ''} to{' '}
        {change ? ROLE_TEXT[change.role] : ''}, from their next request on.
      </p>
      {act.error ? <ErrorNote error={act.error} /> : null}
    </ConfirmDialog>
  );
}

type KeysGo = 'revoke' | 'member' | 'team';

/** Removing a member: their keys revoked, or handed to a member or a team. */
function RemoveDialog(props: DialogProps<{ member: MemberRow }>) {
  const { change, place } = props;
  const [keys, setKeys] = useState<KeysGo>('revoke');
  const [heir, setHeir] = useState('');
  const act = useAction(async (m: MemberRow) => {
    const r = await api.removeMember(place.scope, m.member_id, {
      ...(keys === 'member' ? { hand_keys_to_member_id: heir } : {}),
      ...(keys === 'team' ? { hand_keys_to_team_id: heir } : {}),
    });
    props.onDone(
      `${m.name} was removed: ${r.keys_revoked} key(s) revoked, ${r.keys_handed_over} handed over, ${r.sessions_ended} console session(s) ended.`,
    );
  });
  useEffect(() => {
    setKeys('revoke');
    setHeir('');
    act.reset();
  }, [change]);
  return (
    <ConfirmDialog
      open={change !== undefined}
      title="Remove this member?"
      confirmText="Remove member"
      danger
      busy={act.busy}
      confirmDisabled={keys !== 'revoke' && heir === ''}
      onCancel={props.onClose}
      onConfirm={() => change && act.run(change.member)}
    >
      <p>
        <strong>{change?.member.name}</strong> leaves the organisation at once: their console sessions end and their{' '}
        {change?.member.live_keys ?? 0} live key(s) stop working for them.
      </p>
      <fieldset class="choices">
        <legend>Their keys</legend>
        {(
          [
            ['revoke', 'Revoke them all'],
            ['member', 'Hand them to another member'],
            ['team', 'Hand them to a team'],
          ] as const
        ).map(([value, text]) => (
          <label key={value} class="choice">
            <input
              type="radio"
              name="keys"
              value={value}
              checked={keys === value}
              onChange={() => (setKeys(value), setHeir(''))}
            />
            {text}
          </label>
        ))}
      </fieldset>
      {keys === 'member' ? (
        <MemberPicker
          scope={place.scope}
          label="Hand the keys to"
          value={heir}
          onChange={setHeir}
          exclude={change?.member.member_id}
        />
      ) : null}
      {keys === 'team' ? (
        <TeamPicker scope={place.scope} label="Hand the keys to" value={heir} onChange={setHeir} />
      ) : null}
      {act.error ? <ErrorNote error={act.error} /> : null}
    </ConfirmDialog>
  );
}

/** A one-time sign-in link for a member, made on request and shown once. */
function LinkDialog(props: { place: OrgPlace; member: MemberRow | undefined; onClose: () => void }) {
  const { member } = props;
  const act = useAction(async (memberId: string) => api.signInLink(props.place.scope, memberId));
  useEffect(() => act.reset(), [member]);
  const link = act.done ? `${window.location.origin}/console/#link=${act.done.token}` : '';
  return (
    <ConfirmDialog
      open={member !== undefined}
      title={`A sign-in link for ${member?.name ?? ''}`}
      confirmText={act.done ? 'Done' : 'Make the link'}
      busy={act.busy}
      onCancel={props.onClose}
      onConfirm={() => (act.done ? props.onClose() : member && act.run(member.member_id))}
    >
      {act.done ? (
        <SecretOnce
          title="The link"
          secret={link}
          id="sign-in-link"
          note="Send it to them yourself: it signs them in as themselves, once, within 10 minutes."
          onHide={props.onClose}
        />
      ) : (
        <p>A link that signs {member?.name} into the console once, within 10 minutes. It is shown once.</p>
      )}
      {act.error ? <ErrorNote error={act.error} /> : null}
    </ConfirmDialog>
  );
}
