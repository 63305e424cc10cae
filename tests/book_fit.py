"""What a reader sees that does not fit or does not draw, measured in the browser.

Shared by tests/test_book_render.py and anyone looking at a built page: ``FIT`` returns one line
per problem on the page it runs in:

- ``wide``: a chart, an svg, a MathJax display or a table whose box runs past its text column
  (a table may be wider if a box of its own scrolls it and that box fits);
- ``outside``: a mark (text, symbol, line, rect) of a chart drawn outside the chart's own svg box,
  which the page then clips;
- ``empty facet``: a facet (a cell of a faceted chart) with no data marks in it;
- ``alike legend``: a legend with several entries whose symbols look the same (same shape, fill,
  stroke and dash), so the legend tells the reader nothing;
- ``overlap``: two pieces of text of one chart (tick labels, axis and panel titles, legend entries,
  text marks) whose boxes overlap by more than a sliver, which the reader sees as "0.20.3" or
  garbled titles.

``BROKEN_WORDS`` (called with a CSS selector) returns one line per cell of the selector whose text
has a word broken across lines ("rep/rod/uce/d") or runs out of the cell's box.
"""

from __future__ import annotations

FIT = r"""() => {
  const bad = [];
  const name = el => (el.closest('figure.tokendyn-figure')?.querySelector('figcaption')?.textContent
                      || el.textContent || el.tagName).trim().replace(/\s+/g, ' ').slice(0, 70);
  const column = el => el.closest('article.bd-article, main, body');
  const scrolls = el => { const o = getComputedStyle(el).overflowX; return o === 'auto' || o === 'scroll'; };
  // the nearest ancestor (inside the column) that scrolls the element sideways, if any
  const scroller = (el, col) => {
    for (let a = el.parentElement; a && a !== col; a = a.parentElement) if (scrolls(a)) return a;
    return null; };
  const fits = (el, what) => {
    const col = column(el), c = col.getBoundingClientRect(), r = el.getBoundingClientRect();
    if (r.width === 0) return;
    const s = scroller(el, col);
    if (s) {
      const b = s.getBoundingClientRect();
      if (b.right > c.right + 1 || b.left < c.left - 1) bad.push(`wide ${what}: its scroll box ends ${Math.round(b.right - c.right)} px past the column: ${name(el)}`);
      else if (what !== 'table' && s.scrollWidth > s.clientWidth + 1) bad.push(`wide ${what}: ${Math.round(s.scrollWidth - s.clientWidth)} px scrolled out of view: ${name(el)}`);
    } else if (r.right > c.right + 1 || r.left < c.left - 1) {
      bad.push(`wide ${what}: ends ${Math.round(r.right - c.right)} px past the column: ${name(el)}`);
    }
  };
  for (const el of document.querySelectorAll('.tokendyn-vega svg.marks')) fits(el, 'chart');
  for (const el of document.querySelectorAll('article svg:not(.tokendyn-vega svg):not(mjx-container svg)')) fits(el, 'svg');
  for (const el of document.querySelectorAll('mjx-container[display="true"]')) {
    const m = el.querySelector('mjx-math') || el;
    const r = m.getBoundingClientRect(), b = el.getBoundingClientRect();
    const c = column(el).getBoundingClientRect();
    if (r.right > Math.min(b.right, c.right) + 1 || r.width > b.width + 1) bad.push(`wide equation: ${Math.round(r.width - Math.min(b.width, c.width))} px too wide: ${el.textContent.slice(0, 60)}`);
  }
  for (const el of document.querySelectorAll('article table')) fits(el, 'table');

  for (const svg of document.querySelectorAll('.tokendyn-vega svg.marks')) {
    const box = svg.getBoundingClientRect();
    const marks = svg.querySelectorAll('g.mark-text text, g.mark-symbol path, g.mark-rule line, g.mark-rect path, g.mark-line path, g.mark-point path, g.mark-tick line');
    let out = 0, first = '';
    for (const m of marks) {
      const r = m.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.right > box.right + 1.5 || r.left < box.left - 1.5 || r.bottom > box.bottom + 1.5 || r.top < box.top - 1.5) {
        out++; if (!first) first = (m.textContent || m.tagName).slice(0, 40);
      }
    }
    if (out) bad.push(`outside: ${out} marks drawn outside the chart's box (first: ${first}): ${name(svg)}`);

    // facets and side-by-side panels: a scope group's items are the panels, each holding its
    // own marks; a data mark is a group with role "mark" (axes, legends and titles have others)
    for (const scope of svg.querySelectorAll('g.mark-group.role-scope')) {
      // the outermost panels only: a layer's own groups (one per line series) nest inside them
      if (scope.closest('.role-legend, .role-axis, .role-title, .role-row-header, .role-column-header')
          || scope.parentElement.closest('g.mark-group.role-scope')) continue;
      [...scope.children].forEach((item, k) => {
        if (item.tagName !== 'g') return;
        const drawn = [...item.querySelectorAll('g.role-mark > *')].filter(m => {
          const r = m.getBoundingClientRect(); return r.width > 0 || r.height > 0; });
        if (!drawn.length) bad.push(`empty facet: panel ${k + 1} has no marks: ${name(svg)}`);
      });
    }

    for (const legend of svg.querySelectorAll('g.role-legend')) {
      const syms = [...legend.querySelectorAll('g.role-legend-symbol path')];
      if (syms.length < 2) continue;
      // what the eye sees: a dash pattern on an invisible stroke does not tell entries apart
      const look = p => {
        const a = k => p.getAttribute(k) || '';
        const stroked = a('stroke') && a('stroke') !== 'transparent' && a('stroke') !== 'none' && a('stroke-width') !== '0';
        const filled = a('fill') && a('fill') !== 'transparent' && a('fill') !== 'none' && a('fill-opacity') !== '0';
        return [a('d'), filled ? a('fill') : '', stroked ? a('stroke') : '', stroked ? a('stroke-dasharray') : '',
                a('opacity')].join('|'); };
      if (new Set(syms.map(look)).size === 1) bad.push(`alike legend: ${syms.length} entries with the same symbol: ${name(svg)}`);
    }

    // text on text, in each text's own (possibly rotated) frame: two boxes overlap when every axis
    // of either box sees them overlap (separating axes); it counts when the shallowest overlap is
    // deeper than a quarter of the smaller box's short side and 2 px (boxes carry some leading, so
    // the lines of one title may touch)
    const frame = t => {
      const b = t.getBBox(), m = t.getScreenCTM();
      const pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
        .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
      return {pts, short: Math.min(b.width, b.height) * Math.hypot(m.a, m.b)}; };
    const depth = (P, Q) => {
      let d = Infinity;
      for (const poly of [P, Q]) for (let i = 0; i < 4; i++) {
        const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % 4], L = Math.hypot(x2 - x1, y2 - y1);
        if (!L) continue;
        const ax = (y1 - y2) / L, ay = (x2 - x1) / L, p = P.map(([x, y]) => x * ax + y * ay), q = Q.map(([x, y]) => x * ax + y * ay);
        d = Math.min(d, Math.min(Math.max(...p), Math.max(...q)) - Math.max(Math.min(...p), Math.min(...q)));
      }
      return d; };
    // a label Vega culled for overlap stays in the svg at opacity 0: only what is drawn counts
    const shown = t => !t.closest('[opacity="0"]') && getComputedStyle(t).opacity !== '0'
      && getComputedStyle(t).visibility !== 'hidden' && t.getAttribute('fill-opacity') !== '0';
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() && shown(t) && t.getBBox().width > 0)
      .map(t => [t.textContent.trim(), frame(t)]);
    let hits = 0, pair = '';
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i][1], b = texts[j][1];
      if (depth(a.pts, b.pts) > Math.max(2, 0.25 * Math.min(a.short, b.short))) {
        hits++; if (!pair) pair = `"${texts[i][0].slice(0, 30)}" on "${texts[j][0].slice(0, 30)}"`; }
    }
    if (hits) bad.push(`overlap: ${hits} pairs of text overlap (first: ${pair}): ${name(svg)}`);
  }
  return bad; }"""


# The cells matching a selector (its argument) in which a word is broken across lines: each word of
# the cell's text must lie on one line, and the cell must not scroll its text out of view. One line
# per problem: the cell's text and the word.
BROKEN_WORDS = r"""sel => {
  const bad = [];
  for (const cell of document.querySelectorAll(sel)) {
    const text = cell.textContent.trim().replace(/\s+/g, ' ');
    if (cell.scrollWidth > cell.clientWidth + 1) bad.push(`clipped: "${text}" (${cell.scrollWidth} > ${cell.clientWidth} px)`);
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (const m of n.textContent.matchAll(/\S+/g)) {
        const r = document.createRange();
        r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
        if (lines.size > 1) bad.push(`broken: "${m[0]}" over ${lines.size} lines in "${text}"`);
      }
    }
  }
  return bad; }"""
