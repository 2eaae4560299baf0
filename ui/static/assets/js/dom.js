// Small DOM helpers. Text from the API is always set as text (textContent
// through Node.append), never parsed as HTML, and no style attribute is
// ever written: the CSP admits only the console's stylesheet.

// h builds an element. attrs: "class", event handlers as onclick etc.,
// booleans as present/absent attributes, anything else with setAttribute.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.className = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// page is the frame every page renders into: a title, a line saying what
// it shows, a place for errors and the body.
export function page(main, title, intro) {
  const error = h('div', { class: 'page-error', role: 'alert', hidden: true });
  const body = h('div', { class: 'page-body' });
  main.replaceChildren(h('h1', null, title), h('p', { class: 'intro' }, intro), error, body);
  document.title = title + ' · Stratum founder';
  return {
    body,
    showError(err) {
      error.replaceChildren(...describeError(err));
      error.hidden = false;
    },
    clearError() {
      error.hidden = true;
      error.replaceChildren();
    },
  };
}

// describeError says what failed in the API's own words; a 403 is shown
// plainly as a missing permission.
export function describeError(err) {
  if (err && err.status === 403) {
    return [h('strong', null, 'Not allowed. '), err.message];
  }
  if (err && err.code) {
    return [h('strong', null, err.code + ': '), err.message];
  }
  return [h('strong', null, 'Error: '), String((err && err.message) || err)];
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// table builds a table with a header row; rows are appended by the caller.
export function table(headers, attrs) {
  return h('table', attrs || { class: 'grid' },
    h('thead', null, h('tr', null, headers.map((t) => h('th', { scope: 'col' }, t)))));
}

export function empty(text, colspan) {
  return h('tr', { class: 'empty' }, h('td', { colspan }, text));
}
