import { api, session } from '../api.js';
import { h, describeError } from '../dom.js';

// The login form posts to POST /v1/auth/login and keeps the answered
// bearer token in sessionStorage.
export function mount(main, { onLogin, ended }) {
  const error = h('div', { class: 'form-error', role: 'alert', hidden: true });
  const email = h('input', { name: 'email', type: 'email', autocomplete: 'username', required: true, autofocus: true });
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'login', novalidate: true },
    h('h1', null, 'Sign in'),
    ended ? h('p', { class: 'notice', role: 'status', 'data-session-ended': '' }, 'Your session ended: ' + ended + '. Sign in again.') : null,
    h('p', { class: 'intro' }, 'The bootstrap admin\'s email and password are in ', h('code', null, 'bootstrap-credentials.txt'), ' in the founder\'s data directory.'),
    h('label', null, h('span', { class: 'label' }, 'Email'), email),
    h('label', null, h('span', { class: 'label' }, 'Password'), password),
    error, submit);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.hidden = true;
    submit.disabled = true;
    try {
      const out = await api('POST', '/v1/auth/login', { email: email.value, password: password.value });
      session.set(out.token, out.expiresAt);
      onLogin();
    } catch (err) {
      error.replaceChildren(h('p', null, ...describeError(err)));
      error.hidden = false;
      submit.disabled = false;
    }
  });
  main.replaceChildren(form);
  document.title = 'Sign in · Stratum founder';
  email.focus();
  return { stop() {} };
}
