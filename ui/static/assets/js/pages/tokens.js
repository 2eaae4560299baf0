// Join tokens: create one (the answer's exact join command, with the
// secret, is shown once, with a copy button), list them, revoke them.
import { api, can } from '../api.js';
import { h, page, table, scroll, empty, describeError, copyText, id } from '../dom.js';
import { when } from '../format.js';
import { field, clearErrors, showFormError, formError } from '../forms.js';

const HEADERS = ['Token', 'Role', 'Description', 'Uses left', 'State', 'Created', 'Expires', ''];

export function mount(main) {
  const p = page(main, 'Join tokens', 'A join token lets one or more machines register. Its secret is shown once, inside the join command.');
  const ctrl = new AbortController();
  const tbl = table(HEADERS, { class: 'grid tokens' });
  const tbody = h('tbody');
  tbl.append(tbody);
  const created = h('div', { class: 'created', hidden: true });
  if (can('join:CreateJoinToken')) p.body.append(createForm(created, load), created);
  p.body.append(h('h2', null, 'Tokens'), scroll(tbl));

  async function load() {
    try {
      const out = await api('GET', '/v1/admin/join/tokens', undefined, { signal: ctrl.signal });
      const ts = (out.tokens || []).slice().sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt));
      tbody.replaceChildren(...(ts.length ? ts.map((t) => row(t, p, load)) : [empty('No join token yet.', HEADERS.length)]));
      p.clearError();
    } catch (err) {
      if (!ctrl.signal.aborted) p.showError(err);
    }
  }
  load();
  return { stop: () => ctrl.abort() };
}

function createForm(created, reload) {
  const role = h('select', { name: 'role' }, ['worker', 'control-plane', 'postgres'].map((r) => h('option', { value: r }, r)));
  const submit = h('button', { type: 'submit', class: 'primary', 'data-action': 'create-token' }, 'Create token');
  const form = h('form', { class: 'inline-form create-token', novalidate: true },
    h('h2', null, 'Create a join token'),
    h('div', { class: 'fields' },
      field('Role', role, 'the role every machine joining with it gets'),
      field('Valid for', h('input', { name: 'ttl', value: '24h', size: 8, spellcheck: 'false' }), 'a duration: 30m, 24h'),
      field('Uses', h('input', { name: 'uses', type: 'number', min: 1, value: 1, size: 4 }), 'registrations it admits'),
      field('Description', h('input', { name: 'description', size: 32 }), 'for the list and the audit log')),
    formError(), h('div', { class: 'buttons' }, submit));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(form);
    const val = (n) => form.elements.namedItem(n).value.trim();
    const uses = Number(val('uses'));
    submit.disabled = true;
    try {
      const out = await api('POST', '/v1/admin/join/tokens', {
        role: val('role'), ttl: val('ttl'), uses: Number.isInteger(uses) ? uses : -1, description: val('description'),
      });
      showCreated(created, out);
      reload();
    } catch (err) {
      showFormError(form, err, describeError);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

function showCreated(box, out) {
  const cmd = h('code', { 'data-join-command': '' }, out.joinCommand);
  const copied = h('span', { class: 'copied', role: 'status' });
  const copy = h('button', {
    type: 'button', 'data-action': 'copy-join-command',
    onclick: async () => {
      copied.textContent = (await copyText(out.joinCommand, cmd)) ? 'Copied.' : 'Select the command and copy it.';
    },
  }, 'Copy');
  box.replaceChildren(
    h('h3', null, 'Token ', id(out.tokenId), ' created'),
    h('p', null, 'Run this on the new machine. The secret in it is shown only now; the founder keeps only its hash.'),
    h('div', { class: 'command' }, h('pre', null, cmd), h('div', { class: 'buttons' }, copy, copied)),
    h('p', { class: 'sub' }, 'Role ' + out.role + ' · ' + out.usesLeft + (out.usesLeft === 1 ? ' use' : ' uses') + ' · expires ' + when(out.expiresAt)));
  box.hidden = false;
}


function row(t, p, reload) {
  const actions = h('td', { class: 'actions' });
  if (t.state === 'active' && can('join:RevokeJoinToken')) {
    const revoke = h('button', { type: 'button', class: 'danger', 'data-action': 'revoke-token' }, 'Revoke');
    revoke.addEventListener('click', async () => {
      if (revoke.dataset.confirm !== 'yes') {
        revoke.dataset.confirm = 'yes';
        revoke.textContent = 'Revoke: sure?';
        return;
      }
      revoke.disabled = true;
      try {
        await api('DELETE', '/v1/admin/join/tokens/' + encodeURIComponent(t.tokenId));
        reload();
      } catch (err) {
        p.showError(err);
        revoke.disabled = false;
      }
    });
    actions.append(revoke);
  }
  return h('tr', { 'data-token-id': t.tokenId, 'data-state': t.state },
    h('td', null, id(t.tokenId), h('div', { class: 'sub' }, 'by ' + t.createdBy)),
    h('td', null, t.role),
    h('td', null, t.description || h('span', { class: 'muted' }, '—')),
    h('td', { class: 'num' }, t.usesLeft + ' of ' + t.uses),
    h('td', null, h('span', { class: 'badge token-' + t.state }, t.state)),
    h('td', null, when(t.createdAt)),
    h('td', null, when(t.expiresAt)),
    actions);
}
