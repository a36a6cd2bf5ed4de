// Small SVG charts for the console, drawn by hand: no library, no CDN.
// Every chart is role="img" with an aria-label that says its latest
// figures, so a screen reader hears the numbers the picture shows.

const NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs = {}, ...kids) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  e.append(...kids);
  return e;
}

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

const fmt = (v) => (v >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1));

// lineChart draws series [{name, cls, points: [number|null]}] over the
// same time slots (oldest first; null is a gap), scaled to the largest
// value; label names the chart for assistive technology.
export function lineChart(series, { label, unit = '', width = 320, height = 90 } = {}) {
  const n = Math.max(2, ...series.map((s) => s.points.length));
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.points.filter((p) => p != null))));
  const padL = 46, padB = 4, padT = 6, w = width - padL, h = height - padB - padT;
  const x = (i) => padL + (i * w) / (n - 1);
  const y = (v) => padT + h - (v / max) * h;
  const latest = series.map((s) => {
    const v = [...s.points].reverse().find((p) => p != null);
    return `${s.name} ${v == null ? '–' : fmt(v) + unit}`;
  }).join(', ');
  const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img', 'aria-label': `${label}: ${latest}` },
    svg('line', { x1: padL, y1: padT, x2: width, y2: padT, class: 'grid' }),
    svg('line', { x1: padL, y1: padT + h, x2: width, y2: padT + h, class: 'axis' }),
    svg('text', { x: padL - 4, y: padT + 8, class: 'tick', 'text-anchor': 'end' }, fmt(max) + unit),
    svg('text', { x: padL - 4, y: padT + h, class: 'tick', 'text-anchor': 'end' }, '0'));
  for (const s of series) {
    // One path per run of non-null points.
    let d = '';
    let pen = false;
    s.points.forEach((p, i) => {
      if (p == null) { pen = false; return; }
      d += `${pen ? 'L' : 'M'}${x(i + n - s.points.length).toFixed(1)},${y(p).toFixed(1)}`;
      pen = true;
    });
    const peak = Math.max(0, ...s.points.filter((p) => p != null));
    if (d) root.append(svg('path', { d, class: 'line ' + s.cls, 'data-series': s.name, 'data-peak': peak }));
  }
  return root;
}

// stackBars draws one horizontal bar per row, split into parts
// [{cls, value}] (each part's share of the row's total), with the row's
// label on the left and its total on the right: the stock of each night
// as sold, held, available.
export function stackBars(rows, { label, width = 320, rowHeight = 18 } = {}) {
  const padL = 84, padR = 52, gap = 6, w = width - padL - padR;
  const height = Math.max(1, rows.length) * (rowHeight + gap);
  const total = Math.max(1, ...rows.map((r) => r.parts.reduce((a, p) => a + p.value, 0)));
  const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart bars', role: 'img',
    'aria-label': `${label}: ` + rows.map((r) => `${r.label} ${r.parts.map((p) => `${p.name} ${p.value}`).join(' ')}`).join('; ') });
  rows.forEach((r, i) => {
    const top = i * (rowHeight + gap);
    root.append(svg('text', { x: 0, y: top + rowHeight - 5, class: 'tick' }, r.label));
    let at = padL;
    for (const p of r.parts) {
      const pw = (p.value / total) * w;
      if (pw > 0) root.append(svg('rect', { x: at.toFixed(1), y: top, width: pw.toFixed(1), height: rowHeight, class: 'bar ' + p.cls, 'data-part': p.name, 'data-value': p.value }));
      at += pw;
    }
    // The row's figure after its bar: bars alone showed the proportions
    // but not the numbers an operator acts on.
    const sum = r.parts.reduce((a, p) => a + p.value, 0);
    root.append(svg('text', { x: (at + 4).toFixed(1), y: top + rowHeight - 5, class: 'tick value', 'data-row': r.label }, String(sum)));
  });
  return root;
}
