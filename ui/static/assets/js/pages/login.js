import { api, session } from '../api.js';
import { h, describeError } from '../dom.js';

// The login form posts to POST /v1/auth/login and keeps the answered
// bearer token in sessionStorage.
export function mount(main, { onLogin, ended }) {
  const error = h('div', { class: 'form-error', role: 'alert', hidden: true });
  const email = h('input', { name: 'email', type: 'email', autocomplete: 'username', required: true, autofocus: true });
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  // Where the bootstrap admin's password is, while it is there: the
  // founder removes bootstrap-credentials.txt once that password changes.
  const hint = h('p', { class: 'intro', 'data-sign-in-hint': '' }, 'Sign in with your email and password.');
  api('GET', '/v1/auth/sign-in').then((out) => {
    if (out && out.bootstrapCredentials) {
      hint.replaceChildren('The bootstrap admin\'s email and password are in ', h('code', null, 'bootstrap-credentials.txt'), ' in the founder\'s data directory, until that password is changed.');
    }
  }, () => {});
  const form = h('form', { class: 'login', novalidate: true },
    h('h1', null, 'Sign in'),
    ended ? h('p', { class: 'notice', role: 'status', 'data-session-ended': '' }, 'Your session ended: ' + ended + '. Sign in again.') : null,
    hint,
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
      if (out.mustChangePassword) {
        mountChange(main, password.value, onLogin);
        return;
      }
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

// mountChange is the only page of a session whose account must change its
// password (SPEC 16.1): every other request is refused until it does.
function mountChange(main, current, onLogin) {
  const error = h('div', { class: 'form-error', role: 'alert', hidden: true });
  const next = h('input', { name: 'newPassword', type: 'password', autocomplete: 'new-password', required: true, minlength: 12 });
  const again = h('input', { name: 'confirmPassword', type: 'password', autocomplete: 'new-password', required: true, minlength: 12 });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Change password');
  const form = h('form', { class: 'login', novalidate: true },
    h('h1', null, 'Change your password'),
    h('p', { class: 'intro' }, 'This account\'s password is also known outside this appliance. Choose a new one (at least 12 characters) before going on.'),
    h('label', null, h('span', { class: 'label' }, 'New password'), next),
    h('label', null, h('span', { class: 'label' }, 'New password again'), again),
    error, submit);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.hidden = true;
    if (next.value !== again.value) {
      error.replaceChildren(h('p', null, 'The two passwords differ.'));
      error.hidden = false;
      return;
    }
    submit.disabled = true;
    try {
      await api('POST', '/v1/auth/password', { currentPassword: current, newPassword: next.value });
      onLogin();
    } catch (err) {
      error.replaceChildren(h('p', null, ...describeError(err)));
      error.hidden = false;
      submit.disabled = false;
    }
  });
  main.replaceChildren(form);
  document.title = 'Change password · Stratum founder';
  next.focus();
}
