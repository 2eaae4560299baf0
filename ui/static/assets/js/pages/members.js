// Members: the cluster's nodes, their membership generation and, once the
// founder's boot-health prober has reached them, their boot state.
import { api } from '../api.js';
import { h, page, table, scroll, empty, sleep } from '../dom.js';
import { duration, kv, networks, when } from '../format.js';

const HEADERS = ['Node', 'Role', 'State', 'Management IP', 'AZ', 'Networks', 'Labels', 'Generation', 'Boot', 'Joined'];
const REFRESH_MS = 15000; // the prober's default interval

export function mount(main) {
  const p = page(main, 'Members', 'Every node in the cluster. Boot state comes from the founder\'s probe of each node\'s agent.');
  const ctrl = new AbortController();
  const summary = h('p', { class: 'summary-line' });
  const tbl = table(HEADERS, { class: 'grid members' });
  const tbody = h('tbody');
  tbl.append(tbody);
  p.body.append(summary, scroll(tbl));

  async function load() {
    try {
      const out = await api('GET', '/v1/admin/cluster/members', undefined, { signal: ctrl.signal });
      const ms = out.members || [];
      const behind = ms.filter((m) => isBehind(m, out.generation));
      summary.replaceChildren('Membership generation ', h('strong', null, String(out.generation)), ' · ',
        String(ms.length), ms.length === 1 ? ' member' : ' members',
        ...(behind.length ? [' · ', h('span', { class: 'badge warn', 'data-members-behind': behind.length },
          behind.length + ' not on generation ' + out.generation)] : []));
      tbody.replaceChildren(...(ms.length ? ms.map((m) => row(m, out.generation)) : [empty('No members.', HEADERS.length)]));
      p.clearError();
      return true;
    } catch (err) {
      if (!ctrl.signal.aborted) p.showError(err);
      return err.status !== 401 && err.status !== 403;
    }
  }

  (async () => {
    while (!ctrl.signal.aborted && await load()) await sleep(REFRESH_MS, ctrl.signal);
  })();
  return { stop: () => ctrl.abort() };
}

// isBehind: a joining or active member that has not applied the current
// generation holds every join that waits for it (SPEC 17).
function isBehind(m, generation) {
  return (m.state === 'joining' || m.state === 'active') && m.appliedGeneration < generation;
}

function row(m, generation) {
  const behind = isBehind(m, generation);
  return h('tr', { 'data-node-id': m.nodeId, 'data-state': m.state, 'data-behind': behind ? 'yes' : false, class: behind ? 'behind' : '' },
    h('td', null, h('strong', null, m.hostname || h('span', { class: 'muted' }, '(no hostname)')), h('div', { class: 'sub' }, h('code', null, m.nodeId))),
    h('td', null, m.role),
    h('td', null, h('span', { class: 'badge state state-' + m.state }, m.state)),
    h('td', null, h('code', null, m.mgmtIp)),
    h('td', null, m.az || h('span', { class: 'muted' }, 'none')),
    h('td', { class: 'pre' }, networks(m.networks)),
    h('td', { class: 'pre' }, kv(m.labels)),
    h('td', null, 'admitted ' + m.generation, h('div', { class: 'sub' }, 'applied ' + m.appliedGeneration),
      behind ? h('div', { class: 'badge warn' }, 'behind: generation ' + generation + ' not applied') : null),
    h('td', null, boot(m)),
    h('td', null, when(m.joinedAt)));
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
