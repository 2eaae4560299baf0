// Releases: the signed release trees imported into the founder, which it
// offers to joiners on an older release, an import from a path on the
// founder's own file system (verified against its release keys), and
// those keys: each *.pub file of the founder's release keys, which counts
// only once trusted (SPEC 16.2), and a form that trusts one.
import { api, can } from '../api.js';
import { h, page, table, scroll, empty, describeError, fingerprint } from '../dom.js';
import { bytes, when } from '../format.js';
import { field, clearErrors, showFormError, formError, onConfirmedSubmit, unconfirm } from '../forms.js';

const HEADERS = ['Release', 'Signed by', 'Upgrades from', 'Files', 'Size', 'Manifest SHA-256', 'Created', 'Imported', 'Health'];
// Trusted comes second: a phone sees it without scrolling the table.
const KEY_HEADERS = ['File', 'Trusted', 'Key id', 'Problem'];
const TRUST = 'upgrade:TrustReleaseKey';

export function mount(main) {
  const p = page(main, 'Releases', 'Signed releases imported into this founder; a joiner on an older release self-upgrades from them.');
  const ctrl = new AbortController();
  const tbl = table(HEADERS, { class: 'grid releases' });
  const tbody = h('tbody');
  tbl.append(tbody);
  const keysTbl = table(KEY_HEADERS, { class: 'grid release-keys' });
  const keysBody = h('tbody');
  keysTbl.append(keysBody);
  if (can('upgrade:ImportRelease')) p.body.append(importForm(load));
  p.body.append(h('h2', null, 'Imported'), scroll(tbl),
    h('h2', null, 'Release keys'),
    h('p', { class: 'sub' }, 'The *.pub files of the founder\'s release keys. A release is imported only when a trusted key signed it; a file dropped into the directory counts only once trusted.'),
    scroll(keysTbl));
  if (can(TRUST)) p.body.append(trustForm(load));

  // load fetches the releases and the key files together, so the page
  // shows both from one moment; either that fails is shown, the other
  // still listed.
  async function load() {
    const [rs, ks] = await Promise.allSettled([
      api('GET', '/v1/admin/releases', undefined, { signal: ctrl.signal }),
      api('GET', '/v1/admin/release-keys', undefined, { signal: ctrl.signal }),
    ]);
    if (ctrl.signal.aborted) return;
    if (rs.status === 'fulfilled') {
      const list = rs.value.releases || [];
      tbody.replaceChildren(...(list.length ? list.map(row) : [empty('No release imported yet.', HEADERS.length)]));
    }
    if (ks.status === 'fulfilled') {
      const list = ks.value.keys || [];
      keysBody.replaceChildren(...(list.length ? list.map(keyRow) : [empty('No key file: trust a release public key to import releases.', KEY_HEADERS.length)]));
    }
    const failed = [rs, ks].find((r) => r.status === 'rejected');
    if (failed) p.showError(failed.reason);
    else p.clearError();
  }
  load();
  return { stop: () => ctrl.abort() };
}

// keyRow is one key file: its key id (shortened, copyable), whether it
// counts, and what is wrong or how to make it count.
function keyRow(k) {
  return h('tr', { 'data-key-file': k.file, 'data-trusted': k.trusted ? 'yes' : 'no' },
    h('td', null, h('code', null, k.file)),
    h('td', null, k.trusted ? h('span', { class: 'badge ok' }, 'yes') : h('span', { class: 'badge bad' }, 'no')),
    h('td', null, k.keyId ? fingerprint(k.keyId) : h('span', { class: 'muted' }, 'none')),
    h('td', { class: 'key-problem' }, keyProblem(k)));
}

function keyProblem(k) {
  if (k.problem) return h('div', { class: 'reason', 'data-key-problem': '' }, k.problem);
  if (k.trusted) return h('span', { class: 'muted' }, 'none');
  return h('div', { 'data-untrusted': '' },
    h('div', { class: 'reason' }, 'Not trusted: a release it signs is refused.'),
    h('div', { class: 'sub', 'data-how-to-trust': '' }, 'To trust it, ',
      can(TRUST) ? ['paste its public key below under the file name ', h('code', null, k.file), ', or '] : null,
      'run ', h('code', null, 'stratum release trust-key DATA/release-keys/' + k.file), ' on the founder.'));
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

// trustForm trusts a release public key (POST /v1/admin/release-keys):
// the founder writes it as the named file and records it. Asked to
// confirm first: a trusted key's releases are imported and offered to
// every joiner, as weighty as an approval.
function trustForm(reload) {
  const label = 'Trust the key';
  const submit = h('button', { type: 'submit', class: 'primary', 'data-action': 'trust-key' }, label);
  const confirmLine = h('p', { class: 'confirm', role: 'alert', hidden: true });
  const result = h('p', { class: 'result', hidden: true });
  const form = h('form', { class: 'inline-form trust-key', novalidate: true },
    h('h2', null, 'Trust a key'),
    h('p', { class: 'sub' }, 'Paste the signer\'s public key (the NAME.pub of ', h('code', null, 'stratum release keygen'),
      ') after comparing its key id with the one the signer printed.'),
    h('div', { class: 'fields' },
      field('Public key (PEM)', h('textarea', { name: 'publicKey', rows: 4, spellcheck: 'false', placeholder: '-----BEGIN PUBLIC KEY-----' }),
        'the whole NAME.pub file, BEGIN and END lines included'),
      field('File name', h('input', { name: 'name', spellcheck: 'false', placeholder: 'empty: the key id\'s first 16 digits .pub' }),
        'NAME.pub in the release keys directory; a dropped file\'s name trusts that file')),
    formError(), confirmLine, h('div', { class: 'buttons' }, submit), result);
  const bodyOf = (f) => {
    const publicKey = f.elements.namedItem('publicKey').value.trim();
    const body = { name: f.elements.namedItem('name').value.trim(), publicKey: publicKey ? publicKey + '\n' : '' };
    return { body, problems: publicKey ? [] : [{ field: 'publicKey', message: 'required: paste the public key' }] };
  };
  const weight = 'Every release this key signs will be imported and offered to joiners.';
  const confirm = async (body) => {
    const id = await keyIdOf(body.publicKey);
    return id ? 'Key id ' + id + ': compare it with the one the signer printed. ' + weight : weight;
  };
  onConfirmedSubmit(form, submit, confirmLine, bodyOf, confirm, async (body) => {
      result.hidden = true;
      submit.disabled = true;
      try {
        const k = await api('POST', '/v1/admin/release-keys', body);
        form.reset();
        result.replaceChildren('Trusted ', h('code', null, k.file), ' (key id ', h('code', { class: 'keyid', title: k.keyId }, k.keyId), ').');
        result.hidden = false;
        await reload();
      } catch (err) {
        showFormError(form, err, describeError);
      } finally {
        unconfirm(form);
        submit.disabled = false;
      }
    });
  return form;
}

// keyIdOf is a pasted release public key's id as the founder computes it
// (release.KeyID: the hex SHA-256 of the raw 32-byte Ed25519 key), so the
// operator compares it with the signer's before confirming; '' for a
// paste that is not one PKIX Ed25519 key (the founder then says why).
async function keyIdOf(pemText) {
  const b64 = pemText.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, '').replace(/\s+/g, '');
  let der;
  try {
    der = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  } catch {
    return '';
  }
  // SubjectPublicKeyInfo of an Ed25519 key: 12 fixed bytes, then the key.
  const prefix = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
  if (der.length !== 44 || prefix.some((v, i) => der[i] !== v) || !crypto.subtle) return '';
  const sum = new Uint8Array(await crypto.subtle.digest('SHA-256', der.slice(12)));
  return Array.from(sum, (v) => v.toString(16).padStart(2, '0')).join('');
}
