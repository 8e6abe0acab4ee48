// The frame around every signed-in page: the product name, the pages of the session's role, who
// is signed in and Sign out. On a narrow screen the pages fold behind a Menu button.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ROLE_TEXT } from '../org.ts';
import type { Me } from '../wire-types.ts';

export interface NavItem {
  path: string;
  text: string;
}

export function Shell(props: {
  me: Me;
  nav: NavItem[];
  /** The nav item of the page shown. */
  current: string;
  onSignOut: () => void;
  children: ComponentChildren;
}) {
  const [open, setOpen] = useState(false);
  useEffect(() => setOpen(false), [props.current]);
  const { me } = props;
  const who =
    me.role === 'operator'
      ? 'Operator'
      : me.role === 'member' && me.organisation
        ? `${me.member_name} · ${ROLE_TEXT[me.organisation.role]}`
        : `Key ${me.key_prefix ?? ''}…`;
  return (
    <div class="shell">
      <header class="topbar">
        <div class="topbar-inner">
          <a class="brand" href={props.nav[0]?.path ?? '/console'}>
            <span class="brand-mark" aria-hidden="true" />
            Gateway console
          </a>
          <button
            type="button"
            class="menu-button"
            aria-expanded={open}
            aria-controls="main-nav"
            onClick={() => setOpen(!open)}
          >
            Menu
          </button>
          <nav id="main-nav" class={open ? 'nav nav-open' : 'nav'} aria-label="Pages">
            {props.nav.map((item) => (
              <a
                key={item.path}
                href={item.path}
                class={item.path === props.current ? 'nav-link active' : 'nav-link'}
                aria-current={item.path === props.current ? 'page' : undefined}
              >
                {item.text}
              </a>
            ))}
            <div class="nav-session">
              <span class="who" data-role={props.me.role}>
                {who}
              </span>
              <button type="button" class="button button-quiet" onClick={props.onSignOut}>
                Sign out
              </button>
            </div>
          </nav>
        </div>
      </header>
      <main class="content">{props.children}</main>
    </div>
  );
}
