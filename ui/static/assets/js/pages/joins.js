// Joins: the registrations waiting for an operator and those under way,
// live. The list is long-polled (GET /v1/admin/join/registrations with
// the last answer's index and wait): the founder answers as soon as any
// registration changes, so a new machine appears within milliseconds and
// nothing is fetched while nothing changes. Rows are updated in place,
// keyed by join id, so an open form keeps what the operator typed.
import { api, can } from '../api.js';
import { h, page, table, scroll, describeError, sleep, fingerprint, hostname, id } from '../dom.js';
import { age, factsSummary, factValue, when } from '../format.js';
import { field, showFormError, formError, onConfirmedSubmit, reasonBody } from '../forms.js';

const ACTIVE = ['pending', 'needs-upgrade', 'approved', 'delivering', 'installing'];
const FINISHED_SHOWN = 20;
const WAIT_SECONDS = 30;
const HEADERS = ['Host', 'Management IP', 'Key fingerprint', 'Release', 'Role', 'Facts', 'Age', 'State', ''];

// Which form each state allows, as the API decides it (SPEC 4.4).
const FORMS = {
  approve: { action: 'join:ApproveNodeJoin', states: ['pending'] },
  reject: { action: 'join:RejectNodeJoin', states: ['pending', 'needs-upgrade', 'approved'] },
  cancel: { action: 'join:CancelNodeJoin', states: ['delivering', 'installing'] },
};

export function mount(main) {
  const p = page(main, 'Joins',
    'Machines that registered with a join token. Compare the key fingerprint with the one the joiner printed before approving.');
  const ctrl = new AbortController();
  const rows = new Map();
  const live = h('p', { class: 'live', 'data-live': 'connecting' }, 'Connecting…');
  const activeTable = table(HEADERS, { class: 'grid joins', 'data-joins': 'active' });
  activeTable.append(h('tfoot', null, h('tr', { class: 'empty' }, h('td', { colspan: HEADERS.length },
    'No machine is waiting. Create a join token and run its join command on the new machine.'))));
  const finishedTable = table(HEADERS, { class: 'grid joins finished', 'data-joins': 'finished' });
  finishedTable.append(h('tfoot', null, h('tr', { class: 'empty' }, h('td', { colspan: HEADERS.length }, 'None yet.'))));
  p.body.append(live,
    h('h2', null, 'In progress'), scroll(activeTable),
    h('h2', null, 'Finished ', h('span', { class: 'muted' }, '(the last ' + FINISHED_SHOWN + ')')), scroll(finishedTable));

  const ages = setInterval(() => {
    for (const el of p.body.querySelectorAll('[data-age]')) el.textContent = age(el.dataset.age);
  }, 1000);

  function update(list) {
    const seen = new Set();
    const active = [];
    const finished = [];
    for (const reg of list) {
      seen.add(reg.joinId);
      const r = upsert(reg);
      (ACTIVE.includes(reg.state) ? active : finished).push(r);
    }
    finished.sort((a, b) => Date.parse(b.reg.updatedAt) - Date.parse(a.reg.updatedAt));
    for (const [id, r] of rows) {
      if (!seen.has(id)) {
        r.tbody.remove();
        rows.delete(id);
      }
    }
    place(activeTable, active);
    place(finishedTable, finished.slice(0, FINISHED_SHOWN));
  }

  // place puts rs first in tbl in order, moving only rows out of place
  // (a moved row would lose the focus of an input inside it).
  function place(tbl, rs) {
    rs.forEach((r, i) => {
      const at = tbl.tBodies[i];
      if (at !== r.tbody) tbl.insertBefore(r.tbody, at || tbl.tFoot);
    });
    while (tbl.tBodies.length > rs.length) {
      const extra = tbl.tBodies[tbl.tBodies.length - 1];
      rows.delete(extra.dataset.joinId);
      extra.remove();
    }
    tbl.tFoot.hidden = rs.length > 0;
  }

  function upsert(reg) {
    let r = rows.get(reg.joinId);
    if (!r) {
      r = { reg: null, tbody: h('tbody', { 'data-join-id': reg.joinId }), summary: null, form: null };
      rows.set(reg.joinId, r);
    }
    const changed = JSON.stringify(r.reg) !== JSON.stringify(reg);
    r.reg = reg;
    r.tbody.dataset.state = reg.state;
    if (changed) {
      const s = summaryRow(r);
      if (r.summary) r.summary.replaceWith(s);
      else r.tbody.prepend(s);
      r.summary = s;
    }
    if (r.form && !FORMS[r.form.kind].states.includes(reg.state)) closeForm(r);
    return r;
  }

  function summaryRow(r) {
    const reg = r.reg;
    const actions = h('td', { class: 'actions' });
    for (const [kind, f] of Object.entries(FORMS)) {
      if (f.states.includes(reg.state) && can(f.action)) {
        actions.append(h('button', {
          type: 'button', 'data-action': kind, class: kind === 'approve' ? 'primary' : 'danger',
          onclick: () => openForm(r, kind),
        }, kind[0].toUpperCase() + kind.slice(1)));
      }
    }
    return h('tr', { class: 'summary' },
      h('td', { class: 'host' }, reg.hostname ? hostname(reg.hostname) : h('strong', null, '(no hostname)'), h('div', { class: 'sub' }, id(reg.joinId))),
      h('td', { class: 'mgmt' }, mgmtCell(reg)),
      h('td', null, fingerprint(reg.keyFingerprint)),
      h('td', null, reg.release, reg.upgrade ? h('div', { class: 'sub' }, 'upgrading to ' + reg.upgrade.to) : null),
      h('td', null, reg.role),
      h('td', null, factsCell(reg.facts)),
      h('td', { class: 'age' }, h('span', { 'data-age': reg.createdAt, title: when(reg.createdAt) }, age(reg.createdAt))),
      h('td', null, stateCell(reg)),
      actions);
  }

  function openForm(r, kind) {
    if (r.form && r.form.kind === kind) {
      r.form.el.querySelector('input, textarea').focus();
      return;
    }
    if (r.form) closeForm(r);
    const form = kind === 'approve' ? approveForm(r) : reasonForm(r, kind);
    const row = h('tr', { class: 'form-row' }, h('td', { colspan: HEADERS.length }, form));
    r.tbody.append(row);
    r.form = { kind, el: form, row };
    form.querySelector('input:not([readonly]), textarea').focus();
  }

  function closeForm(r) {
    if (!r.form) return;
    r.form.row.remove();
    r.form = null;
  }

  function approveForm(r) {
    const reg = r.reg;
    const nets = h('textarea', { name: 'networks', rows: 3, spellcheck: 'false', placeholder: '{"storage": {"ip": "10.9.0.12", "interface": "vlan90"}}' });
    const labels = h('textarea', { name: 'labels', rows: 3, spellcheck: 'false', placeholder: 'topology.rack=r2' });
    const submit = h('button', { type: 'submit', class: 'primary', 'data-action': 'submit-approve' }, 'Approve ' + (reg.hostname || reg.joinId));
    return decisionForm(r, 'approve', ['Approve ', id(reg.joinId), ' with its assignment'], null, [
      field('Node id', h('input', { name: 'nodeId', placeholder: 'generated: n-xxxxxxxx', spellcheck: 'false' }), 'n- and 8 of a-z0-9; empty generates one'),
      field('Management IP', h('input', { name: 'mgmtIp', spellcheck: 'false', placeholder: reg.mgmtIp ? 'reported: ' + reg.mgmtIp : 'required: none reported' }),
        reg.mgmtIp ? 'empty takes what the joiner reported' : 'the joiner reported none'),
      field('Availability zone', h('input', { name: 'az', spellcheck: 'false' }), 'empty for none'),
      field('Role', h('input', { name: 'role', value: reg.role, readonly: true }), 'set by the join token'),
      field('Labels', labels, 'one key=value a line: topology.rack, topology.power or namespace/key'),
      field('Networks', nets, 'JSON: traffic class (storage, overlay) to {ip, interface}'),
    ], submit, assignmentOf);
  }

  function reasonForm(r, kind) {
    const submit = h('button', { type: 'submit', class: 'danger', 'data-action': 'submit-' + kind },
      kind === 'reject' ? 'Reject' : 'Cancel the join');
    return decisionForm(r, kind, [kind === 'reject' ? 'Reject ' : 'Cancel ', id(r.reg.joinId)],
      kind === 'reject'
        ? 'The joiner is told the reason and stops; its key needs a new token to register again.'
        : 'The join fails with this reason, its member is removed and the next approved join gets its turn.',
      [field('Reason', h('textarea', { name: 'reason', rows: 2, maxlength: 1024 }), 'required: shown to the joiner and kept in the audit log')],
      submit, (form) => reasonBody(form, 'for the joiner and the audit log'), kind === 'reject' ? 'Reject ' + (r.reg.hostname || r.reg.joinId) + ' for good?' : 'Cancel the join of ' + (r.reg.hostname || r.reg.joinId) + '?');
  }

  // decisionForm is the frame of the approve, reject and cancel forms: the
  // fields, the envelope's errors, submit and close. bodyOf reads the form
  // into the request body and the problems the form itself can see.
  // confirm, when given, is asked inside the form on the first submit:
  // the second one sends (reject and cancel cannot be undone).
  function decisionForm(r, kind, heading, intro, fields, submit, bodyOf, confirm) {
    const confirmLine = h('p', { class: 'confirm', role: 'alert', hidden: true });
    const form = h('form', { class: 'inline-form ' + kind, novalidate: true },
      h('h3', null, heading),
      intro ? h('p', { class: 'sub' }, intro) : null,
      h('div', { class: 'fields' }, fields),
      formError(), confirmLine,
      h('div', { class: 'buttons' }, submit,
        h('button', { type: 'button', onclick: () => closeForm(r) }, 'Close')));
    onConfirmedSubmit(form, submit, confirmLine, bodyOf, confirm, (body) => send(r, form, submit, kind, body));
    return form;
  }

  async function send(r, form, button, verb, body) {
    button.disabled = true;
    try {
      const view = await api('POST', '/v1/admin/join/registrations/' + encodeURIComponent(r.reg.joinId) + '/' + verb, body);
      closeForm(r);
      upsert(view); // the long-poll brings the same change; show it at once
    } catch (err) {
      showFormError(form, err, describeError);
    } finally {
      button.disabled = false;
    }
  }

  async function poll() {
    let index = '';
    while (!ctrl.signal.aborted) {
      try {
        const q = index ? '?index=' + encodeURIComponent(index) + '&wait=' + WAIT_SECONDS : '';
        const out = await api('GET', '/v1/admin/join/registrations' + q, undefined, { signal: ctrl.signal });
        index = out.index || '';
        update(out.registrations || []);
        p.clearError();
        live.dataset.live = 'on';
        live.textContent = 'Live · last change seen ' + new Date().toLocaleTimeString();
      } catch (err) {
        if (ctrl.signal.aborted) return;
        p.showError(err);
        if (err.status === 401 || err.status === 403) {
          live.dataset.live = 'off';
          live.textContent = 'Not updating.';
          return;
        }
        live.dataset.live = 'retrying';
        live.textContent = 'Connection lost; retrying…';
        index = '';
        await sleep(2000, ctrl.signal);
      }
    }
  }

  poll();
  return {
    stop() {
      ctrl.abort();
      clearInterval(ages);
    },
  };
}

// The formats the API checks (cluster/validate.go, join/assignment.go),
// checked here too so every problem shows at once before anything is
// sent; the API still decides.
const NODE_ID = /^n-[a-z0-9]{8}$/;
const AZ = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const INTERFACE = /^[A-Za-z0-9._-]{1,15}$/;
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

// isAddress accepts a bare IPv4 or IPv6 address (no prefix length).
function isAddress(v) {
  if (IPV4.test(v)) return true;
  if (!v.includes(':') || /[/%\[\]]/.test(v)) return false;
  try {
    return new URL('http://[' + v + ']/').hostname !== '';
  } catch {
    return false;
  }
}

// assignmentOf reads the approve form into the API's assignment, with
// every problem the form itself can see, under the field names the API
// uses (so they land beside the same inputs as the API's).
function assignmentOf(form) {
  const val = (name) => form.elements.namedItem(name).value.trim();
  const body = {};
  const problems = [];
  for (const name of ['nodeId', 'mgmtIp', 'az']) {
    if (val(name)) body[name] = val(name);
  }
  if (body.nodeId && !NODE_ID.test(body.nodeId)) problems.push({ field: 'nodeId', message: 'must be n- and 8 of a-z0-9, like n-abc12def' });
  if (body.mgmtIp && !isAddress(body.mgmtIp)) problems.push({ field: 'mgmtIp', message: 'must be an IP address without a prefix length' });
  if (body.az && !AZ.test(body.az)) problems.push({ field: 'az', message: 'must be lower-case letters, digits and dashes' });
  const labels = {};
  val('labels').split('\n').forEach((line, i) => {
    line = line.trim();
    if (!line) return;
    const eq = line.indexOf('=');
    if (eq <= 0) {
      problems.push({ field: 'labels', message: 'line ' + (i + 1) + ': expected key=value' });
      return;
    }
    labels[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  });
  if (Object.keys(labels).length) body.labels = labels;
  if (val('networks')) {
    try {
      const nets = JSON.parse(val('networks'));
      if (!nets || typeof nets !== 'object' || Array.isArray(nets)) throw new Error('not an object');
      body.networks = nets;
    } catch {
      problems.push({ field: 'networks', message: 'must be a JSON object, like {"storage": {"ip": "10.9.0.12", "interface": "vlan90"}}' });
    }
    for (const [cls, n] of Object.entries(body.networks || {})) {
      if (!n || typeof n !== 'object') {
        problems.push({ field: 'networks.' + cls, message: 'must be {"ip": ..., "interface": ...}' });
        continue;
      }
      if (typeof n.ip !== 'string' || !isAddress(n.ip)) problems.push({ field: 'networks.' + cls + '.ip', message: 'must be an IP address without a prefix length' });
      if (n.interface !== undefined && (typeof n.interface !== 'string' || !INTERFACE.test(n.interface))) {
        problems.push({ field: 'networks.' + cls + '.interface', message: 'must be 1-15 of A-Z a-z 0-9 . _ -' });
      }
    }
  }
  return { body, problems };
}

// mgmtCell shows the address the node will get and who chose it. The
// founder names the source when it knows (mgmtIpSource); before that, an
// assignment that differs from the joiner's report was the operator's.
function mgmtCell(reg) {
  const assigned = reg.assignment && reg.assignment.mgmtIp;
  const ip = assigned || reg.mgmtIp || '';
  let source = reg.mgmtIpSource;
  if (!source) source = assigned && assigned !== reg.mgmtIp ? 'operator' : 'joiner';
  return [h('code', null, ip || '(none)'), ' ',
    h('span', { class: 'badge source-' + source, 'data-mgmt-source': source, title: 'set by the ' + source }, source)];
}

function factsCell(facts) {
  if (!facts || typeof facts !== 'object' || !Object.keys(facts).length) return h('span', { class: 'muted' }, 'none sent');
  const keys = Object.keys(facts).sort();
  return h('details', { class: 'facts' },
    h('summary', null, factsSummary(facts) || keys.length + ' facts'),
    h('dl', null, keys.map((k) => [h('dt', null, k), h('dd', null, factValue(facts[k]))])));
}

const STEPS = ['approved', 'delivering', 'installing', 'joined'];

function stateCell(reg) {
  const out = [h('span', { class: 'badge state state-' + reg.state }, reg.state)];
  if (reg.state === 'approved' && reg.queuePosition) {
    out.push(h('div', { class: 'sub' }, reg.queuePosition === 1 ? 'next in the queue' : 'queue position ' + reg.queuePosition));
  }
  if (['approved', 'delivering', 'installing', 'joined'].includes(reg.state)) {
    const at = STEPS.indexOf(reg.state);
    out.push(h('ol', { class: 'steps', 'aria-label': 'progress' }, STEPS.map((s, i) =>
      h('li', { class: i < at || reg.state === 'joined' ? 'done' : i === at ? 'current' : '' }, s))));
  }
  if (reg.state === 'installing' && Array.isArray(reg.waitingFor) && reg.waitingFor.length) {
    out.push(h('div', { class: 'stall', 'data-waiting-for': reg.waitingFor.map((m) => m.nodeId).join(' ') },
      'waiting for ', reg.waitingFor.map((m, i) => [i ? ', ' : '', id(m.nodeId), ' (has ' + m.appliedGeneration + ')']),
      ' to apply generation ' + reg.generation));
  }
  if (reg.state === 'needs-upgrade') out.push(h('div', { class: 'sub' }, 'upgrading itself; approvable once it re-registers on the cluster release'));
  if (reg.reason) out.push(h('div', { class: 'reason' }, reg.reason));
  // What the inventory made of it: the entry that approved it, or why it
  // waits for a person.
  if (reg.autoApproval) out.push(h('div', { class: 'sub', 'data-auto-approval': '' }, 'inventory: ' + reg.autoApproval));
  if (reg.assignment && reg.assignment.nodeId) out.push(h('div', { class: 'sub' }, 'as ', id(reg.assignment.nodeId)));
  return out;
}
