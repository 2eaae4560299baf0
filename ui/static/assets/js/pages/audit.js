// Audit: the newest events of the founder's hash-chained audit log and
// the chain's status (GET /v1/admin/audit/verify walks the whole chain).
import { api } from '../api.js';
import { h, page, table, scroll, empty, id } from '../dom.js';
import { when } from '../format.js';

const PAGE = 100;
const HEADERS = ['#', 'Time', 'Event', 'Actor', 'Subject', 'Data'];

export function mount(main) {
  const p = page(main, 'Audit', 'Every state change, newest first. Each event carries the hash of the one before it, so an edit or a removal breaks the chain.');
  const ctrl = new AbortController();
  const status = h('div', { class: 'chain', 'data-chain': 'checking' }, 'Checking the chain…');
  const tbl = table(HEADERS, { class: 'grid audit' });
  const tbody = h('tbody');
  tbl.append(tbody);
  const older = h('button', { type: 'button', 'data-action': 'older-events', hidden: true }, 'Older events');
  p.body.append(status, scroll(tbl), h('div', { class: 'buttons' }, older));
  let oldest = 0;

  async function loadPage(after, limit) {
    const out = await api('GET', '/v1/admin/audit?after=' + after + '&limit=' + limit, undefined, { signal: ctrl.signal });
    const evs = out.events || [];
    if (evs.length) oldest = evs[0].seq;
    tbody.append(...evs.slice().reverse().map(row));
    older.hidden = oldest <= 1;
  }

  (async () => {
    try {
      const v = await api('GET', '/v1/admin/audit/verify', undefined, { signal: ctrl.signal });
      status.dataset.chain = v.intact ? 'intact' : 'broken';
      status.className = 'chain ' + (v.intact ? 'ok' : 'bad');
      status.replaceChildren(...(v.intact
        ? ['Chain intact: ', h('strong', null, String(v.events)), ' events, every link verified.']
        : ['Chain broken: ', h('strong', null, v.problem), ' (', String(v.events), ' events verified before it).']));
      await loadPage(Math.max(0, v.events - PAGE), PAGE);
      if (!tbody.children.length) tbody.append(empty('No events.', HEADERS.length));
    } catch (err) {
      if (!ctrl.signal.aborted) p.showError(err);
    }
  })();
  older.addEventListener('click', async () => {
    try {
      const start = Math.max(0, oldest - 1 - PAGE);
      await loadPage(start, oldest - 1 - start);
    } catch (err) {
      p.showError(err);
    }
  });
  return { stop: () => ctrl.abort() };
}

function row(ev) {
  const data = ev.data ? Object.keys(ev.data).sort().map((k) => k + '=' + ev.data[k]).join('\n') : '';
  return h('tr', { 'data-seq': ev.seq },
    h('td', { class: 'num' }, String(ev.seq)),
    h('td', { class: 'nowrap' }, when(ev.time)),
    h('td', null, id(ev.kind)),
    h('td', { class: 'actor' }, ev.actor || ''),
    h('td', null, ev.subject ? h('code', { class: 'subject' }, ev.subject) : ''),
    h('td', { class: 'pre' }, data));
}
