// The console's entry point: the session, the navigation and the router.
// Every page path (/ui/joins, /ui/members, ...) loads this same shell and
// renders the page its address names; links change pages with the
// History API, so a reload or a bookmark lands on the same page.
import { api, session, loadSelf, whenUnauthenticated } from './api.js';
import { h, describeError } from './dom.js';
import * as login from './pages/login.js';
import * as joins from './pages/joins.js';
import * as members from './pages/members.js';
import * as inventory from './pages/inventory.js';
import * as releaseSet from './pages/releaseset.js';
import * as releases from './pages/releases.js';
import * as tokens from './pages/tokens.js';
import * as audit from './pages/audit.js';

const pages = {
  joins, members, inventory, 'release-set': releaseSet, releases, tokens, audit,
};

let current = null;
// ended is why the last session ended (the API's refusal), shown once on
// the sign-in page so a revoked or expired session is not a silent logout.
let ended = '';

function pageName() {
  const name = location.pathname.replace(/^\/ui\/?/, '').replace(/\/$/, '');
  return name || 'joins';
}

function stopCurrent() {
  if (current && current.stop) current.stop();
  current = null;
}

async function render() {
  stopCurrent();
  const main = document.getElementById('main');
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  if (!session.token()) {
    nav.hidden = true;
    document.getElementById('isolated').hidden = true;
    who.replaceChildren();
    current = login.mount(main, { onLogin: render, ended });
    ended = '';
    return;
  }
  let self;
  try {
    self = await loadSelf();
  } catch (err) {
    if (err.status === 401) return; // whenUnauthenticated renders the login
    main.replaceChildren(h('div', { class: 'page-error', role: 'alert' }, ...describeError(err)));
    return;
  }
  showIsolation();
  const name = pageName();
  nav.hidden = false;
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  who.replaceChildren(
    h('span', { class: 'subject', title: 'signed in as (' + self.subject + ')' }, self.user || self.subject),
    h('button', { type: 'button', class: 'link', 'data-action': 'logout', onclick: logout }, 'Sign out'));
  const page = pages[name];
  if (!page) {
    main.replaceChildren(h('h1', null, 'Not found'), h('p', null, 'No console page ', h('code', null, location.pathname), '.'));
    return;
  }
  current = page.mount(main, { self });
}

// showIsolation shows, on every page, that this founder was restored from
// a backup and reaches no node until an operator takes it over
// (docs/restore-drill.md); /version names it to a signed-in caller.
async function showIsolation() {
  const banner = document.getElementById('isolated');
  let iso = null;
  try {
    iso = (await api('GET', '/version')).isolated || null;
  } catch {
    // The pages say what failed; the banner keeps its last state.
    return;
  }
  banner.hidden = !iso;
  banner.dataset.checked = 'yes';
  if (iso) {
    banner.replaceChildren(h('strong', null, 'Isolated: '),
      'restored from ', h('code', null, iso.backup), ' at ', iso.restoredAt, '. ', iso.message);
  }
}

async function logout() {
  try {
    await api('POST', '/v1/auth/logout');
  } catch {
    // An older founder has no logout endpoint; the session still ends here.
  }
  session.clear();
  render();
}

export function navigate(href) {
  if (href !== location.pathname) history.pushState(null, '', href);
  render();
}

document.addEventListener('click', (e) => {
  const a = e.target.closest('a[href^="/ui/"]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', render);
whenUnauthenticated((err) => {
  ended = (err && err.message) || 'the founder no longer accepts it';
  render();
});
render();
