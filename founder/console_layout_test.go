package founder

import (
	"encoding/json"
	"fmt"

	"github.com/chromedp/chromedp"
)

// layoutProblems is evaluated in the page: what an operator at this
// window's width could not read or reach. It answers a JSON list of
// sentences, empty when the page is fine:
//   - the page scrolls sideways;
//   - a table cell's content sticks out of the cell, over its neighbour
//     (a long hostname, an address); content an element of the cell
//     clips itself (an ellipsis) does not count;
//   - a node id, a join id or a size is broken over two lines;
//   - the navigation is cut (links hidden without a sign that it scrolls),
//     or a box hides some of its content sideways without a fade;
//   - a link, button or disclosure is not reachable: once scrolled to
//     vertically it is off the screen sideways (a phone hides sideways
//     scrolling, so every sideways scroll is put back at its start),
//     clipped by a box that hides overflow, or covered by something else.
const layoutProblems = `(async () => {
  // Two frames: what the page changes on a resize (dom.scroll's marks)
  // is in place.
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  const problems = [];
  const root = document.documentElement;
  const vw = root.clientWidth;
  const vh = innerHeight;
  // checkVisibility: no box, visibility: hidden, or inside a closed
  // <details> (content-visibility: hidden) is not on the screen.
  const shown = (el) => el.checkVisibility({ visibilityProperty: true });
  const words = (el) => ((el && el.textContent) || '').trim().replace(/\s+/g, ' ').slice(0, 50);
  const named = (el) => el ? el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '') : 'nothing';
  const clips = (el) => { const s = getComputedStyle(el); return s.overflowX !== 'visible' || s.overflowY !== 'visible'; };
  const atStart = () => { for (const el of document.querySelectorAll('*')) if (el.scrollLeft) el.scrollLeft = 0; };

  atStart();
  scrollTo(0, 0);
  if (root.scrollWidth > vw) problems.push('the page scrolls sideways: it is ' + root.scrollWidth + ' px wide in a ' + vw + ' px window');

  for (const cell of document.querySelectorAll('main td, main th')) {
    if (!shown(cell)) continue;
    const c = cell.getBoundingClientRect();
    let out = Math.max(0, cell.scrollWidth - cell.clientWidth);
    let culprit = cell;
    for (const el of cell.querySelectorAll('*')) {
      if (!shown(el)) continue;
      let clipped = false;
      for (let a = el.parentElement; a && a !== cell; a = a.parentElement) if (clips(a)) clipped = true;
      if (clipped) continue;
      const e = el.getBoundingClientRect();
      if (e.width === 0 && e.height === 0) continue; // a <wbr>: a place to break, not content
      const by = Math.max(e.right - c.right, c.left - e.left);
      if (by > out) [out, culprit] = [by, el];
    }
    if (out > 1) problems.push('a cell\'s content (' + named(culprit) + ') sticks out ' + Math.round(out) + ' px over its neighbour: "' + words(cell) + '"');
  }

  const token = /\b(?:n|j)-[a-z0-9]{3,}\b|\b\d+(?:\.\d+)?[ \u00a0](?:B|KiB|MiB|GiB|TiB)\b/g;
  const walk = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  for (let t = walk.nextNode(); t; t = walk.nextNode()) {
    if (!t.parentElement || !shown(t.parentElement)) continue;
    for (const m of t.data.matchAll(token)) {
      const r = document.createRange();
      r.setStart(t, m.index);
      r.setEnd(t, m.index + m[0].length);
      const lines = new Set([...r.getClientRects()].filter((q) => q.width > 0).map((q) => Math.round(q.top)));
      if (lines.size > 1) problems.push('"' + m[0] + '" is broken over ' + lines.size + ' lines');
    }
  }

  for (const el of document.querySelectorAll('main *')) {
    const s = getComputedStyle(el);
    if (shown(el) && ['auto', 'scroll'].includes(s.overflowX) && el.scrollWidth > el.clientWidth + 1 && s.maskImage === 'none') {
      problems.push(named(el) + ' hides ' + (el.scrollWidth - el.clientWidth) + ' px sideways without a sign that it scrolls');
    }
  }

  const nav = document.getElementById('nav');
  if (nav && shown(nav) && nav.scrollWidth > nav.clientWidth + 1) {
    problems.push('the navigation is cut: ' + (nav.scrollWidth - nav.clientWidth) + ' px of links hidden');
  }

  const actions = [...document.querySelectorAll('#nav a, .topbar button, main button, main a[href], main summary')].filter(shown);
  for (const el of actions) {
    el.scrollIntoView({ block: 'center', inline: 'nearest' });
    atStart();
    const e = el.getBoundingClientRect();
    let why = '';
    if (e.left < -0.5 || e.right > vw + 0.5) why = 'off the screen sideways (' + Math.round(e.left) + ' to ' + Math.round(e.right) + ' px)';
    else if (e.top < -0.5 || e.bottom > vh + 0.5) why = 'off the screen';
    for (let a = el.parentElement; !why && a && a !== root; a = a.parentElement) {
      if (!clips(a)) continue;
      const b = a.getBoundingClientRect();
      if (e.left < b.left - 0.5 || e.right > b.right + 0.5 || e.top < b.top - 0.5 || e.bottom > b.bottom + 0.5) why = 'clipped by ' + named(a);
    }
    if (!why) {
      const hit = document.elementFromPoint((e.left + e.right) / 2, (e.top + e.bottom) / 2);
      if (!hit || !(hit === el || el.contains(hit))) why = 'covered by ' + named(hit);
    }
    if (why) problems.push((el.dataset.action || el.tagName.toLowerCase()) + ' "' + words(el) + '" is not reachable: ' + why);
  }
  scrollTo(0, 0);
  return JSON.stringify(problems);
})()`

// checkLayout fails the test with every layout problem of the page the
// browser shows (layoutProblems), saying where.
func (b *browser) checkLayout(where string) {
	b.t.Helper()
	var problems []string
	answer, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](layoutProblems, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: checking the layout: %v", where, err)
	}
	if err := json.Unmarshal([]byte(answer), &problems); err != nil {
		b.t.Fatalf("%s: the layout check answered: %v", where, err)
	}
	for _, p := range problems {
		b.t.Errorf("%s: %s", where, p)
	}
}

// longHostname is a machine's name as some sites write them: longer than
// any column, dots and dashes its only places to break.
func longHostname(short string) string {
	return fmt.Sprintf("%s.compute-rack-r2-chassis-07-blade-14.datacenter-east.example.internal", short)
}
