// An organisation's teams, searchable, in keyset pages: each with its members and live keys; a new
// team, a rename, a deletion (refused by the service while the team has live keys); and a team's
// members (?team=<id> in the address), added and removed. What is offered follows the session's
// allowed actions; the service refuses the rest.
import { useEffect, useState } from 'preact/hooks';
import { useAction } from '../action.ts';
import { api, query } from '../api.ts';
import { MemberPicker } from '../components/pickers.tsx';
import { Card, ConfirmDialog, ErrorNote, Note, PagedRows, SearchForm, Table } from '../components/ui.tsx';
import { usePaged } from '../data.ts';
import { day } from '../format.ts';
import { type OrgPlace, ROLE_TEXT } from '../org.ts';
import { type Location, navigate } from '../router.ts';
import type { TeamRow } from '../wire-types.ts';
import { searchOf } from './members.tsx';

export const teamsData = (loc: Location) => [api.teams('own', searchOf(loc))];

type Change = { kind: 'rename'; team: TeamRow } | { kind: 'delete'; team: TeamRow };

export function Teams(props: { place: OrgPlace; loc: Location }) {
  const { place, loc } = props;
  const q = searchOf(loc);
  const open = loc.query.get('team') ?? '';
  const list = usePaged((cursor) => api.teams(place.scope, q, cursor));
  const [change, setChange] = useState<Change | undefined>();
  const [done, setDone] = useState<string | undefined>();
  const go = (params: Record<string, string>) => navigate(`${place.pagePath}${query({ ...place.keep, q, ...params })}`);
  const finished = (message: string) => {
    setChange(undefined);
    setDone(message);
    list.reload();
  };
  const manage = place.can('teams.manage');
  return (
    <>
      <Card title="Teams">
        <SearchForm
          label="Search teams"
          placeholder="Part of a team’s name"
          value={q}
          onSearch={(text) => go({ q: text })}
        />
        {manage ? <NewTeam place={place} onMade={(t) => finished(`Team ${t.name} was made.`)} /> : null}
        {done ? <Note kind="ok">{done}</Note> : null}
        <PagedRows list={list} empty={q ? `No team matches “${q}”.` : 'No teams yet.'}>
          {(rows) => (
            <TeamTable
              rows={rows}
              place={place}
              onOpen={(t) => go({ team: t.team_id })}
              onChange={(c) => (setDone(undefined), setChange(c))}
            />
          )}
        </PagedRows>
        <TeamDialog place={place} change={change} onClose={() => setChange(undefined)} onDone={finished} />
      </Card>
      {open && place.can('members.read') ? (
        <TeamMembers
          place={place}
          teamId={open}
          name={list.data?.rows.find((t) => t.team_id === open)?.name}
          onClose={() => go({ team: '' })}
        />
      ) : null}
    </>
  );
}

function TeamTable(props: {
  rows: TeamRow[];
  place: OrgPlace;
  onOpen: (t: TeamRow) => void;
  onChange: (c: Change) => void;
}) {
  const { place } = props;
  return (
    <Table stack label="Teams" id="team-rows">
      <thead>
        <tr>
          <th>Team</th>
          <th class="num">Members</th>
          <th class="num">Live keys</th>
          <th>Made (UTC)</th>
          <th class="row-action" data-label="">
            Actions
          </th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((t) => (
          <tr key={t.team_id} data-team-id={t.team_id}>
            <td>{t.name}</td>
            <td class="num">{t.members}</td>
            <td class="num">{t.live_keys}</td>
            <td class="nowrap">{day(t.created_at)}</td>
            <td class="row-action">
              <div class="button-row">
                {place.can('members.read') ? (
                  <button type="button" class="button button-small" onClick={() => props.onOpen(t)}>
                    Members
                  </button>
                ) : null}
                {place.can('teams.manage') ? (
                  <>
                    <button
                      type="button"
                      class="button button-small"
                      onClick={() => props.onChange({ kind: 'rename', team: t })}
                    >
                      Rename…
                    </button>
                    <button
                      type="button"
                      class="button button-small button-danger"
                      onClick={() => props.onChange({ kind: 'delete', team: t })}
                    >
                      Delete…
                    </button>
                  </>
                ) : null}
              </div>
            </td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

function NewTeam(props: { place: OrgPlace; onMade: (t: TeamRow) => void }) {
  const [name, setName] = useState('');
  const make = useAction(async () => {
    const t = await api.createTeam(props.place.scope, name.trim());
    setName('');
    props.onMade(t);
  });
  return (
    <form
      class="inline-form"
      aria-label="New team"
      onSubmit={(e) => {
        e.preventDefault();
        void make.run();
      }}
    >
      <label class="field field-wide">
        <span>New team’s name</span>
        <input
          name="team-name"
          maxLength={200}
          value={name}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
      </label>
      <button type="submit" class="button button-primary" disabled={make.busy}>
        Make team
      </button>
      {make.error ? <ErrorNote error={make.error} /> : null}
    </form>
  );
}

/** Rename… or Delete… of a team, asked in a dialog. */
function TeamDialog(props: {
  place: OrgPlace;
  change: Change | undefined;
  onClose: () => void;
  onDone: (message: string) => void;
}) {
  const { change, place } = props;
  const [name, setName] = useState('');
  const act = useAction(async (c: Change) => {
    if (c.kind === 'rename') {
      const t = await api.renameTeam(place.scope, c.team.team_id, name.trim());
      props.onDone(`The team is now called ${t.name}.`);
    } else {
      await api.deleteTeam(place.scope, c.team.team_id);
      props.onDone(`Team ${c.team.name} was deleted.`);
    }
  });
  useEffect(() => {
    setName(change?.kind === 'rename' ? change.team.name : '');
    act.reset();
  }, [change]);
  return (
    <ConfirmDialog
      open={change !== undefined}
      title={change?.kind === 'delete' ? 'Delete this team?' : 'Rename this team'}
      confirmText={change?.kind === 'delete' ? 'Delete team' : 'Rename'}
      danger={change?.kind === 'delete'}
      busy={act.busy}
      onCancel={props.onClose}
      onConfirm={() => change && act.run(change)}
    >
      {change?.kind === 'rename' ? (
        <label class="field">
          <span>Name</span>
          <input
            name="rename"
            maxLength={200}
            value={name}
            onInput={(e) => setName((e.target as HTMLInputElement).value)}
          />
        </label>
      ) : (
        <p>
          <strong>{change?.team.name}</strong> is deleted; its members stay members of the organisation. A team with
          live keys is not deleted: revoke them first.
        </p>
      )}
      {act.error ? <ErrorNote error={act.error} /> : null}
    </ConfirmDialog>
  );
}

/** One team's members, in pages, with Add (a member of the organisation) and Remove. */
function TeamMembers(props: { place: OrgPlace; teamId: string; name: string | undefined; onClose: () => void }) {
  const { place, teamId } = props;
  const list = usePaged((cursor) => api.members(place.scope, '', teamId, cursor));
  const [adding, setAdding] = useState('');
  const change = useAction(async (send: () => Promise<unknown>, message: string) => {
    await send();
    setAdding('');
    list.reload();
    return message;
  });
  const manage = place.can('teams.manage');
  return (
    <Card
      title={props.name ? `Members of ${props.name}` : 'The team’s members'}
      id="team-members"
      actions={
        <button type="button" class="button button-small" onClick={props.onClose}>
          Close
        </button>
      }
    >
      {manage ? (
        <div class="inline-form">
          <MemberPicker scope={place.scope} label="Add a member" value={adding} onChange={setAdding} />
          <button
            type="button"
            class="button button-primary"
            disabled={!adding || change.busy}
            onClick={() => change.run(() => api.addTeamMember(place.scope, teamId, adding), 'Added to the team.')}
          >
            Add to the team
          </button>
        </div>
      ) : null}
      {change.error ? <ErrorNote error={change.error} /> : null}
      {change.done ? <Note kind="ok">{change.done}</Note> : null}
      <PagedRows list={list} empty="No one is in this team yet.">
        {(rows) => (
          <Table stack label="The team’s members" id="team-member-rows">
            <thead>
              <tr>
                <th>Name</th>
                <th>Role</th>
                <th class="row-action" data-label="">
                  Actions
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((m) => (
                <tr key={m.member_id} data-member-id={m.member_id}>
                  <td>{m.name}</td>
                  <td>{ROLE_TEXT[m.role]}</td>
                  <td class="row-action">
                    {manage ? (
                      <button
                        type="button"
                        class="button button-small"
                        onClick={() =>
                          change.run(
                            () => api.removeTeamMember(place.scope, teamId, m.member_id),
                            `${m.name} left the team.`,
                          )
                        }
                      >
                        Remove from team
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </Table>
        )}
      </PagedRows>
    </Card>
  );
}
