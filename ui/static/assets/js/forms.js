import { h } from './dom.js';

// field builds a labelled input (or textarea/select) with the place its
// error goes. name is the API's field name, so an envelope's fields[]
// entry "networks.storage.ip" lands beside the input named "networks".
export function field(label, control, hint) {
  return h('div', { class: 'field', 'data-field': control.getAttribute('name') },
    h('label', null, h('span', { class: 'label' }, label), control),
    hint ? h('span', { class: 'hint' }, hint) : null,
    h('div', { class: 'field-errors' }));
}

// clearErrors removes every error shown in form.
export function clearErrors(form) {
  form.querySelectorAll('[data-field-error]').forEach((el) => el.remove());
  form.querySelectorAll('.invalid').forEach((el) => el.classList.remove('invalid'));
  const general = form.querySelector('.form-error');
  if (general) {
    general.hidden = true;
    general.replaceChildren();
  }
}

// showFieldErrors puts each {field, message} beside the input it names
// (by the first segment of its path) as [data-field-error="<path>"];
// a field with no input is listed in the form's general error, unless
// said is the message shown there and says it already.
export function showFieldErrors(form, fields, said = '') {
  const general = form.querySelector('.form-error');
  for (const f of fields) {
    const path = String(f.field || '');
    const name = path.split(/[.[]/)[0];
    const box = form.querySelector(`.field[data-field="${CSS.escape(name)}"] .field-errors`);
    const msg = h('p', { class: 'field-error', 'data-field-error': path },
      box && path !== name ? path + ': ' + f.message : f.message);
    if (box) {
      box.append(msg);
      const input = form.querySelector(`[name="${CSS.escape(name)}"]`);
      if (input) input.classList.add('invalid');
    } else if (general) {
      msg.textContent = (path ? path + ': ' : '') + f.message;
      if (said.includes(msg.textContent)) continue;
      general.append(msg);
      general.hidden = false;
    }
  }
}

// showFormError shows the envelope's message (and fields) in form.
export function showFormError(form, err, describe) {
  const general = form.querySelector('.form-error');
  if (general) {
    general.prepend(h('p', null, ...describe(err)));
    general.hidden = false;
  }
  if (err && err.fields) showFieldErrors(form, err.fields, String(err.message || ''));
}

export function formError() {
  return h('div', { class: 'form-error', role: 'alert', hidden: true });
}

// onConfirmedSubmit sends what bodyOf reads from form ({body, problems})
// once it has no problems: send(body). With confirm, the first submit
// asks inside the form (confirmLine) and only the second one sends: for
// what cannot be undone (reject, cancel, remove a member).
// A change to the form after the question withdraws it (unconfirm): the
// confirmation is for what the form held when it was asked.
export function onConfirmedSubmit(form, submit, confirmLine, bodyOf, confirm, send) {
  form.addEventListener('input', () => unconfirm(form));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearErrors(form);
    const { body, problems } = bodyOf(form);
    if (problems.length) {
      showFieldErrors(form, problems);
      return;
    }
    if (confirm && form.dataset.confirmed !== 'yes') {
      // confirm may be worked out from the body (a pasted key's id).
      const text = typeof confirm === 'function' ? await confirm(body) : confirm;
      form.dataset.confirmed = 'yes';
      confirmLine.textContent = text + ' Press the button again to confirm.';
      confirmLine.hidden = false;
      submit.dataset.confirm = 'yes';
      submit.textContent = 'Confirm: ' + submit.textContent;
      return;
    }
    await send(body);
  });
}

// unconfirm withdraws a confirmation onConfirmedSubmit asked for: the
// next submit asks again.
export function unconfirm(form) {
  if (form.dataset.confirmed !== 'yes') return;
  delete form.dataset.confirmed;
  const submit = form.querySelector('[data-confirm=yes]');
  if (submit) {
    delete submit.dataset.confirm;
    submit.textContent = submit.textContent.replace(/^Confirm: /, '');
  }
  const line = form.querySelector('.confirm');
  if (line) line.hidden = true;
}

// reasonBody reads a required reason from form's textarea "reason": the
// body {reason}, or the problem of its absence (said for forWhom).
export function reasonBody(form, forWhom) {
  const reason = form.elements.namedItem('reason').value.trim();
  return { body: { reason }, problems: reason ? [] : [{ field: 'reason', message: 'required: say why, ' + forWhom }] };
}
