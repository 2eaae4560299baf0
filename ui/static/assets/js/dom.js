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

// describeError says what failed in the API's own words: the message,
// not the code (kept in data-code for whoever needs it); a 403 is shown
// plainly as a missing permission.
export function describeError(err) {
  const code = (err && err.code) || '';
  if (err && err.status === 403) {
    return [h('strong', { 'data-code': code }, 'Not allowed. '), err.message];
  }
  return [h('strong', { 'data-code': code }, 'Error: '), String((err && err.message) || err)];
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// refresh calls load now and every ms after it finishes, until signal
// aborts or load answers false (signed out, or not allowed: asking again
// would only say so again).
export async function refresh(load, ms, signal) {
  while (!signal.aborted && await load()) await sleep(ms, signal);
}

// scroll puts a wide table in a box of its own that scrolls sideways, so
// the page itself never does on a narrow screen. data-more says on which
// side the box hides more of the table (right, left, both or none): the
// stylesheet fades that edge, a phone showing no scroll bar.
export function scroll(tbl) {
  const box = h('div', { class: 'table-scroll', 'data-more': 'none' }, tbl);
  const mark = () => {
    const hidden = box.scrollWidth - box.clientWidth;
    const left = box.scrollLeft > 1, right = box.scrollLeft < hidden - 1;
    box.dataset.more = left && right ? 'both' : left ? 'left' : right ? 'right' : 'none';
  };
  box.addEventListener('scroll', mark, { passive: true });
  const resized = new ResizeObserver(mark);
  resized.observe(box);
  resized.observe(tbl);
  return box;
}

// copyText uses the Clipboard API (the console is served over TLS, a
// secure context); where it is refused, it selects el so the operator
// can copy by hand. It answers whether the text reached the clipboard.
export async function copyText(text, el) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const range = document.createRange();
    range.selectNodeContents(el);
    const sel = getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    return false;
  }
}

// fingerprint shows a long key fingerprint shortened (its start and end,
// which is what people compare) with the whole value in its title and a
// copy button; data-fingerprint holds the whole value.
export function fingerprint(fp) {
  const text = String(fp || '');
  const short = text.length > 24 ? text.slice(0, 15) + '…' + text.slice(-6) : text;
  const code = h('code', { class: 'fingerprint', 'data-fingerprint': text, title: text }, short);
  const button = h('button', { type: 'button', class: 'link copy', 'data-action': 'copy-fingerprint', title: 'copy the whole fingerprint' }, 'copy');
  button.addEventListener('click', async () => {
    button.textContent = (await copyText(text, code)) ? 'copied' : 'select and copy';
  });
  return h('span', { class: 'fp' }, code, ' ', button);
}

// table builds a table with a header row; rows are appended by the caller.
// On a narrow screen each row is shown as a card (app.css), every cell
// under its column's name: labelCells keeps that name in data-label.
export function table(headers, attrs) {
  const tbl = h('table', attrs || { class: 'grid' },
    h('thead', null, h('tr', null, headers.map((t) => h('th', { scope: 'col' }, t)))));
  labelCells(tbl, headers);
  return tbl;
}

// labelCells gives every body cell of tbl its column's header in
// data-label. Pages add and replace rows long after the table is built,
// so an observer labels each new row as it arrives.
function labelCells(tbl, headers) {
  const label = () => {
    for (const body of [...tbl.tBodies, tbl.tFoot]) {
      for (const tr of (body && body.rows) || []) {
        let col = 0;
        for (const cell of tr.cells) {
          if (cell.colSpan === 1 && !cell.hasAttribute('data-label')) cell.setAttribute('data-label', String(headers[col] ?? ''));
          col += cell.colSpan;
        }
      }
    }
  };
  new MutationObserver(label).observe(tbl, { childList: true, subtree: true });
}

// hostname shows a machine's name so that a long one wraps at its dots
// and dashes (never over the next cell) and reads whole in its title.
export function hostname(name) {
  const el = h('strong', { class: 'hostname', title: name });
  String(name).split(/(?<=[.-])/).forEach((part, i) => {
    if (i) el.append(h('wbr'));
    el.append(part);
  });
  return el;
}

// id shows an identifier (a node id, a join id, a token id, an event
// kind) that never breaks over two lines: n-abc12def read as "n-" and
// "abc12def" is two things.
export function id(text) {
  return h('code', { class: 'id' }, text);
}

export function empty(text, colspan) {
  return h('tr', { class: 'empty' }, h('td', { colspan }, text));
}
