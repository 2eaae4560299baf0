// Inventory: the machines the cluster expects (zero-touch enrollment),
// how each is recognised and what became of it. The document is applied
// with `stratum inventory apply -f FILE`; the console shows it.
import { api } from '../api.js';
import { h, page, table, scroll, empty, refresh, fingerprint } from '../dom.js';
import { kv, networks, when } from '../format.js';

const HEADERS = ['Node', 'Role', 'State', 'Management IP', 'AZ', 'Networks', 'Labels', 'Recognised by'];
const REFRESH_MS = 15000;

export function mount(main) {
  const p = page(main, 'Inventory', 'The machines the cluster expects. A registration an entry recognises is approved with its assignment without a person; apply the document with stratum inventory apply -f FILE.');
  const ctrl = new AbortController();
  const summary = h('p', { class: 'summary-line' });
  const tbl = table(HEADERS, { class: 'grid inventory' });
  const tbody = h('tbody');
  tbl.append(tbody);
  p.body.append(summary, scroll(tbl));

  async function load() {
    try {
      const out = await api('GET', '/v1/admin/inventory', undefined, { signal: ctrl.signal });
      const ms = out.machines || [];
      const count = (s) => ms.filter((m) => m.state === s).length;
      summary.replaceChildren(h('span', { 'data-inventory': ms.length }, String(ms.length), ms.length === 1 ? ' machine' : ' machines'),
        ' · ', String(count('member')), ' members · ', String(count('joining')), ' joining · ', String(count('expected')), ' expected',
        ...(out.updatedBy ? [' · applied by ', out.updatedBy, ' at ', when(out.updatedAt)] : []));
      tbody.replaceChildren(...(ms.length ? ms.map(row) : [empty('No inventory: every join waits for a person.', HEADERS.length)]));
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

function row(m) {
  return h('tr', { 'data-inventory-node': m.nodeId, 'data-state': m.state },
    h('td', null, h('strong', null, m.hostname || h('span', { class: 'muted' }, '(no hostname)')), h('div', { class: 'sub' }, h('code', null, m.nodeId))),
    h('td', null, m.role),
    h('td', null, h('span', { class: 'badge state state-' + stateClass(m.state) }, m.state),
      m.joinId ? h('div', { class: 'sub' }, h('code', null, m.joinId)) : null),
    h('td', null, h('code', null, m.mgmtIp)),
    h('td', null, m.az || h('span', { class: 'muted' }, 'none')),
    h('td', { class: 'pre' }, networks(m.networks)),
    h('td', { class: 'pre' }, kv(m.labels)),
    h('td', null, match(m.match || {})));
}

// stateClass borrows the members' colours: a member is active, a joining
// entry is joining, an expected one is pending.
function stateClass(state) {
  return { member: 'active', joining: 'joining', expected: 'pending' }[state] || state;
}

function match(m) {
  if (m.ekSha256) return h('span', null, 'TPM EK ', h('code', { title: m.ekSha256 }, m.ekSha256.slice(0, 16) + '…'));
  if (m.ekCertSha256) return h('span', null, 'TPM EK certificate ', h('code', { title: m.ekCertSha256 }, m.ekCertSha256.slice(0, 16) + '…'));
  return h('span', null, 'key ', fingerprint(m.keyFingerprint || ''));
}
