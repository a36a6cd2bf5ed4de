// The operator console: GET /console. The admin token is kept in this
// tab's sessionStorage only and sent in the Authorization header, never in
// a URL. It reads the admin endpoints every 2 s (the audit every 10 s) and
// offers the actions the API has today: force the breaker, preheat a
// sale, repair an audit. Pause, add rooms and close do not exist yet.
import { t, setupSwitch } from './i18n.js';
import { call, errorMessage } from './api.js';

const KEY = 'flashsale.admin';
const $ = (x) => document.getElementById(x);
let admin = null;
try { admin = sessionStorage.getItem(KEY); } catch { /* storage off: sign in each time */ }
let timer = null;
let state = { ready: null, breaker: null, sales: [], views: {}, audits: {}, at: null };
let tick = 0;

const el = (tag, props = {}, ...kids) => {
  const e = document.createElement(tag);
  Object.assign(e, props);
  e.append(...kids);
  return e;
};

function say(key, vars) { $('msg').textContent = t(key, vars); }

async function signIn(tok) {
  const res = await call('GET', '/api/admin/breaker', { token: tok });
  if (res.status === 401 || res.status === 403) { say('console.bad_token'); return false; }
  admin = tok;
  try { sessionStorage.setItem(KEY, tok); } catch { /* this page only */ }
  $('signin').hidden = true;
  $('dash').hidden = false;
  $('signout').hidden = false;
  $('msg').textContent = '';
  refresh();
  timer = setInterval(refresh, 2000);
  return true;
}

function signOut() {
  admin = null;
  try { sessionStorage.removeItem(KEY); } catch { /* nothing kept */ }
  clearInterval(timer);
  $('dash').hidden = true;
  $('signout').hidden = true;
  $('signin').hidden = false;
  $('token').value = '';
}

async function refresh() {
  const withAudit = tick++ % 5 === 0;
  const [ready, brk, list] = await Promise.all([
    call('GET', '/readyz'), call('GET', '/api/admin/breaker', { token: admin }), call('GET', '/api/sales'),
  ]);
  if (brk.status === 401) { signOut(); say('console.bad_token'); return; }
  state.ready = ready.body;
  state.breaker = brk.status === 200 ? brk.body : null;
  state.sales = list.status === 200 ? list.body.sales : state.sales;
  await Promise.all(state.sales.map(async (s) => {
    const v = await call('GET', `/api/admin/sales/${encodeURIComponent(s.id)}`, { token: admin });
    if (v.status === 200) state.views[s.id] = v.body;
    if (withAudit || !state.audits[s.id]) {
      const a = await call('GET', `/api/admin/sales/${encodeURIComponent(s.id)}/audit`, { token: admin });
      if (a.status === 200) state.audits[s.id] = a.body;
    }
  }));
  state.at = new Date();
  render();
}

async function act(what, method, path, body) {
  const res = await call(method, path, { token: admin, body });
  if (res.status === 200) say('console.done', { what });
  else say('console.error', { what, msg: errorMessage(res) });
  if (path.endsWith('/repair') && res.status === 200) state.audits[path.split('/')[4]] = res.body;
  refresh();
}

function render() {
  const r = state.ready || {};
  const b = state.breaker;
  $('instance').replaceChildren(
    el('strong', { textContent: r.ready ? t('console.ready') : t('console.not_ready') }),
    ` · ${t('console.engine')}: ${r.engine || '?'} · ${t('console.database')}: ${r.database || '?'}`,
    r.selling ? ` · ${t('console.selling')}: ${r.selling}` : '',
    ` · ${t('console.breaker')}: ${b ? (b.state + (b.forced && b.forced !== 'auto' ? ' (' + b.forced + ')' : '')) : t('console.no_breaker')}`,
    el('br'), el('small', { textContent: state.at ? t('console.updated', { t: state.at.toLocaleTimeString() }) : '' }),
  );
  for (const btn of document.querySelectorAll('[data-force]')) btn.disabled = !b;

  const box = $('sales');
  if (!state.sales.length) { box.replaceChildren(el('p', { textContent: t('console.no_sales') })); return; }
  box.replaceChildren(...state.sales.map((s) => {
    const v = state.views[s.id] || { nights: [], status: s.status };
    const a = state.audits[s.id];
    const head = el('tr', {}, ...['console.date', 'console.stock', 'console.available', 'console.held', 'console.sold']
      .map((k) => el('th', { scope: 'col', textContent: t(k) })));
    const total = { stock: 0, available: 0, held: 0, sold: 0 };
    const rows = v.nights.map((n) => {
      for (const k in total) total[k] += n[k];
      return el('tr', {}, el('th', { scope: 'row', textContent: n.date }),
        ...['stock', 'available', 'held', 'sold'].map((k) => el('td', { textContent: String(n[k]) })));
    });
    rows.push(el('tr', { className: 'total' }, el('th', { scope: 'row', textContent: 'Σ' }),
      ...['stock', 'available', 'held', 'sold'].map((k) => el('td', { textContent: String(total[k]) }))));
    const audit = a ? `${t('console.audit')}: ${a.balanced ? t('console.balanced') : t('console.unbalanced')}` +
      (a.findings && a.findings.length ? ' · ' + t('console.findings', { n: a.findings.length }) : '') : '';
    const id = encodeURIComponent(s.id);
    return el('section', { className: 'sale-card' },
      el('h2', { textContent: `${s.title} · ${v.status}` }),
      el('p', { textContent: `${s.hotel} · ${s.room_type} · ${s.id}` }),
      el('table', {}, el('thead', {}, head), el('tbody', {}, ...rows)),
      el('p', { className: a && !a.balanced ? 'bad' : '', textContent: audit }),
      el('p', { className: 'actions' },
        el('button', { type: 'button', textContent: t('console.preheat'), onclick: () => act(t('console.preheat'), 'POST', `/api/admin/sales/${id}/preheat`) }),
        ' ',
        el('button', { type: 'button', textContent: t('console.repair'), onclick: () => act(t('console.repair'), 'POST', `/api/admin/sales/${id}/audit/repair`) })));
  }));
}

setupSwitch(render);
$('signin').addEventListener('submit', (e) => { e.preventDefault(); signIn($('token').value.trim()); });
$('signout').addEventListener('click', signOut);
for (const btn of document.querySelectorAll('[data-force]')) {
  btn.addEventListener('click', () => act(t('console.breaker') + ' ' + btn.dataset.force, 'POST', '/api/admin/breaker', { force: btn.dataset.force }));
}
if (admin) signIn(admin);
