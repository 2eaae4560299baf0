// The JSON API client: one fetch wrapper, the session and the caller's
// permissions. The session is the bearer token from POST /v1/auth/login,
// kept in sessionStorage: it lives as long as the tab, is sent only as an
// Authorization header (so no cross-site request can carry it) and is
// never written to a cookie or to localStorage.

const KEY = 'stratum.session';

export class ApiError extends Error {
  constructor(status, env) {
    super(env.message || 'the founder answered ' + status);
    this.status = status;
    this.code = env.code || '';
    this.fields = Array.isArray(env.fields) ? env.fields : [];
    this.issues = Array.isArray(env.issues) ? env.issues : [];
    this.details = env.details || {};
  }
}

export const session = {
  token() {
    try {
      const s = JSON.parse(sessionStorage.getItem(KEY) || 'null');
      if (!s || !s.token) return '';
      if (s.expiresAt && Date.parse(s.expiresAt) <= Date.now()) {
        sessionStorage.removeItem(KEY);
        return '';
      }
      return s.token;
    } catch {
      return '';
    }
  },
  set(token, expiresAt) {
    sessionStorage.setItem(KEY, JSON.stringify({ token, expiresAt }));
    caller = null;
  },
  clear() {
    sessionStorage.removeItem(KEY);
    caller = null;
  },
};

let onUnauthenticated = () => {};

// whenUnauthenticated registers what to do when the API refuses the
// session (expired or revoked): the app shows the login form.
export function whenUnauthenticated(fn) {
  onUnauthenticated = fn;
}

export async function api(method, path, body, opts = {}) {
  const headers = { Accept: 'application/json' };
  const token = session.token();
  if (token) headers.Authorization = 'Bearer ' + token;
  const init = { method, headers, cache: 'no-store', credentials: 'omit', signal: opts.signal };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { code: 'INTERNAL', message: 'the founder answered ' + resp.status + ' without JSON' };
    }
  }
  if (!resp.ok) {
    const err = new ApiError(resp.status, data || {});
    if (resp.status === 401 && token) {
      session.clear();
      onUnauthenticated(err);
    }
    throw err;
  }
  return data;
}

let caller = null;

// loadSelf asks the founder who the caller is and which actions its
// policy allows, so pages hide what the API would refuse. The API still
// decides every request: a hidden button is a courtesy, not the gate.
export async function loadSelf() {
  if (!caller) {
    const out = await api('GET', '/v1/auth/self');
    caller = { subject: out.subject, user: out.user, actions: new Set(out.actions || []) };
  }
  return caller;
}

export function can(action) {
  return !!caller && caller.actions.has(action);
}
