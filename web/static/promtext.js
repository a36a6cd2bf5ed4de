// Reading GET /metrics (the Prometheus text format) in the console: the
// figures of one sale out of two scrapes a second apart.

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const unescape = (v) => v.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));

// parse returns the samples of a text exposition: [{name, labels, value}].
export function parse(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[2]) for (const l of m[2].matchAll(LABEL)) labels[l[1]] = unescape(l[2]);
    const value = m[3] === '+Inf' ? Infinity : Number(m[3]);
    if (!Number.isNaN(value)) out.push({ name: m[1], labels, value });
  }
  return out;
}

// PURCHASE_ROUTE is the route whose latency the console charts.
export const PURCHASE_ROUTE = 'POST /api/sales/{id}/purchase';

// The purchase outcomes counted as 503 (metrics/funnel.go splits them).
const UNAVAILABLE = ['unavailable', 'overloaded', 'indeterminate'];

export const STEPS = ['requested', 'admitted', 'reserved', 'written', 'paid'];

const emptyFigures = () => ({ ok: 0, requested: 0, limited: 0, unavailable: 0, steps: {}, buckets: [], found: false, process: '' });

// countOutcome adds n purchases answered with outcome to f.
function countOutcome(f, outcome, n) {
  f.found = true;
  f.requested += n;
  if (outcome === 'ok') f.ok += n;
  else if (outcome === 'rate_limited') f.limited += n;
  else if (UNAVAILABLE.includes(outcome)) f.unavailable += n;
}

// streamFigures reads the figures of one message of the operators'
// stream (GET /api/admin/sales/{id}/stream) into saleFigures' shape.
export function streamFigures(x) {
  const f = emptyFigures();
  f.process = String(x.process_start);
  for (const [outcome, n] of Object.entries(x.purchases || {})) countOutcome(f, outcome, n);
  f.steps = { ...(x.steps || {}) };
  const lat = x.purchase_latency || { count: 0, buckets: [] };
  f.buckets = lat.buckets.map((b) => ({ le: b.le, count: b.count })).concat([{ le: Infinity, count: lat.count }]);
  return f;
}

// saleFigures picks one sale's counters and the purchase route's latency
// buckets out of parsed samples. families names the metric families by
// role ({process, purchases, steps, latency}): the server renders them
// into the console page from the names its registry uses (web.go), so no
// metric name is spelled here.
export function saleFigures(samples, saleID, families) {
  const f = emptyFigures();
  const buckets = families.latency + '_bucket';
  for (const s of samples) {
    if (s.name === families.process) {
      f.process = String(s.value); // which instance answered: behind a load balancer, each scrape may be another
    } else if (s.name === families.purchases && s.labels.sale === saleID) {
      countOutcome(f, s.labels.outcome, s.value);
    } else if (s.name === families.steps && s.labels.sale === saleID) {
      f.steps[s.labels.step] = s.value;
    } else if (s.name === buckets && s.labels.route === PURCHASE_ROUTE) {
      f.buckets.push({ le: s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), count: s.value });
    }
  }
  f.buckets.sort((a, b) => a.le - b.le);
  return f;
}

// quantile is the q-quantile (0..1) of the requests between two scrapes'
// cumulative buckets, as the upper bound of the bucket it falls in (as
// Prometheus' histogram_quantile does, without interpolating); null when
// no request was answered between them.
export function quantile(q, before, after) {
  if (!after.length) return null;
  const prev = new Map(before.map((b) => [b.le, b.count]));
  const delta = after.map((b) => ({ le: b.le, count: b.count - (prev.get(b.le) || 0) }));
  const total = delta[delta.length - 1].count;
  if (!(total > 0)) return null;
  const rank = q * total;
  for (let i = 0; i < delta.length; i++) {
    if (delta[i].count >= rank) {
      if (delta[i].le !== Infinity) return delta[i].le;
      return i > 0 ? delta[i - 1].le : null; // past the last bound: say the last bound
    }
  }
  return null;
}

// rates turns two scrapes dt seconds apart into per-second figures.
export function rates(before, after, dt) {
  const per = (k) => Math.max(0, after[k] - before[k]) / dt;
  return {
    ok: per('ok'), requested: per('requested'), limited: per('limited'), unavailable: per('unavailable'),
    p99: quantile(0.99, before.buckets, after.buckets),
  };
}
