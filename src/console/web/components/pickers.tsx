// Choosing one member or team of an organisation that may have thousands: a search box and the
// first page of what matches, as a list to pick from (never the whole list at once).
import { useEffect, useId, useState } from 'preact/hooks';
import { api, type OrgScope, type Read } from '../api.ts';
import { useApi } from '../data.ts';
import type { Page } from '../wire-types.ts';

interface Option {
  value: string;
  text: string;
}

function Picker<T>(props: {
  label: string;
  /** The page of matches for a search text. */
  read: (q: string) => Read<Page<T>>;
  option: (row: T) => Option;
  value: string;
  onChange: (value: string) => void;
  /** Left out of the choice (e.g. the member who leaves). */
  exclude?: string;
  name: string;
}) {
  const [typed, setTyped] = useState('');
  const [q, setQ] = useState('');
  // Asked once typing pauses, not on every key.
  useEffect(() => {
    const t = setTimeout(() => setQ(typed.trim()), 250);
    return () => clearTimeout(t);
  }, [typed]);
  const found = useApi(props.read(q));
  const options = (found.data?.rows ?? []).map(props.option).filter((o) => o.value !== props.exclude);
  const searchId = useId();
  return (
    <div class="picker">
      <label class="field" for={searchId}>
        <span>{props.label}: search</span>
        <input
          id={searchId}
          type="search"
          name={`${props.name}-search`}
          placeholder="Type part of the name"
          value={typed}
          onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
        />
      </label>
      <label class="field">
        <span>{props.label}</span>
        <select
          name={props.name}
          value={props.value}
          onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}
        >
          <option value="">{found.loading ? 'Searching…' : options.length ? 'Choose…' : 'None matches'}</option>
          {options.map((o) => (
            <option key={o.value} value={o.value}>
              {o.text}
            </option>
          ))}
        </select>
      </label>
    </div>
  );
}

export function MemberPicker(props: {
  scope: OrgScope;
  label?: string;
  value: string;
  onChange: (memberId: string) => void;
  exclude?: string;
}) {
  return (
    <Picker
      name="member"
      label={props.label ?? 'Member'}
      read={(q) => api.members(props.scope, q)}
      option={(m) => ({ value: m.member_id, text: `${m.name} (${m.role})` })}
      value={props.value}
      onChange={props.onChange}
      exclude={props.exclude}
    />
  );
}

export function TeamPicker(props: {
  scope: OrgScope;
  label?: string;
  value: string;
  onChange: (teamId: string) => void;
}) {
  return (
    <Picker
      name="team"
      label={props.label ?? 'Team'}
      read={(q) => api.teams(props.scope, q)}
      option={(t) => ({ value: t.team_id, text: t.name })}
      value={props.value}
      onChange={props.onChange}
    />
  );
}
