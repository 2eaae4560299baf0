// Release set: what every node runs. The skew matrix has one row per
// field whose value differs between recent nodes (the founder decides
// which) and one column per node; each distinct value has its own colour,
// and a node whose record is stale or missing is greyed.
import { api } from '../api.js';
import { h, append, page, table, scroll, empty, id, hostname } from '../dom.js';
import { when } from '../format.js';

const COLOURS = 8;
// PAGE nodes are fetched at a time: the summary covers every node, the
// matrix and the nodes table show the nodes fetched so far.
const PAGE = 100;
const PATH = '/v1/admin/upgrades/release';

export function mount(main) {
  const p = page(main, 'Release set', 'Which release each node runs, where nodes differ (skew) and where a node differs from its own release (drift).');
  const ctrl = new AbortController();
  const opts = { signal: ctrl.signal };
  (async () => {
    try {
      const rs = await api('GET', PATH + '?view=summary', undefined, opts);
      rs.nodes = [];
      let next = '';
      const more = async () => {
        const page = await api('GET', PATH + '?limit=' + PAGE + (next ? '&after=' + encodeURIComponent(next) : ''), undefined, opts);
        rs.nodes.push(...(page.nodes || []));
        next = page.next || '';
      };
      await more();
      const nodesBox = h('div');
      const render = () => {
        const shown = h('p', { class: 'muted', 'data-nodes-shown': String(rs.nodes.length) },
          'Showing ' + rs.nodes.length + ' of ' + (rs.members ?? rs.nodes.length) + ' nodes.');
        const button = next ? h('button', { type: 'button', 'data-more-nodes': '' }, 'Show ' + PAGE + ' more nodes') : null;
        if (button) {
          button.addEventListener('click', async () => {
            button.disabled = true;
            try { await more(); render(); } catch (err) { if (!ctrl.signal.aborted) p.showError(err); }
          });
        }
        // append, not replaceChildren: no button on the last page, and
        // replaceChildren would write that absence out as "null".
        nodesBox.replaceChildren();
        append(nodesBox, [h('h2', null, 'Skew'), scroll(skewMatrix(rs)), h('h2', null, 'Nodes'), scroll(nodesTable(rs)), shown, button]);
      };
      render();
      append(p.body, [summary(rs), behindList(rs), h('h2', null, 'Drift'), scroll(driftTable(rs)), nodesBox]);
    } catch (err) {
      if (!ctrl.signal.aborted) p.showError(err);
    }
  })();
  return { stop: () => ctrl.abort() };
}

function summary(rs) {
  const s = rs.summary || {};
  const nodes = rs.nodes || [];
  const behind = s.behindCount || 0;
  return h('div', { class: 'cards' },
    card('Consistent', h('span', { class: 'badge ' + (s.consistent ? 'ok' : 'warn'), 'data-consistent': String(!!s.consistent) }, s.consistent ? 'yes' : 'no')),
    card('Running release', h('span', { 'data-running-release': rs.runningRelease || '' }, rs.runningRelease || 'unknown')),
    card('Admission release', h('span', { 'data-admission-release': rs.admissionRelease || '' }, rs.admissionRelease || 'unknown')),
    card('Behind', h('span', { class: 'badge ' + (behind ? 'warn' : 'ok'), 'data-behind-count': String(behind) }, behind ? behind + (behind === 1 ? ' node' : ' nodes') : 'none')),
    card('Recent records', (s.recent ?? 0) + ' of ' + (rs.members ?? nodes.length)),
    card('Founder', rs.node),
    card('Control plane', (rs.controlPlane && rs.controlPlane.version) || ''));
}

// behindList names the nodes on a release older than the admission
// release: the summary's list, which covers every node, not only the
// nodes fetched so far.
function behindList(rs) {
  const s = rs.summary || {};
  const list = s.behind || [];
  if (!list.length) return null;
  const more = (s.behindCount || list.length) - list.length;
  return h('div', { 'data-behind': '' },
    h('h2', null, 'Behind the admission release ' + (rs.admissionRelease || '')),
    h('ul', { class: 'behind' }, list.map((b) => h('li', { 'data-behind-node': b.nodeId },
      h('code', null, b.nodeId), ' runs ', b.runningRelease || 'an unknown release'))),
    more > 0 ? h('p', { class: 'muted' }, 'and ' + more + ' more') : null);
}

function card(label, value) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value));
}

function greyed(n) {
  return !n.recorded || n.stale;
}

function skewMatrix(rs) {
  const nodes = rs.nodes || [];
  const skew = (rs.summary && rs.summary.skew) || [];
  const tbl = h('table', { class: 'grid matrix', 'data-skew-matrix': '' },
    h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Field'),
      nodes.map((n) => h('th', { scope: 'col', class: greyed(n) ? 'stale' : '', title: greyed(n) ? (n.recorded ? 'stale record' : 'never recorded') : '' },
        n.nodeId, n.hostname ? h('div', { class: 'sub' }, n.hostname) : null,
        greyed(n) ? h('div', { class: 'sub' }, n.recorded ? 'stale' : 'no record') : null)))));
  const tbody = h('tbody');
  tbl.append(tbody);
  if (!skew.length) {
    tbody.append(empty('No skew: every recent node reports the same values.', nodes.length + 1));
    return tbl;
  }
  for (const s of skew) {
    const byNode = new Map();
    (s.values || []).forEach((v, i) => {
      for (const id of v.nodes || []) byNode.set(id, { v, colour: i % COLOURS });
    });
    tbody.append(h('tr', { 'data-skew-field': s.field },
      h('th', { scope: 'row' }, s.field),
      nodes.map((n) => {
        const hit = byNode.get(n.nodeId);
        if (!hit) return h('td', { class: 'cell stale', title: 'not a recent record' }, '—');
        return h('td', { class: 'cell v' + hit.colour + (greyed(n) ? ' stale' : ''), title: hit.v.value, 'data-value': hit.v.value },
          hit.v.display || hit.v.value);
      })));
  }
  return tbl;
}

function driftTable(rs) {
  const drift = (rs.summary && rs.summary.drift) || [];
  const tbl = table(['Node', 'Kind', 'Where', 'Finding']);
  const tbody = h('tbody');
  tbl.append(tbody);
  if (!drift.length) tbody.append(empty('No drift.', 4));
  for (const d of drift) {
    tbody.append(h('tr', { 'data-drift-node': d.nodeId, 'data-drift-kind': d.kind },
      h('td', null, id(d.nodeId)),
      h('td', null, h('span', { class: 'badge warn' }, d.kind)),
      h('td', null, d.field ? h('code', null, d.field) : ''),
      h('td', null, finding(d))));
  }
  return tbl;
}

function finding(d) {
  if (d.kind === 'report') return d.recorded === false ? 'never recorded its release' : 'record is stale' + (d.recordedAt ? ' (last ' + when(d.recordedAt) + ')' : '');
  const parts = [];
  for (const k of ['source', 'commit', 'want', 'image', 'digest', 'version', 'name', 'pinned', 'running', 'containers']) {
    if (d[k] !== undefined && d[k] !== '') parts.push(k + ' ' + d[k]);
  }
  return parts.join(' · ');
}

function nodesTable(rs) {
  const tbl = table(['Node', 'Hostname', 'Running release', 'OS', 'Control plane', 'Recorded']);
  const tbody = h('tbody');
  tbl.append(tbody);
  for (const n of rs.nodes || []) {
    const r = n.release || {};
    tbody.append(h('tr', { 'data-release-node': n.nodeId, class: greyed(n) ? 'stale' : '' },
      h('td', null, id(n.nodeId)),
      h('td', null, n.hostname ? hostname(n.hostname) : ''),
      h('td', null, n.runningRelease || h('span', { class: 'muted' }, 'unknown'),
        n.behind ? [' ', h('span', { class: 'badge warn', 'data-node-behind': '', title: 'older than the admission release ' + (rs.admissionRelease || '') }, 'behind')] : null),
      h('td', null, (r.os && (r.os.prettyName || r.os.id)) || ''),
      h('td', null, (r.controlPlane && r.controlPlane.version) || ''),
      h('td', null, n.recorded ? when(r.recordedAt) + (n.stale ? ' (stale)' : '') : 'never')));
  }
  return tbl;
}
