// Members: the cluster's nodes, their membership generation and, once the
// founder's boot-health prober has reached them, their boot state.
import { api, can } from '../api.js';
import { h, page, table, scroll, empty, refresh, describeError, hostname, id } from '../dom.js';
import { duration, kv, networks, when } from '../format.js';
import { field, showFormError, formError, onConfirmedSubmit, reasonBody } from '../forms.js';

const HEADERS = ['Node', 'Role', 'State', 'Management IP', 'AZ', 'Networks', 'Labels', 'Generation', 'Boot', 'Joined', ''];
const REFRESH_MS = 15000; // the prober's default interval

export function mount(main) {
  const p = page(main, 'Members', 'Every node in the cluster. Boot state comes from the founder\'s probe of each node\'s agent.');
  const ctrl = new AbortController();
  const summary = h('p', { class: 'summary-line' });
  const tbl = table(HEADERS, { class: 'grid members' });
  const tbody = h('tbody');
  tbl.append(tbody);
  p.body.append(summary, scroll(tbl));
  // open is the remove form of one member ({nodeId, row}): kept across
  // the refreshes, so what the operator typed stays.
  let open = null;

  function closeForm() {
    if (open) open.row.remove();
    open = null;
  }

  // openForm asks for the reason and a confirmation before removing m
  // (it cannot be undone: the node must join again with a new token).
  function openForm(m) {
    if (open && open.nodeId === m.nodeId) return;
    closeForm();
    const name = m.hostname || m.nodeId;
    const submit = h('button', { type: 'submit', class: 'danger', 'data-action': 'submit-remove' }, 'Remove ' + name);
    const confirmLine = h('p', { class: 'confirm', role: 'alert', hidden: true });
    const form = h('form', { class: 'inline-form remove', novalidate: true },
      h('h3', null, 'Remove ', id(m.nodeId), ' from the cluster'),
      h('p', { class: 'sub' }, 'For a node whose machine is gone: the joins waiting for it to apply their generation complete, ' +
        'its certificate and OpenBao node token stop counting and its addresses are free. To come back it joins again with a new token.'),
      h('div', { class: 'fields' }, field('Reason', h('textarea', { name: 'reason', rows: 2, maxlength: 1024 }), 'required: kept in the audit log')),
      formError(), confirmLine,
      h('div', { class: 'buttons' }, submit, h('button', { type: 'button', onclick: closeForm }, 'Close')));
    onConfirmedSubmit(form, submit, confirmLine, (f) => reasonBody(f, 'for the audit log'), 'Remove ' + name + ' for good?', async (body) => {
      submit.disabled = true;
      try {
        await api('POST', '/v1/admin/cluster/members/' + encodeURIComponent(m.nodeId) + '/remove', body);
        closeForm();
        await load();
      } catch (err) {
        showFormError(form, err, describeError);
      } finally {
        submit.disabled = false;
      }
    });
    open = { nodeId: m.nodeId, row: h('tr', { class: 'form-row', 'data-remove-form': m.nodeId }, h('td', { colspan: HEADERS.length }, form)) };
    const at = tbody.querySelector(`tr[data-node-id="${CSS.escape(m.nodeId)}"]`);
    if (at) at.after(open.row);
    form.querySelector('textarea').focus();
  }

  async function load() {
    try {
      const out = await api('GET', '/v1/admin/cluster/members', undefined, { signal: ctrl.signal });
      const ms = out.members || [];
      const behind = ms.filter((m) => isBehind(m, out.generation));
      summary.replaceChildren('Membership generation ', h('strong', null, String(out.generation)), ' · ',
        String(ms.length), ms.length === 1 ? ' member' : ' members',
        ...(behind.length ? [' · ', h('span', { class: 'badge warn', 'data-members-behind': behind.length },
          behind.length + ' not on generation ' + out.generation)] : []));
      // In join order: the first is the founder, which cannot remove
      // itself; a joining member's join is cancelled instead.
      const removable = (m, i) => i > 0 && m.state === 'active' && can('cluster:RemoveMember');
      tbody.replaceChildren(...(ms.length ? ms.map((m, i) => row(m, out.generation, removable(m, i) ? () => openForm(m) : null)) : [empty('No members.', HEADERS.length)]));
      const still = open && tbody.querySelector(`tr[data-node-id="${CSS.escape(open.nodeId)}"]`);
      if (still) still.after(open.row);
      else open = null;
      p.clearError();
      return true;
    } catch (err) {
      if (!ctrl.signal.aborted) p.showError(err);
      return err.status !== 401 && err.status !== 403;
    }
  }

  refresh(load, REFRESH_MS, ctrl.signal);
  return { stop: () => ctrl.abort() };
}

// isBehind: a joining or active member that has not applied the current
// generation holds every join that waits for it (SPEC 17).
function isBehind(m, generation) {
  return (m.state === 'joining' || m.state === 'active') && m.appliedGeneration < generation;
}

// row is one member; remove, when given, opens its remove form.
function row(m, generation, remove) {
  const behind = isBehind(m, generation);
  return h('tr', { 'data-node-id': m.nodeId, 'data-state': m.state, 'data-behind': behind ? 'yes' : false, class: behind ? 'behind' : '' },
    h('td', null, m.hostname ? hostname(m.hostname) : h('strong', null, h('span', { class: 'muted' }, '(no hostname)')), h('div', { class: 'sub' }, id(m.nodeId))),
    h('td', null, m.role),
    h('td', null, h('span', { class: 'badge state state-' + m.state }, m.state)),
    h('td', null, h('code', null, m.mgmtIp)),
    h('td', null, m.az || h('span', { class: 'muted' }, 'none')),
    h('td', { class: 'pre' }, networks(m.networks)),
    h('td', { class: 'pre' }, kv(m.labels)),
    h('td', null, 'admitted ' + m.generation, h('div', { class: 'sub' }, 'applied ' + m.appliedGeneration),
      behind ? h('div', { class: 'badge warn' }, 'behind: generation ' + generation + ' not applied') : null),
    h('td', null, boot(m)),
    h('td', null, when(m.joinedAt)),
    h('td', { class: 'actions' }, remove ? h('button', { type: 'button', class: 'danger', 'data-action': 'remove', onclick: remove }, 'Remove') : null));
}

// boot shows the prober's view; a member not probed yet has no bootState
// (the seed allows its absence), which is said rather than guessed.
function boot(m) {
  if (!m.bootState) return h('span', { class: 'muted', 'data-boot-state': '' }, 'not probed yet');
  const parts = [h('span', { class: 'badge boot-' + m.bootState, 'data-boot-state': m.bootState }, m.bootState)];
  if (m.bootPhase) parts.push(h('div', { class: 'sub' }, m.bootPhase + (m.bootPhaseMs !== undefined ? ' · ' + duration(m.bootPhaseMs) : '')));
  if (m.lastBootMs) parts.push(h('div', { class: 'sub' }, 'last boot ' + duration(m.lastBootMs)));
  return parts;
}
