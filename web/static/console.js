// The operator console: GET /console. The admin token is kept in this
// tab's sessionStorage only and sent in the Authorization header, never in
// a URL. It lists the sales (GET /api/admin/sales, or the public list on a
// server without it), creates one through a checked form, and shows one
// sale's dashboard updated every second: its nights from the admin view,
// its funnel, purchases, 429s, 503s and the purchase route's p99, its
// audit, the breaker; with the actions the API has: pause, resume, close,
// add and take back rooms, close a night to sale and reopen it (each
// night's row shows its stay rules), preheat, repair; an edit of the sale (the
// create form, prefilled, locked to what a started sale may change), its
// change log, its orders (filtered, paged, and every one as CSV), a
// test sale's deletion, and for a sale with a waiting room its queue
// (counts, pace, the draw's commitment and seed) with a form to change the
// pace.
//
// The dashboard is pushed by GET /api/admin/sales/{id}/stream, once a
// second. EventSource cannot send the Authorization header, so the stream
// is read with fetch() and a ReadableStream reader: the admin token stays
// in the header, never in a URL or an access log. While the stream is
// down the dashboard polls instead (the admin view and /metrics every
// second, the audit every 10 s) and the stream is tried again with a
// growing delay.
import { t, setupSwitch, apply, money } from './i18n.js';
import { call, errorCode, errorMessage, stream } from './api.js';
import { lineChart, stackBars } from './chart.js';
import { parse, saleFigures, streamFigures, rates, STEPS } from './promtext.js';
import * as form from './saleform.js';

const KEY = 'flashsale.admin';
const HISTORY = 60; // seconds of figures the charts keep
const $ = (x) => document.getElementById(x);
// FAMILIES are the metric families read from /metrics while the stream is
// down, by role: the server renders them into the page (#metric-families)
// from the names its registry uses.
const FAMILIES = JSON.parse($('metric-families').textContent);
let admin = null;
try { admin = sessionStorage.getItem(KEY); } catch { /* storage off: sign in each time */ }

let timer = null;
let tick = 0;
let busy = false;
const inst = { ready: null, breaker: null };
// hasBreaker turns false at the first 404: the embedded shape has no
// breaker, and asking every second was a 404 and a log line each time.
let hasBreaker = true;
const list = { sales: [], next: null, pages: 1, source: 'admin', filter: '', drawn: '' };
// detail is the open sale's dashboard state.
let detail = null;

const el = (tag, props = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'data') Object.assign(e.dataset, v);
    else if (k.startsWith('aria-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  e.append(...kids);
  return e;
};
const enc = encodeURIComponent;

function say(key, vars) { $('msg').textContent = t(key, vars); }

// --- signing in -------------------------------------------------------------
async function signIn(tok) {
  const res = await call('GET', '/api/admin/breaker', { token: tok });
  if (res.status === 401 || res.status === 403) { say('console.bad_token'); return false; }
  hasBreaker = res.status !== 404;
  admin = tok;
  try { sessionStorage.setItem(KEY, tok); } catch { /* this page only */ }
  // Drawn before it is shown: the instance line and the list, arriving
  // under a dashboard already on screen, pushed its buttons down under a
  // finger (or a click) already on its way, and it landed on another
  // button. The sale's dashboard comes after the list for the same reason.
  try { await refresh(); } catch { /* the next refresh draws it */ }
  if (admin !== tok) return false; // the first refresh signed out
  $('signin').hidden = true;
  $('dash').hidden = false;
  $('signout').hidden = false;
  $('msg').textContent = '';
  const want = new URLSearchParams(location.hash.slice(1)).get('sale');
  if (want) open(want);
  timer = setInterval(refresh, 1000);
  return true;
}

function signOut() {
  admin = null;
  try { sessionStorage.removeItem(KEY); } catch { /* nothing kept */ }
  clearInterval(timer);
  stopStream(detail);
  detail = null;
  $('detail').hidden = true;
  $('dash').hidden = true;
  $('signout').hidden = true;
  $('signin').hidden = false;
  $('token').value = '';
}

// --- the loop ---------------------------------------------------------------
// refresh runs every second: the instance and the open sale every time,
// the list every 5 s, the audit every 10 s. A slow answer skips ticks
// rather than piling requests up.
async function refresh() {
  if (busy || !admin) return;
  busy = true;
  try {
    const n = tick++;
    // While a dashboard streams, it brings the breaker: the instance is
    // read with the list, every 5 s.
    const streaming = detail && detail.streaming;
    if (!streaming || n % 5 === 0) {
      const [ready, brk] = await Promise.all([call('GET', '/readyz'), streaming || !hasBreaker ? null : call('GET', '/api/admin/breaker', { token: admin })]);
      if (brk && brk.status === 401) { signOut(); say('console.bad_token'); return; }
      if (brk && brk.status === 404) hasBreaker = false;
      inst.ready = ready.body;
      if (brk) inst.breaker = brk.status === 200 ? brk.body : null;
      renderInstance();
    }
    const jobs = [];
    if (n % 5 === 0) jobs.push(loadList(false));
    if (detail && !detail.streaming) jobs.push(loadDetail(n % 10 === 0 || !detail.audit));
    if (detail && detail.view && detail.view.waiting_room) jobs.push(loadQueue(detail));
    await Promise.all(jobs);
  } finally {
    busy = false;
  }
}

function renderInstance() {
  const r = inst.ready || {};
  const b = inst.breaker;
  $('instance').replaceChildren(
    el('strong', { textContent: r.ready ? t('console.ready') : t('console.not_ready') }),
    ` · ${t('console.engine')}: ${r.engine || '?'} · ${t('console.database')}: ${r.database || '?'}`,
    r.selling ? ` · ${t('console.selling')}: ${r.selling}` : '',
    ` · ${t('console.breaker')}: ${breakerText(b)}`,
  );
  for (const btn of document.querySelectorAll('[data-force]')) btn.disabled = !b;
}

const breakerText = (b) => (b ? b.state + (b.forced && b.forced !== 'auto' ? ' (' + b.forced + ')' : '') : t('console.no_breaker'));

// --- the list ---------------------------------------------------------------
// loadList reads the first page (or, with more, the next one) of the
// admin list; a server without it (404 or 405 on GET /api/admin/sales)
// gets the public list of upcoming and active sales instead.
async function loadList(more) {
  // Only the latest load may render: one in flight while a sale was
  // deleted (or the filter changed) answers with the list from before.
  const seq = list.seq = (list.seq || 0) + 1;
  const q = new URLSearchParams({ limit: '50' });
  if (list.filter) q.set('status', list.filter);
  if (more && list.next) q.set('cursor', list.next);
  let res = list.source === 'admin' ? await call('GET', '/api/admin/sales?' + q, { token: admin }) : null;
  if (seq !== list.seq) return;
  if (res && (res.status === 404 || res.status === 405)) list.source = 'public';
  if (list.source === 'public') {
    res = await call('GET', '/api/sales');
    if (seq !== list.seq) return;
    if (res.status === 200) {
      list.sales = res.body.sales.filter((s) => !list.filter || s.status === list.filter);
      list.next = null;
    }
  } else if (res.status === 200) {
    const page = res.body.sales || [];
    if (more) {
      const have = new Set(list.sales.map((s) => s.id));
      list.sales = list.sales.concat(page.filter((s) => !have.has(s.id)));
      list.next = res.body.next_cursor || null;
      list.pages++;
    } else if (list.pages > 1) {
      list.sales = mergeFirstPage(page); // keep the later pages and their cursor
    } else {
      list.sales = page;
      list.next = res.body.next_cursor || null;
    }
  }
  renderList();
}

// mergeFirstPage refreshes the first page without dropping the pages
// "more" loaded after it.
function mergeFirstPage(page) {
  const fresh = new Map(page.map((s) => [s.id, s]));
  return page.concat(list.sales.filter((s) => !fresh.has(s.id)));
}

const total = (s, k) => (s.nights || []).reduce((a, n) => a + (n[k] || 0), 0);
const statusOf = (s) => (s.paused && s.status !== 'ended' ? 'paused' : s.status);

function renderList() {
  $('list-note').textContent = list.source === 'public' ? t('console.list_public') : '';
  $('more').hidden = !list.next;
  // What the rows show, without server_time, which changes every second.
  const shown = list.sales.map((s) => [s.id, s.title, s.hotel, s.room_type, statusOf(s), s.starts_at, s.ends_at, total(s, 'available'), total(s, 'sold'), !!s.test]);
  const drawn = JSON.stringify([shown, document.documentElement.lang, detail && detail.id]);
  if (drawn === list.drawn) return; // unchanged: keep the focus where it is
  list.drawn = drawn;
  const box = $('sales');
  if (!list.sales.length) { box.replaceChildren(el('p', { textContent: t('console.no_sales') })); return; }
  const focused = document.activeElement && document.activeElement.dataset.open;
  // Each header sits over its column: text left, figures right (the
  // headers were all right-aligned over left-aligned text).
  const head = el('tr', {}, ...['console.sale', 'console.status', 'console.left_sold', 'console.actions']
    .map((k) => el('th', { scope: 'col', className: k === 'console.left_sold' ? 'num' : '', textContent: t(k) })));
  const rows = list.sales.map((s) => {
    const st = statusOf(s);
    const btn = el('button', { type: 'button', textContent: t('console.open'), data: { open: s.id },
      'aria-label': t('console.open_sale', { title: s.title }), onclick: () => open(s.id) });
    if (detail && detail.id === s.id) btn.setAttribute('aria-current', 'true');
    return el('tr', { data: { sale: s.id } },
      el('th', { scope: 'row' }, el('span', { textContent: s.title }), s.test ? testBadge() : '', el('br'),
        el('small', { textContent: `${s.hotel} · ${s.room_type} · ${when(s.starts_at)} – ${when(s.ends_at)}` })),
      el('td', {}, el('span', { className: 'pill ' + st, textContent: t('status.' + st) })),
      el('td', { className: 'num', textContent: total(s, 'available') + ' / ' + (s.nights && s.nights[0] && 'sold' in s.nights[0] ? total(s, 'sold') : '–') }),
      el('td', {}, btn));
  });
  box.replaceChildren(el('table', { className: 'list' }, el('thead', {}, head), el('tbody', {}, ...rows)));
  if (focused) { const b = box.querySelector(`[data-open="${CSS.escape(focused)}"]`); if (b) b.focus(); }
}

// testBadge marks a test sale ("test": true: hidden from the public list,
// deletable with its orders).
const testBadge = () => el('span', { className: 'pill test', textContent: t('console.test'), title: t('console.test_hint') });

function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '?' : d.toLocaleString(document.documentElement.lang, { dateStyle: 'short', timeStyle: 'short' });
}

// --- one sale's dashboard ---------------------------------------------------
// open shows a sale's dashboard; its ID goes in the fragment (never sent
// to a server) so a reload comes back to it.
function open(id) {
  stopStream(detail);
  detail = { id, view: null, audit: null, figures: null, last: new Map(), history: [], metrics: true,
    streaming: false, abort: null, backoff: 2000, retry: null, changesRev: null, orders: { list: [], next: null, status: '' } };
  history.replaceState(null, '', '#sale=' + enc(id));
  buildDetail();
  list.drawn = '';
  renderList();
  startStream(detail);
  loadOrders(detail, false);
  $('detail').hidden = false;
  $('d-title').focus();
}

function closeDetail() {
  const id = detail && detail.id;
  if (editing) closeForm(false);
  stopStream(detail);
  detail = null;
  history.replaceState(null, '', location.pathname);
  $('detail').hidden = true;
  list.drawn = '';
  renderList();
  const b = id && $('sales').querySelector(`[data-open="${CSS.escape(id)}"]`);
  if (b) b.focus();
}

// buildDetail draws the dashboard's frame once per sale: its controls are
// never redrawn, so a keyboard user's focus and a half-typed room count
// survive the updates.
function buildDetail() {
  const fig = (key, id, legend) => el('figure', { className: 'panel' },
    el('figcaption', { data: { i18n: key }, textContent: t(key) }), el('div', { id }), legend || '');
  const legend = (...parts) => el('p', { className: 'legend' }, ...parts.map(([cls, key]) =>
    el('span', {}, el('i', { className: 'swatch ' + cls, 'aria-hidden': 'true' }), el('span', { data: { i18n: key }, textContent: t(key) }))));
  const btn = (id, key, onclick) => el('button', { type: 'button', id, textContent: t(key), data: { i18n: key }, onclick });
  const dates = el('select', { id: 'd-night' });
  $('detail').replaceChildren(
    el('p', {}, el('button', { type: 'button', className: 'link', data: { i18n: 'console.back' }, textContent: t('console.back'), onclick: closeDetail })),
    el('h2', { id: 'd-title', tabIndex: -1 }),
    el('p', { id: 'd-meta', className: 'hint' }),
    el('p', { className: 'actions' },
      btn('d-pause', 'console.pause', () => lifecycle('pause')),
      btn('d-resume', 'console.resume', () => lifecycle('resume')),
      btn('d-close', 'console.close', () => lifecycle('close')),
      btn('d-preheat', 'console.preheat', () => act(t('console.preheat'), 'POST', `/api/admin/sales/${enc(detail.id)}/preheat`)),
      btn('d-repair', 'console.repair', () => act(t('console.repair'), 'POST', `/api/admin/sales/${enc(detail.id)}/audit/repair`)),
      Object.assign(btn('d-edit', 'console.edit', openEdit), { ariaExpanded: 'false' }),
      Object.assign(btn('d-delete', 'console.delete', deleteSale), { className: 'danger', hidden: true })),
    el('div', { id: 'd-edit-slot' }),
    el('form', { id: 'd-rooms', className: 'rooms-form', onsubmit: (e) => e.preventDefault() },
      el('label', { htmlFor: 'd-night', data: { i18n: 'console.night' }, textContent: t('console.night') }), dates,
      el('label', { htmlFor: 'd-delta', data: { i18n: 'console.rooms' }, textContent: t('console.rooms') }),
      el('input', { id: 'd-delta', type: 'number', min: '1', max: '1000000', step: '1', value: '1', inputMode: 'numeric' }),
      btn('d-add', 'console.add_rooms', () => stock(1)),
      btn('d-remove', 'console.remove_rooms', () => stock(-1))),
    el('p', { id: 'd-msg', className: 'result', role: 'status', 'aria-live': 'polite' }),
    el('p', { id: 'd-health', className: 'health', 'aria-live': 'polite' }),
    queuePanel(),
    el('div', { className: 'panels' },
      fig('console.chart_stock', 'c-stock', legend(['sold', 'console.sold'], ['held', 'console.held'], ['available', 'console.available'])),
      fig('console.chart_purchases', 'c-purchases', legend(['ok', 'console.orders_s'], ['requested', 'console.requests_s'])),
      fig('console.chart_funnel', 'c-funnel'),
      fig('console.chart_refusals', 'c-refusals', legend(['limited', 'console.r429'], ['unavailable', 'console.r503'])),
      fig('console.chart_p99', 'c-p99', el('p', { className: 'hint', data: { i18n: 'console.p99_note' }, textContent: t('console.p99_note') }))),
    el('div', { className: 'table-wrap' }, el('table', { id: 'd-nights' })),
    el('section', { 'aria-labelledby': 'ch-title' },
      el('h3', { id: 'ch-title', data: { i18n: 'console.changes' }, textContent: t('console.changes') }),
      el('div', { className: 'table-wrap' }, el('table', { id: 'd-changes', className: 'changes' }))),
    el('section', { 'aria-labelledby': 'o-title' },
      el('h3', { id: 'o-title', data: { i18n: 'console.orders' }, textContent: t('console.orders') }),
      el('p', { className: 'toolbar' },
        el('label', { htmlFor: 'o-status', data: { i18n: 'console.filter' }, textContent: t('console.filter') }),
        el('select', { id: 'o-status', onchange: () => { detail.orders.status = $('o-status').value; loadOrders(detail, false); } },
          ...['', 'held', 'paid', 'expired', 'cancelled', 'failed'].map((s) => {
            const o = new Option(t(s ? 'order.' + s : 'console.all'), s);
            o.dataset.i18n = s ? 'order.' + s : 'console.all';
            return o;
          })),
        btn('o-refresh', 'console.refresh', () => loadOrders(detail, false)),
        btn('o-csv', 'console.csv', downloadCSV)),
      el('p', { id: 'o-msg', className: 'result', role: 'status', 'aria-live': 'polite' }),
      el('div', { className: 'table-wrap', id: 'o-wrap', tabIndex: 0, 'aria-labelledby': 'o-title' }, el('table', { id: 'd-orders', className: 'orders' })),
      btn('o-more', 'console.more_orders', () => loadOrders(detail, true))),
  );
}

async function loadDetail(withAudit) {
  const d = detail;
  if (!d) return;
  const id = enc(d.id);
  const [v, m, a] = await Promise.all([
    call('GET', `/api/admin/sales/${id}`, { token: admin }),
    d.metrics ? fetchText('/metrics') : Promise.resolve(null),
    withAudit ? call('GET', `/api/admin/sales/${id}/audit`, { token: admin }) : Promise.resolve(null),
  ]);
  if (detail !== d) return;
  if (v.status === 200) setView(d, v.body);
  else if (v.status === 404) d.missing = true;
  if (a && a.status === 200) d.audit = a.body;
  if (m === null && d.metrics) d.metrics = false; // no /metrics on this listener
  if (m) addFigures(d, saleFigures(parse(m.text), d.id, FAMILIES), m.at);
  renderDetail();
}

// addFigures adds one sample of a sale's counters, read at (ms), to its
// history. A rate is taken between two samples of the same process:
// behind a load balancer the next scrape may be another instance's.
function addFigures(d, f, at) {
  const prev = d.last.get(f.process);
  const dt = prev ? (at - prev.at) / 1000 : 0;
  d.history.push(dt > 0.2 && dt < 10 ? rates(prev.figures, f, dt) : { ok: null, requested: null, limited: null, unavailable: null, p99: null });
  if (d.history.length > HISTORY) d.history.shift();
  d.last.set(f.process, { figures: f, at });
  d.figures = f;
}

// setView takes a fresh admin view of the open sale; the list's row of
// this sale follows the dashboard, not its own 5 s.
function setView(d, v) {
  // A view read before a change this page has already drawn (a stream
  // message or a poll in flight while the operator closed the sale) must
  // not undo it: its revision is older. Figures move without a revision,
  // so an equal one is taken.
  if (d.view && d.view.id === v.id && v.revision < d.view.revision) return;
  d.view = v;
  if (v.revision !== d.changesRev) loadChanges(d);
  const i = list.sales.findIndex((s) => s.id === d.id);
  if (i >= 0 && list.source === 'admin') { list.sales[i] = v; renderList(); }
}

// startStream reads the sale's dashboard stream until it fails or the
// dashboard closes; on failure the dashboard polls and the stream is
// tried again after d.backoff (doubling, at most 30 s).
async function startStream(d) {
  if (detail !== d || !admin) return;
  d.abort = new AbortController();
  let up = false;
  const r = await stream(`/api/admin/sales/${enc(d.id)}/stream`, { token: admin, signal: d.abort.signal, on: (ev, data) => {
    if (detail !== d) return false;
    if (ev !== 'dashboard') return true;
    let msg;
    try { msg = JSON.parse(data); } catch { return false; } // a bad message: poll
    if (!up) { up = true; d.streaming = true; d.backoff = 2000; $('detail').dataset.feed = 'stream'; }
    onDashboard(d, msg);
    return true;
  } });
  if (r.status === 401) { signOut(); say('console.bad_token'); return; }
  if (r.status === 404 && detail === d && r.body && r.body.error && !/no route/.test(r.body.error.message)) {
    d.missing = true;
    renderDetail();
    return;
  }
  // The network, aborted, a refusal or a bad message: poll.
  if (detail !== d || (d.abort && d.abort.signal.aborted)) return;
  d.streaming = false;
  $('detail').dataset.feed = 'poll';
  loadDetail(true);
  d.retry = setTimeout(() => startStream(d), d.backoff);
  d.backoff = Math.min(d.backoff * 2, 30000);
}

function stopStream(d) {
  if (!d) return;
  clearTimeout(d.retry);
  if (d.abort) d.abort.abort();
  d.streaming = false;
}

// onDashboard draws one message of the stream.
function onDashboard(d, msg) {
  setView(d, msg.sale);
  if (msg.audit) d.audit = msg.audit;
  inst.breaker = msg.breaker || null;
  d.metrics = !!msg.figures;
  if (msg.figures) addFigures(d, streamFigures(msg.figures), performance.now());
  renderInstance();
  renderDetail();
}

// fetchText reads a text endpoint: {text, at}, or null when it is not there.
async function fetchText(path) {
  try {
    const r = await fetch(path, { cache: 'no-store' });
    if (!r.ok) return null;
    return { text: await r.text(), at: performance.now() };
  } catch {
    return null;
  }
}

// waitingRoomText is a sale's waiting room in a sentence.
function waitingRoomText(w) {
  const rate = w.admit_per_second ? t('console.rate', { n: w.admit_per_second }) : t('console.rate_derived');
  return t('console.waiting_room', { m: w.prequeue_minutes, rate, a: w.admission_seconds });
}

function renderDetail() {
  const d = detail;
  if (!d) return;
  const v = d.view;
  if (!v) {
    $('d-title').textContent = d.missing ? t('console.no_such_sale', { id: d.id }) : t('loading');
    return;
  }
  const st = statusOf(v);
  $('d-title').replaceChildren(`${v.title} · ${t('status.' + st)}`, v.test ? Object.assign(testBadge(), { id: 'd-test' }) : '');
  $('d-title').dataset.status = st;
  $('d-meta').replaceChildren(`${v.hotel} · ${v.room_type} · ${money(v.price, v.currency)}` +
    (v.original_price > v.price ? ` (${money(v.original_price, v.currency)})` : '') +
    ` · ${when(v.starts_at)} – ${when(v.ends_at)} · ${v.id} · `,
  el('span', { id: 'd-revision', data: { revision: String(v.revision) }, textContent: t('console.revision', { n: v.revision }) }),
  ...(v.waiting_room ? [' · ', el('span', { id: 'd-waiting_room', textContent: waitingRoomText(v.waiting_room) })] : []),
  ...(isSlots(v) ? [' · ', el('span', { id: 'd-kind', textContent: t(v.kind === 'seats' ? 'console.kind_seats' : 'console.kind_slot', { zone: v.time_zone || 'UTC' }) })] : []));
  const ended = st === 'ended';
  $('d-edit').disabled = ended;
  $('d-delete').hidden = !v.test;
  $('d-pause').hidden = st === 'paused';
  $('d-pause').disabled = ended;
  $('d-resume').hidden = st !== 'paused';
  $('d-close').disabled = ended;

  // Rooms are added and taken back by a night's date: a slot sale's
  // dates repeat (three services a day), so the form is not offered there.
  $('d-rooms').hidden = isSlots(v);
  const sel = $('d-night');
  const dates = v.nights.map((n) => n.date).join();
  if (sel.dataset.dates !== dates) {
    const keep = sel.value;
    sel.replaceChildren(...v.nights.map((n) => new Option(n.date, n.date)));
    if (v.nights.some((n) => n.date === keep)) sel.value = keep;
    sel.dataset.dates = dates;
  }

  const a = d.audit;
  const audit = a ? (a.balanced ? t('console.balanced') : t('console.unbalanced')) +
    (a.findings && a.findings.length ? ' · ' + t('console.findings', { n: a.findings.length }) : '') : '…';
  const health = $('d-health');
  health.replaceChildren(
    el('span', { className: a && !a.balanced ? 'bad' : '', id: 'd-audit', textContent: `${t('console.audit')}: ${audit}` }),
    ` · ${t('console.breaker')}: `, el('span', { id: 'd-breaker', textContent: breakerText(inst.breaker) }));

  renderNights(d, v, ended);

  renderQueue();

  const vehicle = vehicleNumbers(v);
  $('c-stock').replaceChildren(stackBars(v.nights.map((n, i) => ({ label: isSlots(v) ? `${n.date.slice(5)} ${n.time}` + (v.kind === 'seats' ? ` #${vehicle[i]}` : '') : n.date, parts: [
    { name: t('console.sold'), cls: 'sold', value: n.sold }, { name: t('console.held'), cls: 'held', value: n.held },
    { name: t('console.available'), cls: 'available', value: n.available }] })), { label: t('console.chart_stock') }));

  if (!d.metrics) {
    for (const id of ['c-purchases', 'c-funnel', 'c-refusals', 'c-p99']) $(id).replaceChildren(el('p', { className: 'hint', textContent: t('console.no_metrics') }));
    return;
  }
  const h = d.history;
  const pad = (xs) => Array(Math.max(0, HISTORY - xs.length)).fill(null).concat(xs);
  const series = (k) => pad(h.map((r) => r[k]));
  $('c-purchases').replaceChildren(lineChart([
    { name: t('console.orders_s'), cls: 'ok', points: series('ok') },
    { name: t('console.requests_s'), cls: 'requested', points: series('requested') }], { label: t('console.chart_purchases'), unit: '/s' }));
  $('c-refusals').replaceChildren(lineChart([
    { name: t('console.r429'), cls: 'limited', points: series('limited') },
    { name: t('console.r503'), cls: 'unavailable', points: series('unavailable') }], { label: t('console.chart_refusals'), unit: '/s' }));
  $('c-p99').replaceChildren(lineChart([
    { name: 'p99', cls: 'p99', points: pad(h.map((r) => (r.p99 == null ? null : r.p99 * 1000))) }], { label: t('console.chart_p99'), unit: ' ms' }));
  const steps = (d.figures && d.figures.steps) || {};
  $('c-funnel').replaceChildren(stackBars(STEPS.map((s) => ({ label: t('step.' + s), parts: [{ name: String(steps[s] || 0), cls: 'step', value: steps[s] || 0 }] })),
    { label: t('console.chart_funnel') }));
  $('c-funnel').dataset.steps = STEPS.map((s) => steps[s] || 0).join();
}

// --- the nights and their stay rules -----------------------------------------
// Each night's row shows its counters, its stay rules in brief (issue 25)
// and a Stop sell / Reopen button: PATCH .../nights/{date} {stop_sell},
// which closes (or reopens) the night at once; the table is drawn again
// from the answer. The table is redrawn only when what it shows changes,
// so a keyboard user's focus stays on a night's button.
const COUNTERS = ['stock', 'available', 'held', 'sold'];

// ruleText is a night's stay rules in brief ("min 2 · CTA · closed"),
// '–' for none: the form's summary of a night says them the same way.
const ruleText = (n) => form.ruleSummary(n) || '–';

// isSlots reports whether a sale sells time slots (issue 25's kind slot):
// its units are a date and a start in the venue's zone, maybe a length.
// A seats sale (kind seats) is timed too, its units the vehicles of its
// departures.
const isSlots = (v) => v.kind === 'slot' || v.kind === 'seats';

// vehicleNumbers numbers a seats sale's units within their departure: the
// nth unit of the same date and time is its vehicle n.
function vehicleNumbers(v) {
  return v.nights.map((n, i, all) => {
    let k = 1;
    while (i - k >= 0 && all[i - k].date === n.date && all[i - k].time === n.time) k++;
    return k;
  });
}

// unitName is a unit as the dashboard names it: a night's date, a slot's
// date and start (its length beside it), or a departure's date and start
// and the vehicle ("09:00 · vehicle 2").
const unitName = (v, n, vehicle) => (!isSlots(v) ? n.date : `${n.date} ${n.time}` +
  (v.kind === 'seats' ? ` · ${t('console.vehicle', { n: vehicle })}` : n.minutes ? ` · ${n.minutes} min` : ''));

function renderNights(d, v, ended) {
  const box = $('d-nights');
  const shown = JSON.stringify([v.kind, v.nights, ended, d.nightBusy || '', document.documentElement.lang]);
  if (box.dataset.shown === shown) return;
  const focused = box.contains(document.activeElement) ? document.activeElement.dataset.night : '';
  const sum = { stock: 0, available: 0, held: 0, sold: 0 };
  const slots = isSlots(v);
  const vehicle = vehicleNumbers(v);
  const rows = v.nights.map((n, i) => {
    for (const k in sum) sum[k] += n[k];
    if (slots) {
      // A slot has no stay rules, and Stop sell goes by a date, which
      // names several slots: its row is its start and its counters. A
      // departure's vehicles are a row each, numbered.
      const name = `${n.date}T${n.time}`;
      const data = v.kind === 'seats' ? { night: `${name}#${vehicle[i]}`, slot: name, vehicle: String(vehicle[i]) } : { night: name, slot: name };
      return el('tr', { data },
        el('th', { scope: 'row', textContent: unitName(v, n, vehicle[i]) }),
        ...COUNTERS.map((k) => el('td', { className: 'num', data: { counter: k }, textContent: String(n[k]) })));
    }
    const closed = !!n.stop_sell;
    const btn = el('button', { type: 'button', className: 'night-sell', textContent: t(closed ? 'console.reopen' : 'console.stop_sell'),
      disabled: ended || d.nightBusy === n.date, data: { night: n.date, stopSell: String(closed) },
      'aria-label': t(closed ? 'console.reopen_night' : 'console.stop_sell_night', { date: n.date }), onclick: () => stopSell(n.date, !closed) });
    return el('tr', { data: { night: n.date, stopSell: String(closed) }, className: closed ? 'closed' : '' },
      el('th', { scope: 'row', textContent: n.date }),
      ...COUNTERS.map((k) => el('td', { className: 'num', textContent: String(n[k]) })),
      el('td', { className: 'rules', data: { rules: '' }, textContent: ruleText(n) }),
      el('td', {}, btn));
  });
  rows.push(el('tr', { className: 'total' }, el('th', { scope: 'row', textContent: 'Σ' }), ...COUNTERS.map((k) => el('td', { className: 'num', textContent: String(sum[k]) }))));
  const heads = slots ? [v.kind === 'seats' ? 'console.departure' : 'console.slot', ...COUNTERS.map((k) => 'console.' + k)] : ['console.date', ...COUNTERS.map((k) => 'console.' + k), 'console.rules', 'console.actions'];
  box.replaceChildren(
    el('caption', { textContent: t(v.kind === 'seats' ? 'console.seats_caption' : slots ? 'console.slots_caption' : 'console.nights_caption') }),
    el('thead', {}, el('tr', {}, ...heads.map((k, i) => el('th', { scope: 'col', className: i && i <= COUNTERS.length ? 'num' : '', textContent: t(k),
      title: k === 'console.rules' ? t('console.rules_hint') : '' })))),
    el('tbody', {}, ...rows));
  box.dataset.shown = shown;
  if (focused) { const b = box.querySelector(`button[data-night="${CSS.escape(focused)}"]`); if (b) b.focus(); }
}

// stopSell closes a night to sale (on) or reopens it, at once: no stay
// including a closed night is sold; rooms already held or sold stay with
// their guests.
async function stopSell(date, on) {
  const d = detail;
  const v = d && d.view;
  if (!v || d.nightBusy) return;
  const what = t(on ? 'console.stop_sell_night' : 'console.reopen_night', { date });
  d.nightBusy = date;
  renderDetail();
  const res = await call('PATCH', `/api/admin/sales/${enc(v.id)}/nights/${enc(date)}`, { token: admin, body: { stop_sell: on } });
  d.nightBusy = null;
  if (detail !== d) return;
  if (res.status === 200 && res.body && res.body.id === v.id) setView(d, res.body);
  result(what, res);
  renderDetail();
  loadChanges(d);
}

// --- the waiting room's panel -------------------------------------------------
// A sale with a waiting room shows its queue, read every second from
// GET /api/admin/sales/{id}/queue (the dashboard's stream does not carry
// it): joined, waiting, let in and not yet buying, let in and bought,
// lapsed or skipped, the pace, whether it is drawn, sold out or paused,
// and the draw's commitment (and seed, from the start). Its form changes
// the pace (admit_per_second, admission_seconds) and its button pauses or
// resumes admissions (paused), the waiting-room changes a started sale
// takes, through the sale's edit (PATCH); pausing the sale stops both.
function queuePanel() {
  const field = (id, key, props) => [
    el('label', { htmlFor: id, data: { i18n: key }, textContent: t(key) }),
    el('input', { id, type: 'number', inputMode: 'decimal', required: true, ...props })];
  return el('section', { id: 'd-queue', className: 'queue-panel sale-card', hidden: true, 'aria-labelledby': 'wq-title' },
    el('h3', { id: 'wq-title', data: { i18n: 'console.queue' }, textContent: t('console.queue') }),
    el('p', { id: 'wq-state', 'aria-live': 'polite' }),
    el('dl', { id: 'wq-counts' }),
    el('dl', { className: 'draw' },
      el('dt', { data: { i18n: 'console.q_commitment' }, textContent: t('console.q_commitment') }), el('dd', {}, el('code', { id: 'wq-commitment' })),
      el('dt', { data: { i18n: 'console.q_seed' }, textContent: t('console.q_seed') }), el('dd', {}, el('code', { id: 'wq-seed' }))),
    el('p', { id: 'wq-verify', className: 'hint' }),
    el('form', { id: 'wq-pace', className: 'rooms-form', noValidate: true, 'aria-labelledby': 'wq-pace-title', onsubmit: submitPace },
      el('strong', { id: 'wq-pace-title', data: { i18n: 'console.q_pace' }, textContent: t('console.q_pace') }),
      ...field('wq-rate', 'console.q_rate_input', { min: '0', max: '100000', step: 'any' }),
      ...field('wq-admission', 'console.q_admission_input', { min: '10', max: '3600', step: '1', inputMode: 'numeric' }),
      el('button', { type: 'submit', id: 'wq-save', data: { i18n: 'console.q_save' }, textContent: t('console.q_save') })),
    el('p', { id: 'wq-msg', className: 'result', role: 'status', 'aria-live': 'polite' }),
    el('button', { type: 'button', id: 'wq-pause', onclick: togglePauseAdmissions }),
    el('p', { className: 'hint', data: { i18n: 'console.q_pause_hint' }, textContent: t('console.q_pause_hint') }));
}

// loadQueue reads the open sale's queue report; a later call's answer wins.
async function loadQueue(d) {
  if (!d || !admin || !d.view || !d.view.waiting_room) return;
  const seq = d.queueSeq = (d.queueSeq || 0) + 1;
  const res = await call('GET', `/api/admin/sales/${enc(d.id)}/queue`, { token: admin });
  if (detail !== d || seq !== d.queueSeq) return;
  if (res.status === 200) { d.queue = res.body; d.queueError = ''; } else d.queueError = errorMessage(res);
  renderQueue();
}

const rateText = (n) => String(Math.round(n * 100) / 100);

function renderQueue() {
  const d = detail;
  const box = $('d-queue');
  if (!d || !box) return;
  const v = d.view;
  const w = v && v.waiting_room;
  box.hidden = !w;
  if (!w) return;
  // The form shows the sale's pace, unless the operator is typing in it.
  const pace = JSON.stringify(w);
  const typing = ['wq-rate', 'wq-admission'].includes(document.activeElement && document.activeElement.id);
  if (box.dataset.pace !== pace && !typing) {
    $('wq-rate').value = String(w.admit_per_second);
    $('wq-admission').value = String(w.admission_seconds);
    box.dataset.pace = pace;
  }
  const q = d.queue;
  const st = statusOf(v);
  const state = !q ? (d.queueError || t('loading')) : st === 'ended' ? t('status.ended') : st === 'paused' ? t('console.q_paused')
    : w.paused ? t('console.q_adm_paused') : !q.drawn ? t('console.q_before') : q.sold_out ? t('console.q_sold_out') : t('console.q_moving');
  $('wq-state').textContent = `${t('console.q_state')}: ${state}`;
  box.dataset.state = !q ? '' : st === 'paused' ? 'paused' : w.paused ? 'admissions_paused' : !q.drawn ? 'before' : q.sold_out ? 'sold_out' : 'moving';
  const pause = $('wq-pause');
  pause.textContent = t(w.paused ? 'console.q_resume_adm' : 'console.q_pause_adm');
  pause.dataset.paused = String(!!w.paused);
  pause.hidden = st === 'ended';
  if (!q) return;
  const rate = w.admit_per_second ? rateText(q.admit_per_second) : t('console.q_rate_derived', { n: rateText(q.admit_per_second) });
  const figures = [['joined', 'console.q_joined', q.joined], ['waiting', 'console.q_waiting', q.waiting],
    ['admitted', 'console.q_admitted', q.admitted], ['used', 'console.q_used', q.used], ['expired', 'console.q_expired', q.expired]];
  const shown = JSON.stringify([q, rate, document.documentElement.lang]);
  if (box.dataset.shown !== shown) {
    $('wq-counts').replaceChildren(...figures.map(([k, key, n]) => el('div', {}, el('dt', { textContent: t(key) }),
      el('dd', { id: 'wq-' + k, data: { n: String(n) }, textContent: String(n) }))),
    el('div', {}, el('dt', { textContent: t('console.q_rate') }), el('dd', { id: 'wq-rate-now', data: { n: String(q.admit_per_second) }, textContent: rate })));
    $('wq-commitment').textContent = q.commitment;
    $('wq-seed').textContent = q.seed || t('console.q_seed_later');
    $('wq-seed').dataset.seed = q.seed || '';
    $('wq-verify').textContent = t('console.q_verify', { url: `${location.origin}/api/sales/${enc(d.id)}/queue/draw` });
    box.dataset.shown = shown;
  }
}

// submitPace sends a new pace as an edit of the sale's waiting_room (its
// prequeue_minutes as it is: a started sale may change only the pace).
async function submitPace(e) {
  e.preventDefault();
  const v = detail && detail.view;
  if (!v || !v.waiting_room) return;
  const box = $('wq-msg');
  const rateIn = $('wq-rate'), admIn = $('wq-admission');
  const rate = rateIn.value.trim() === '' ? NaN : Number(rateIn.value);
  const adm = Number(admIn.value);
  const bad = [];
  const okRate = rate === 0 || (rate >= 0.1 && rate <= 100000);
  const okAdm = Number.isInteger(adm) && adm >= 10 && adm <= 3600;
  rateIn.setAttribute('aria-invalid', String(!okRate));
  admIn.setAttribute('aria-invalid', String(!okAdm));
  if (!okRate) bad.push(t('v.admit_rate'));
  if (!okAdm) bad.push(t('v.range', { lo: 10, hi: 3600 }));
  if (bad.length) {
    box.className = 'result bad';
    box.textContent = t('console.error', { what: t('console.q_pace'), msg: bad.join(' ') });
    (okRate ? admIn : rateIn).focus();
    return;
  }
  const w = v.waiting_room;
  if (rate === w.admit_per_second && adm === w.admission_seconds) {
    box.className = 'result';
    box.textContent = t('console.q_same');
    return;
  }
  $('wq-save').disabled = true;
  const res = await call('PATCH', `/api/admin/sales/${enc(v.id)}`, { token: admin,
    body: { waiting_room: { prequeue_minutes: w.prequeue_minutes, admit_per_second: rate, admission_seconds: adm, paused: !!w.paused } } });
  $('wq-save').disabled = false;
  if (!detail || detail.id !== v.id) return;
  if (res.status === 200 && res.body && res.body.id === v.id) {
    setView(detail, res.body);
    box.className = 'result ok';
    box.textContent = t('console.q_saved', { n: res.body.revision });
    $('d-queue').dataset.pace = ''; // the form shows the pace as saved
    if (document.activeElement === rateIn || document.activeElement === admIn) $('wq-save').focus();
    renderDetail();
    loadQueue(detail);
    return;
  }
  const code = errorCode(res);
  box.className = 'result bad';
  box.textContent = t('console.error', { what: t('console.q_pace'), msg: code === 'ended' ? t('console.err_ended') : errorMessage(res) });
}

// togglePauseAdmissions pauses or resumes the open sale's admissions
// (waiting_room.paused, an edit a started sale takes): the admitted may
// still buy while nobody new is let in.
async function togglePauseAdmissions() {
  const v = detail && detail.view;
  if (!v || !v.waiting_room) return;
  const w = v.waiting_room;
  const box = $('wq-msg');
  $('wq-pause').disabled = true;
  const res = await call('PATCH', `/api/admin/sales/${enc(v.id)}`, { token: admin, body: { waiting_room: { ...w, paused: !w.paused } } });
  $('wq-pause').disabled = false;
  if (!detail || detail.id !== v.id) return;
  if (res.status === 200 && res.body && res.body.id === v.id) {
    setView(detail, res.body);
    box.className = 'result ok';
    box.textContent = t('console.q_adm_saved', { n: res.body.revision });
    renderDetail();
    loadQueue(detail);
    return;
  }
  box.className = 'result bad';
  box.textContent = t('console.error', { what: t(w.paused ? 'console.q_resume_adm' : 'console.q_pause_adm'), msg: errorMessage(res) });
}

// --- actions ----------------------------------------------------------------
// ask opens the confirmation dialog and resolves true on Confirm; the
// dialog is modal (focus stays in it, Escape cancels) and gives the
// focus back to the button that opened it.
//
// The answer is taken from the button's submit or Escape's cancel, both
// dispatched while the operator acts, never from the dialog's close
// event: that one is queued, and on a loaded machine the close of a
// cancelled question arrived after the next question had opened and
// answered it "cancel", so a confirmed deletion did nothing (issue 20).
let answer = null;
function ask(text) {
  const box = $('d-msg');
  if (box) { box.textContent = ''; box.className = 'result'; } // the last action's outcome is not this one's
  $('confirm-text').textContent = text;
  settle(false); // a question still open is not this one's
  return new Promise((resolve) => {
    answer = resolve;
    $('confirm').showModal();
    $('confirm-cancel').focus();
  });
}

function settle(ok) {
  const resolve = answer;
  answer = null;
  if (resolve) resolve(ok);
}

// result shows an action's outcome on the dashboard: the API's message on
// failure, in words for the codes an operator meets.
function result(what, res, vars = {}) {
  const box = $('d-msg');
  if (!box) return;
  box.className = 'result ' + (res.status === 200 ? 'ok' : 'bad');
  if (res.status === 200) { box.textContent = t('console.done', { what }); return; }
  const code = errorCode(res);
  const known = { stock_in_use: 'console.stock_in_use', ended: 'console.err_ended', paused: 'console.err_paused' };
  let msg = known[code] ? t(known[code], vars) : errorMessage(res);
  if ((res.status === 404 && /no route/.test(errorMessage(res))) || res.status === 405) msg = t('console.not_on_server');
  box.textContent = t('console.error', { what, msg });
}

async function lifecycle(kind) {
  const v = detail && detail.view;
  if (!v) return;
  const what = t('console.' + kind);
  if (!(await ask(t('console.ask_' + kind, { title: v.title })))) return;
  const res = await call('POST', `/api/admin/sales/${enc(v.id)}/${kind}`, { token: admin });
  if (res.status === 200 && res.body && res.body.id === v.id) setView(detail, res.body);
  result(what, res);
  renderDetail();
  loadChanges(detail);
  loadQueue(detail);
  loadList(false);
}

async function stock(sign) {
  const v = detail && detail.view;
  if (!v) return;
  const date = $('d-night').value;
  const n = parseInt($('d-delta').value, 10);
  const what = t(sign > 0 ? 'console.add_rooms' : 'console.remove_rooms');
  if (!Number.isInteger(n) || n < 1 || n > 1e6 || String(n) !== $('d-delta').value.trim()) {
    $('d-delta').setAttribute('aria-invalid', 'true');
    result(what, { status: 400, body: { error: { code: 'invalid', message: t('v.range', { lo: 1, hi: 1000000 }) } } });
    $('d-delta').focus();
    return;
  }
  $('d-delta').removeAttribute('aria-invalid');
  if (!(await ask(t(sign > 0 ? 'console.ask_add' : 'console.ask_remove', { n, date, title: v.title })))) return;
  const res = await call('POST', `/api/admin/sales/${enc(v.id)}/nights/${enc(date)}/stock`, { token: admin, body: { delta: sign * n } });
  if (res.status === 200 && res.body && res.body.id === v.id) setView(detail, res.body);
  // Refused, it says how many could be taken back: "take back 50" of a
  // 5-room night only said those rooms were held or sold.
  const night = (detail.view || v).nights.find((x) => x.date === date);
  result(what, res, { n: night ? night.available : 0, date });
  renderDetail();
  loadChanges(detail);
}

async function act(what, method, path, body) {
  const res = await call(method, path, { token: admin, body });
  if (path.endsWith('/audit/repair') && res.status === 200 && detail) detail.audit = res.body;
  if (detail && path.startsWith('/api/admin/sales/')) result(what, res);
  else say(res.status === 200 ? 'console.done' : 'console.error', { what, msg: errorMessage(res) });
  refresh();
}

// --- the change log -----------------------------------------------------------
// loadChanges reads the open sale's change log (the API's is oldest
// first; the page shows the newest first). It runs when the dashboard
// opens, after each action, and whenever the sale's revision moves (an
// action from another console too); a later call's answer wins.
async function loadChanges(d) {
  if (!d || !admin) return;
  d.changesRev = d.view ? d.view.revision : null;
  const seq = d.changesSeq = (d.changesSeq || 0) + 1;
  const res = await call('GET', `/api/admin/sales/${enc(d.id)}/changes`, { token: admin });
  if (detail !== d || seq !== d.changesSeq) return;
  if (res.status === 200) d.changes = (res.body.changes || []).slice().reverse();
  else d.changesError = res.status === 404 && /no route/.test(errorMessage(res)) ? t('console.not_on_server') : errorMessage(res);
  renderChanges();
}

function renderChanges() {
  const d = detail;
  if (!d || !$('d-changes')) return;
  const head = el('thead', {}, el('tr', {}, ...['console.when', 'console.kind', 'console.revision_col', 'console.detail']
    .map((k) => el('th', { scope: 'col', className: k === 'console.revision_col' ? 'num' : '', textContent: t(k) }))));
  const cs = d.changes || [];
  const rows = cs.map((c) => el('tr', { data: { kind: c.kind, revision: String(c.revision) } },
    el('td', {}, el('time', { dateTime: c.at, textContent: when(c.at) })),
    el('td', { textContent: t('change.' + c.kind) }),
    el('td', { className: 'num', textContent: String(c.revision) }),
    el('td', { textContent: c.detail })));
  if (!rows.length) rows.push(el('tr', {}, el('td', { colSpan: 4, textContent: d.changes ? t('console.no_changes') : (d.changesError || t('loading')) })));
  $('d-changes').replaceChildren(el('caption', { textContent: t('console.changes_caption') }), head, el('tbody', {}, ...rows));
}

// --- orders -------------------------------------------------------------------
// loadOrders reads the first page of the open sale's orders with the
// chosen status (or, with more, the page after the last one shown).
async function loadOrders(d, more) {
  if (!d || !admin) return;
  const o = d.orders;
  const q = new URLSearchParams({ limit: '20' });
  if (o.status) q.set('status', o.status);
  if (more && o.next) q.set('cursor', o.next);
  const seq = o.seq = (o.seq || 0) + 1;
  const res = await call('GET', `/api/admin/sales/${enc(d.id)}/orders?${q}`, { token: admin });
  if (detail !== d || seq !== o.seq) return;
  const box = $('o-msg');
  if (res.status !== 200) {
    box.className = 'result bad';
    box.textContent = t('console.error', { what: t('console.orders'), msg: res.status === 404 && /no route/.test(errorMessage(res)) ? t('console.not_on_server') : errorMessage(res) });
    return;
  }
  o.list = more ? o.list.concat(res.body.orders || []) : (res.body.orders || []);
  o.next = res.body.next_cursor || null;
  o.loaded = true;
  renderOrders();
  box.className = 'result';
  box.textContent = t(o.next ? 'console.orders_more' : 'console.orders_all', { n: o.list.length });
  if (more && !o.next && document.activeElement === document.body) $('o-wrap').focus(); // "more" went away under the focus
}

function renderOrders() {
  const d = detail;
  if (!d || !$('d-orders')) return;
  const o = d.orders;
  $('o-more').hidden = !o.next;
  const head = el('thead', {}, el('tr', {}, ...['console.order', 'console.guest', 'console.status', 'console.stay', 'console.amount', 'console.hold_until']
    .map((k) => el('th', { scope: 'col', className: k === 'console.amount' ? 'num' : '', textContent: t(k) }))));
  // Each cell carries its column's name: on a phone the rows stack into
  // cards that label their fields (style.css), instead of a table wider
  // than the screen.
  const label = (k) => ({ label: t(k) });
  const rows = o.list.map((x) => el('tr', { data: { order: x.order_id, status: x.status } },
    el('td', { data: label('console.order') }, el('code', { textContent: x.order_id })),
    el('td', { data: label('console.guest'), textContent: x.user_id }),
    el('td', { data: label('console.status'), textContent: t('order.' + x.status) + (x.failure_reason ? ` (${x.failure_reason})` : '') }),
    el('td', { data: label('console.stay'), textContent: x.slot ? t('console.slot_order', { date: x.slot.slice(0, 10), time: x.slot.slice(11), rooms: x.rooms })
      : t('console.stay_of', { date: x.check_in, nights: x.nights, rooms: x.rooms }) }),
    el('td', { data: label('console.amount'), className: 'num', textContent: money(x.amount, x.currency) }),
    el('td', { data: label('console.hold_until'), textContent: x.status === 'paid' ? (x.payment_ref || '') : (x.status === 'held' ? when(x.hold_expires_at) : '–') })));
  if (!rows.length) rows.push(el('tr', {}, el('td', { colSpan: 6, textContent: o.loaded ? t('console.no_orders') : t('loading') })));
  $('d-orders').replaceChildren(el('caption', { textContent: t('console.orders_caption') }), head, el('tbody', {}, ...rows));
}

// csvRecords counts a CSV's records, a quoted field's line breaks not
// included.
function csvRecords(text) {
  let n = 0, quoted = false;
  for (const ch of text) {
    if (ch === '"') quoted = !quoted;
    else if (ch === '\n' && !quoted) n++;
  }
  return n;
}

// downloadCSV fetches every order of the chosen status as CSV (Accept:
// text/csv, the admin token in the Authorization header: a link could
// not carry it, and a token in a URL ends up in logs) and hands the
// browser a Blob to save.
async function downloadCSV() {
  const d = detail;
  if (!d) return;
  const box = $('o-msg');
  const what = t('console.csv');
  box.className = 'result';
  box.textContent = t('console.csv_busy');
  const q = d.orders.status ? '?' + new URLSearchParams({ status: d.orders.status }) : '';
  let text;
  try {
    const r = await fetch(`/api/admin/sales/${enc(d.id)}/orders${q}`, { headers: { Authorization: 'Bearer ' + admin, Accept: 'text/csv' }, cache: 'no-store' });
    if (!r.ok) {
      const body = await r.json().catch(() => null);
      box.className = 'result bad';
      box.textContent = t('console.error', { what, msg: body && body.error ? body.error.message : 'HTTP ' + r.status });
      return;
    }
    text = await r.text();
  } catch {
    box.className = 'result bad';
    box.textContent = t('console.error', { what, msg: t('console.network') });
    return;
  }
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv;charset=utf-8' }));
  const a = el('a', { href: url, download: `orders-${d.id}${d.orders.status ? '-' + d.orders.status : ''}.csv`, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  const cut = text !== '' && !text.endsWith('\n'); // the server cut the stream short
  box.className = 'result ' + (cut ? 'bad' : 'ok');
  box.textContent = t(cut ? 'console.csv_cut' : 'console.csv_done', { n: Math.max(0, csvRecords(text) - 1) });
}

// --- deleting a test sale -----------------------------------------------------
async function deleteSale() {
  const v = detail && detail.view;
  if (!v || !v.test) return; // a real sale is 409: never offered
  if (!(await ask(t('console.ask_delete', { title: v.title })))) return;
  const res = await call('DELETE', `/api/admin/sales/${enc(v.id)}`, { token: admin });
  if (res.status !== 204) { result(t('console.delete'), res); return; }
  list.sales = list.sales.filter((s) => s.id !== v.id);
  closeDetail();
  $('list-title').focus();
  say('console.deleted', { title: v.title });
  loadList(false);
}

// --- editing a sale -----------------------------------------------------------
// editing is the open edit: the sale's ID, the body its prefilled form
// reads as (only what differs from it is sent), and whether it started.
let editing = null;
// KEEP are the inputs of the fields a started sale may change: what the
// operator typed there survives a refill.
const KEEP = form.EDITABLE.map((k) => form.inputOf(k).id);

function setFormMode(edit) {
  $('create-title').dataset.i18n = edit ? 'edit.title' : 'console.new_sale';
  $('create-submit').dataset.i18n = edit ? 'edit.save' : 'f.create';
  for (const id of ['create-title', 'create-submit']) $(id).textContent = t($(id).dataset.i18n);
}

function resetForm() {
  $('create').reset();
  $('waiting-room').open = false;
  $('nights-rows').replaceChildren();
  $('f-kind').disabled = false;
  form.setKind('stay');
  form.lock(false);
  form.clear();
}

// prefill puts the sale in the form, locks what it may no longer change,
// and takes its baseline; keep names inputs whose typed value stays.
function prefill(v, keep = []) {
  const typed = keep.map((id) => [id, $(id).value]);
  form.fill(v);
  editing.started = Date.parse(v.starts_at) <= Date.parse(v.server_time);
  editing.base = form.read({ full: true }).body;
  for (const [id, x] of typed) $(id).value = x;
  form.lock(editing.started);
  priceHints();
}

function openEdit() {
  const v = detail && detail.view;
  if (!v) return;
  resetForm();
  setFormMode(true);
  $('new').setAttribute('aria-expanded', 'false');
  $('d-edit-slot').append($('create'));
  editing = { id: v.id };
  prefill(v);
  $('f-kind').disabled = true; // a sale's kind is what it sold: no edit changes it
  $('create').hidden = false;
  $('d-edit').setAttribute('aria-expanded', 'true');
  $('f-title').focus();
}

// closeForm ends an edit: the form goes back to creating sales, in its
// place under the list.
function closeForm(focus = true) {
  if (!editing) return;
  editing = null;
  $('create').hidden = true;
  resetForm();
  setFormMode(false);
  $('detail').before($('create'));
  const b = $('d-edit');
  if (b) { b.setAttribute('aria-expanded', 'false'); if (focus) b.focus(); }
}

// submitEdit sends what changed. A 409 already_started (the sale started
// while the form was open) refills the form from the sale, locked, with
// the error at the field the server named.
async function submitEdit(e) {
  e.preventDefault();
  const ed = editing;
  const { body, errors } = form.read({ full: true });
  if (errors.length) { form.show(errors, 'edit.summary'); return; }
  const patch = {};
  for (const [k, x] of Object.entries(body)) if (JSON.stringify(x) !== JSON.stringify(ed.base[k])) patch[k] = x;
  if (!Object.keys(patch).length) { form.show([['form', t('edit.nothing')]], 'edit.summary'); return; }
  const btn = $('create-submit');
  btn.disabled = true;
  const res = await call('PATCH', `/api/admin/sales/${enc(ed.id)}`, { token: admin, body: patch });
  btn.disabled = false;
  if (editing !== ed) return;
  if (res.status === 200 && res.body && res.body.id === ed.id) {
    if (detail && detail.id === ed.id) setView(detail, res.body);
    closeForm();
    const box = $('d-msg');
    box.className = 'result ok';
    box.textContent = t('edit.saved', { n: res.body.revision });
    renderDetail();
    loadChanges(detail);
    return;
  }
  const msg = errorMessage(res);
  const code = errorCode(res);
  const named = msg.split(' ')[0];
  const field = form.fieldOfMessage(msg) || { eligibility: 'eligibility.min_tier', challenge: 'challenge.difficulty', limits: 'limits.per_sale', waiting_room: 'waiting_room.admission_seconds' }[named] || '';
  if (res.status === 409 && code === 'already_started') {
    const fresh = await call('GET', `/api/admin/sales/${enc(ed.id)}`, { token: admin });
    if (editing !== ed) return;
    if (fresh.status === 200) { if (detail && detail.id === ed.id) setView(detail, fresh.body); prefill(fresh.body, KEEP); }
    form.show([[field || 'form', t('edit.already_started', { field: named })]], 'edit.summary');
    return;
  }
  const known = { ended: 'console.err_ended' };
  form.show([[field || 'form', known[code] ? t(known[code]) : t('v.server', { msg })]], 'edit.summary');
}

// --- creating a sale --------------------------------------------------------
function showCreate(show) {
  if (editing) closeForm(false);
  $('create').hidden = !show;
  $('new').setAttribute('aria-expanded', String(show));
  if (!show) { $('new').focus(); return; }
  if (!$('nights-rows').children.length) {
    const tomorrow = new Date(Date.now() + 86400e3).toISOString().slice(0, 10);
    form.addNight(tomorrow, 5);
    const start = new Date(Math.ceil((Date.now() + 10 * 60e3) / 60e3) * 60e3);
    $('f-starts_at').value = form.localValue(start);
    $('f-ends_at').value = form.localValue(new Date(start.getTime() + 86400e3));
    if (!$('f-time_zone').value) $('f-time_zone').value = form.browserZone;
  }
  form.clear();
  priceHints();
  $('f-title').focus();
}

function priceHints() {
  const cur = $('f-currency').value.trim().toUpperCase();
  for (const k of ['price', 'original_price']) {
    const v = parseInt($('f-' + k).value, 10);
    $('h-' + k).textContent = Number.isInteger(v) && /^[A-Z]{3}$/.test(cur) ? '= ' + money(v, cur) : '';
  }
  const { tiers } = form.readTiers($('f-price_tiers').value, NaN, Infinity);
  $('h-price_tiers').textContent = tiers && tiers.length && /^[A-Z]{3}$/.test(cur)
    ? tiers.map((x) => t('tier', { n: x.rooms, price: money(x.price, cur) })).join(' · ') : '';
}

async function submitCreate(e) {
  e.preventDefault();
  const { body, errors } = form.read();
  if (errors.length) { form.show(errors); return; }
  const btn = $('create').querySelector('button[type="submit"]');
  btn.disabled = true;
  const res = await call('POST', '/api/admin/sales', { token: admin, body });
  btn.disabled = false;
  if (res.status === 201) {
    form.clear();
    $('create').reset();
    $('nights-rows').replaceChildren();
    form.setKind('stay');
    showCreate(false);
    say('console.created', { title: res.body.title });
    await loadList(false);
    open(res.body.id);
    return;
  }
  const msg = errorMessage(res);
  const field = res.status === 400 ? form.fieldOfMessage(msg) : '';
  form.show([[field || 'form', t('v.server', { msg })]]);
}

// --- start ------------------------------------------------------------------
setupSwitch(() => {
  renderInstance();
  list.drawn = '';
  renderList();
  if (detail) { apply(); renderDetail(); renderChanges(); renderOrders(); }
  form.labelRemoveButtons();
  priceHints();
});
$('signin').addEventListener('submit', (e) => { e.preventDefault(); signIn($('token').value.trim()); });
$('signout').addEventListener('click', signOut);
$('confirm').querySelector('form').addEventListener('submit', (e) => settle(!!e.submitter && e.submitter.value === 'ok'));
$('confirm').addEventListener('cancel', () => settle(false));
for (const btn of document.querySelectorAll('[data-force]')) {
  btn.addEventListener('click', () => act(t('console.breaker') + ' ' + btn.dataset.force, 'POST', '/api/admin/breaker', { force: btn.dataset.force }));
}
$('filter').addEventListener('change', () => { list.filter = $('filter').value; list.next = null; list.pages = 1; loadList(false); });
$('more').addEventListener('click', () => loadList(true));
$('new').addEventListener('click', () => showCreate(!!editing || $('create').hidden));
$('create-cancel').addEventListener('click', () => (editing ? closeForm() : showCreate(false)));
$('add-night').addEventListener('click', () => {
  const rows = $('nights-rows').children;
  if (form.timed()) { addSlot(rows); return; }
  const last = rows.length ? rows[rows.length - 1].querySelector('[data-part="date"]').value : '';
  const next = last ? new Date(Date.parse(last + 'T00:00:00Z') + 86400e3).toISOString().slice(0, 10) : '';
  const stockOf = rows.length ? rows[rows.length - 1].querySelector('[data-part="stock"]').value : '5';
  form.addNight(next, stockOf).querySelector('input').focus();
});
$('create').addEventListener('submit', (e) => (editing ? submitEdit(e) : submitCreate(e)));
$('f-kind').addEventListener('change', () => {
  form.setKind(form.kind());
  // A new sale's first row gets a start, so switching to slots leaves a
  // slot to edit rather than an error.
  const first = $('nights-rows').querySelector('[data-part="time"]');
  if (form.timed() && first && !first.value && $('nights-rows').children.length === 1) first.value = form.kind() === 'seats' ? '09:00' : '19:00';
});

// addSlot adds a slot after the last: the same day, starting when the
// last ends (an hour on, when it names no length), with its places and
// length; past midnight, the next day at the same start as the first.
function addSlot(rows) {
  const last = rows.length ? rows[rows.length - 1] : null;
  const part = (k) => (last ? last.querySelector(`[data-part="${k}"]`).value : '');
  let date = part('date'), time = part('time');
  const minutes = part('minutes');
  if (date && /^\d{2}:\d{2}$/.test(time)) {
    const at = Number(time.slice(0, 2)) * 60 + Number(time.slice(3)) + (parseInt(minutes, 10) || 60);
    if (at < 1440) time = `${String(Math.floor(at / 60)).padStart(2, '0')}:${String(at % 60).padStart(2, '0')}`;
    else {
      date = new Date(Date.parse(date + 'T00:00:00Z') + 86400e3).toISOString().slice(0, 10);
      time = rows[0].querySelector('[data-part="time"]').value || time;
    }
  }
  form.addNight(date, part('stock') || '5', { time, minutes: parseInt(minutes, 10) || 0, vehicles: parseInt(part('vehicles'), 10) || 1 }).querySelector('input').focus();
}
for (const id of ['f-price', 'f-original_price', 'f-currency', 'f-price_tiers']) $(id).addEventListener('input', priceHints);
if (admin) signIn(admin);
