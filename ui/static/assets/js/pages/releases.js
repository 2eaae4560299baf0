// Releases: the signed release trees imported into the founder, which it
// offers to joiners on an older release, and an import from a path on
// the founder's own file system (verified against its release keys).
import { api, can } from '../api.js';
import { h, page, table, scroll, empty, describeError } from '../dom.js';
import { bytes, when } from '../format.js';
import { field, clearErrors, showFormError, formError } from '../forms.js';

const HEADERS = ['Release', 'Signed by', 'Upgrades from', 'Files', 'Size', 'Manifest SHA-256', 'Created', 'Imported', 'Health'];

export function mount(main) {
  const p = page(main, 'Releases', 'Signed releases imported into this founder; a joiner on an older release self-upgrades from them.');
  const ctrl = new AbortController();
  const tbl = table(HEADERS, { class: 'grid releases' });
  const tbody = h('tbody');
  tbl.append(tbody);
  if (can('upgrade:ImportRelease')) p.body.append(importForm(load));
  p.body.append(h('h2', null, 'Imported'), scroll(tbl));

  async function load() {
    try {
      const out = await api('GET', '/v1/admin/releases', undefined, { signal: ctrl.signal });
      const rs = out.releases || [];
      tbody.replaceChildren(...(rs.length ? rs.map(row) : [empty('No release imported yet.', HEADERS.length)]));
      p.clearError();
    } catch (err) {
      if (!ctrl.signal.aborted) p.showError(err);
    }
  }
  load();
  return { stop: () => ctrl.abort() };
}

function row(r) {
  const signers = r.signerKeyIds || [];
  return h('tr', { 'data-release': r.release },
    h('td', null, h('strong', null, r.release)),
    h('td', null, signers.length ? signers.map((id) => h('div', null, h('code', { class: 'keyid', title: id }, id.slice(0, 16)))) : h('span', { class: 'muted' }, 'not recorded')),
    h('td', null, (r.upgradesFrom || []).join(', ') || h('span', { class: 'muted' }, 'any older')),
    h('td', { class: 'num' }, String(r.files)),
    h('td', { class: 'num' }, bytes(r.bytes)),
    h('td', null, h('code', { class: 'digest', title: r.manifestSha256 }, (r.manifestSha256 || '').slice(0, 16))),
    h('td', null, when(r.createdAt)),
    h('td', null, when(r.importedAt)),
    h('td', null, status(r)));
}

// status shows what the founder found of the release's files: only a
// release whose every file matched its index is verified.
function status(r) {
  const missing = r.missing || [], corrupt = r.corrupt || [];
  if (missing.length || corrupt.length) {
    const what = missing.length ? missing.length + ' missing' : corrupt.length + ' corrupt';
    return h('div', { 'data-status': missing.length ? 'missing' : 'corrupt' },
      h('span', { class: 'badge bad', title: missing.concat(corrupt).join('\n') }, what),
      h('div', { class: 'muted' }, 'fix: ', h('code', null, r.fix || 'stratum release import PATH')));
  }
  if (r.status === 'checking') return h('span', { class: 'badge', 'data-status': 'checking' }, 'checking…');
  return h('span', { class: 'badge ok', 'data-status': 'verified' }, 'verified');
}

function importForm(reload) {
  const submit = h('button', { type: 'submit', class: 'primary', 'data-action': 'import-release' }, 'Import');
  const result = h('p', { class: 'result', hidden: true });
  const form = h('form', { class: 'inline-form import', novalidate: true },
    h('h2', null, 'Import a release'),
    h('div', { class: 'fields' },
      field('Path on the founder', h('input', { name: 'path', placeholder: '/srv/releases/0.6.0', spellcheck: 'false', size: 48 }),
        'a release tree with payload/manifest.json and manifest.sig; every file is verified')),
    formError(), h('div', { class: 'buttons' }, submit), result);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(form);
    result.hidden = true;
    submit.disabled = true;
    submit.textContent = 'Importing…';
    try {
      const out = await api('POST', '/v1/admin/releases', { path: form.elements.namedItem('path').value.trim() });
      result.replaceChildren('Imported ', h('strong', null, out.release), ' (' + out.files + ' files).');
      result.hidden = false;
      reload();
    } catch (err) {
      showFormError(form, err, describeError);
    } finally {
      submit.disabled = false;
      submit.textContent = 'Import';
    }
  });
  return form;
}
