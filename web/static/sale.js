// The guest sale page: GET /sales/{id}. It reads the sale once, then the
// rooms left over Server-Sent Events (polling with backoff when those
// fail), counts down by the server's clock, and buys: challenge (solved in
// a Web Worker) -> token -> purchase -> the order until it is final. On a
// sale with a waiting room the guest joins its queue first (the proof of
// work, if the sale asks for one, is solved at the join), follows their
// place on its stream and may buy once admitted.
import { t, count, setupSwitch, money, clock, lang } from './i18n.js';
import { call, errorCode, errorMessage, ServerClock, sleep, stream } from './api.js';

const id = decodeURIComponent(location.pathname.split('/')[2] || '');
const eid = encodeURIComponent(id);
const demo = document.body.dataset.demo === 'true';
const $ = (x) => document.getElementById(x);
const clk = new ServerClock();
const TOKEN_KEY = 'flashsale.token';
const ORDER_KEY = 'flashsale.order.' + id;

let sale = null;       // the public view
let rooms = [];        // [{date, available}], the latest pushed
let saleStatus = '';   // the latest pushed status
let phase = '';        // what the guest's attempt came to; '' follows the sale
let vars = {};
let busy = false;      // an attempt is under way: the button stays disabled
let blockedUntil = 0;  // performance.now() before which buying waits (Retry-After)
let order = null;      // {order_id, status, hold_expires_at, ...}
let token = null;      // the user's JWT
let feed = { live: true, every: 0 };

const store = {
  get(k) { try { return sessionStorage.getItem(k); } catch { return null; } },
  set(k, v) { try { v == null ? sessionStorage.removeItem(k) : sessionStorage.setItem(k, v); } catch { /* storage off */ } },
};

// --- the user's token -------------------------------------------------------
// Outside demo mode the embedding platform hands the page its user's JWT,
// either in sessionStorage under flashsale.token (a host page on the same
// origin) or by window.postMessage({type: 'flashsale.token', token}) from
// the parent frame, when the parent's origin is this page's or one the
// server was told to trust (FLASHSALE_FRAME_ORIGINS; its CSP lets only
// those frame the page). Never in a URL, so never in a log.
const frameOrigins = [location.origin, ...(document.body.dataset.frameOrigins || '').split(' ').filter(Boolean)];
token = store.get(TOKEN_KEY);
window.addEventListener('message', (e) => {
  if (window.parent === window || e.source !== window.parent || !frameOrigins.includes(e.origin)) return;
  const d = e.data;
  if (d && d.type === 'flashsale.token' && typeof d.token === 'string' && d.token.length > 0 && d.token.length < 8192) {
    const first = !token;
    token = d.token;
    store.set(TOKEN_KEY, token);
    if (phase === 'no_token') phase = '';
    if (first && sale) startQueue(); // the guest's place, now that the page knows who they are
    render();
  }
});
// tellParent posts msg to the framing page, if its origin is one the page
// trusts (location.ancestorOrigins names it, or the referrer where the
// browser has no ancestorOrigins; the CSP let only those frame the page,
// this is for browsers without frame-ancestors): the state names an
// order, which a stranger's page has no business reading.
function tellParent(msg) {
  if (window.parent === window) return;
  let parent = location.ancestorOrigins ? location.ancestorOrigins[0] : '';
  if (!parent && document.referrer) { try { parent = new URL(document.referrer).origin; } catch { /* none */ } }
  if (parent && frameOrigins.includes(parent)) window.parent.postMessage(msg, parent);
}
tellParent({ type: 'flashsale.ready', sale_id: id });

async function demoLogin() {
  let user = store.get('flashsale.demo_user');
  if (!user) {
    user = 'guest-' + crypto.randomUUID().slice(0, 8);
    store.set('flashsale.demo_user', user);
  }
  const res = await call('POST', '/api/demo/login', { body: { user_id: user, tier: 'gold' } });
  if (res.status === 200 && res.body && res.body.token) {
    token = res.body.token;
    store.set(TOKEN_KEY, token);
    $('who').textContent = t('signed_in', { user });
    $('who').dataset.user = user;
  }
}

// --- the stay ---------------------------------------------------------------
const DAY = 86400000;
const dayOf = (d) => Date.parse(d + 'T00:00:00Z');

function stay() {
  const checkIn = $('checkin').value || (rooms[0] && rooms[0].date);
  const n = parseInt($('nights').value || '1', 10);
  const r = parseInt($('rooms').value || '1', 10);
  return { checkIn, nights: n, rooms: r };
}

// unitPrice is the per-room-night price of rooms rooms: the tier with the
// most rooms at or below it, else the sale's price (Sale.UnitPrice).
function unitPrice(rooms) {
  let p = sale.price;
  for (const tr of sale.price_tiers || []) if (rooms >= tr.rooms) p = tr.price;
  return p;
}

// fillRooms offers 1 to the sale's per-guest limit.
function fillRooms() {
  const sel = $('rooms');
  const max = Math.max(1, Math.min(sale.per_user_limit || 1, 1000));
  if (sel.options.length === max) return;
  const keep = sel.value;
  sel.replaceChildren(...Array.from({ length: max }, (_, i) => new Option(String(i + 1), String(i + 1))));
  if (keep && parseInt(keep, 10) <= max) sel.value = keep;
}

// stayLeft is the rooms left for the chosen stay: its scarcest night.
function stayLeft() {
  const s = stay();
  const start = rooms.findIndex((r) => r.date === s.checkIn);
  if (start < 0) return 0;
  let left = Infinity;
  for (let i = 0; i < s.nights; i++) {
    const r = rooms[start + i];
    if (!r || dayOf(r.date) !== dayOf(s.checkIn) + i * DAY) return 0;
    left = Math.min(left, r.available);
  }
  return left === Infinity ? 0 : left;
}

// day formats a night's date ("Thu, Dec 24"), one way for the check-in
// menu, the rooms left and the order: the list once spoke ISO dates while
// the menu beside it said "Thu, Dec 24".
let dayFmt = null, dayLang = '';
function day(date) {
  if (dayLang !== lang) {
    dayFmt = new Intl.DateTimeFormat(lang, { weekday: 'short', month: 'short', day: 'numeric', timeZone: 'UTC' });
    dayLang = lang;
  }
  return dayFmt.format(dayOf(date));
}

// --- the stay rules ---------------------------------------------------------
// A night may carry the hotel's stay rules (issue 25): min_stay and
// max_stay bind the stays arriving on it, closed_to_arrival and
// closed_to_departure close it to arriving and to departing on its date,
// stop_sell closes it. The menus offer only the stays they allow, judged
// as the server judges a purchase (flashsale's checkStay, stay.go): a
// purchase the page let through anyway (rules changed since it read
// them) is refused 409 with the rule's code.
const STAY_RULES = ['stop_sell', 'closed_to_arrival', 'min_stay', 'max_stay', 'closed_to_departure'];

// stayRefusal is the rule a stay of n nights from night index first
// breaks, in checkStay's order, or '' when every rule allows it.
function stayRefusal(first, n) {
  if (first < 0 || first >= rooms.length) return '';
  for (let i = first; i < first + n && i < rooms.length; i++) if (rooms[i].stop_sell) return 'stop_sell';
  const a = rooms[first];
  if (a.closed_to_arrival) return 'closed_to_arrival';
  if (a.min_stay > 0 && n < a.min_stay) return 'min_stay';
  if (a.max_stay > 0 && n > a.max_stay) return 'max_stay';
  const d = rooms[first + n];
  if (d && d.closed_to_departure) return 'closed_to_departure';
  return '';
}

// span is the most nights a stay from night index first can have: the
// nights after it that follow on in date.
function span(first) {
  let max = 0;
  while (first >= 0 && rooms[first + max] && dayOf(rooms[first + max].date) === dayOf(rooms[first].date) + max * DAY) max++;
  return max;
}

// lengths are the numbers of nights the rules allow from night index first.
function lengths(first) {
  const out = [];
  for (let n = 1; n <= span(first); n++) if (!stayRefusal(first, n)) out.push(n);
  return out;
}

// anyRule reports whether some night carries a rule.
const anyRule = () => rooms.some((r) => r.min_stay > 0 || r.max_stay > 0 || r.closed_to_arrival || r.closed_to_departure || r.stop_sell);

// rulesShown is what the menus were last drawn from: the dates and rules.
let rulesShown = '';
const rulesKey = () => JSON.stringify(rooms.map((r) => [r.date, r.min_stay || 0, r.max_stay || 0, !!r.closed_to_arrival, !!r.closed_to_departure, !!r.stop_sell]));

// fillStay draws the menus: the check-in nights from which the rules allow
// some stay, and for the chosen one the lengths they allow. The guest's
// choice stays while it is still offered.
function fillStay() {
  const ci = $('checkin'), nn = $('nights');
  rulesShown = rulesKey();
  const keep = ci.value;
  const open = rooms.map((r, i) => [r, lengths(i)]).filter(([, ls]) => ls.length);
  ci.replaceChildren(...open.map(([r]) => new Option(day(r.date), r.date)));
  if (keep && open.some(([r]) => r.date === keep)) ci.value = keep;
  const chosen = open.find(([r]) => r.date === ci.value);
  const ls = chosen ? chosen[1] : [];
  const keepN = nn.value;
  nn.replaceChildren(...ls.map((n) => new Option(String(n), String(n))));
  if (keepN && ls.includes(parseInt(keepN, 10))) nn.value = keepN;
  const note = !rooms.length ? '' : !open.length ? t('stay.none') : anyRule() ? t('stay.rules') : '';
  const el = $('stay-note');
  if (el.textContent !== note) el.textContent = note;
  el.hidden = !note;
}

// noStay reports whether the rules allow no stay at all.
const noStay = () => !isSlot() && rooms.length > 0 && $('checkin').options.length === 0;

// --- the slots ---------------------------------------------------------------
// A sale of kind slot (issue 25) sells time slots of a day at a venue: a
// restaurant's services, a spa's appointments. Its units ("nights") are
// each a date, a start and maybe a length; the guest picks a day, a slot
// of it and a quantity (covers, places). Times are the venue's wall
// clock in the sale's time_zone, shown as the server sends them and
// never converted to the browser's zone: 19:00 in Europe/Paris is 19:00
// on a phone set to Shanghai.
//
// A sale of kind seats (issue 25) sells seats on departures (an airport
// shuttle): its units are vehicles, a departure's one after another with
// the same date and time. The page reuses the slots' day, time and
// quantity: a departure is one choice, its places the most seats left in
// any one vehicle, since the server takes a group's seats from one
// vehicle and never splits it.
const isSlot = () => !!sale && (sale.kind === 'slot' || sale.kind === 'seats');
const isSeats = () => !!sale && sale.kind === 'seats';
const slotName = (r) => r.date + 'T' + r.time;

// wordOf is a slot sale's key for what a seats sale says its own way.
const wordOf = (k) => (isSeats() ? 'seat.' : 'slot.') + k;

// choices are the units the guest picks from: a slot sale's slots, or a
// seats sale's departures, each its vehicles grouped (consecutive units
// of one date and time) with available the most seats left in one
// vehicle (what a group can book), left their sum, and vehicles.
function choices() {
  if (!isSeats()) return rooms;
  const out = [];
  for (const r of rooms) {
    const last = out[out.length - 1];
    if (last && last.date === r.date && last.time === r.time) {
      last.available = Math.max(last.available, r.available);
      last.left += r.available;
      last.vehicles++;
    } else out.push({ date: r.date, time: r.time, minutes: r.minutes, available: r.available, left: r.available, vehicles: 1 });
  }
  return out;
}

// zoneOffset is zone's offset from UTC in ms at the instant ms.
const zoneFmts = new Map();
function zoneOffset(ms, zone) {
  let f = zoneFmts.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' });
    zoneFmts.set(zone, f);
  }
  const p = Object.fromEntries(f.formatToParts(ms).map((x) => [x.type, x.value]));
  return Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour, +p.minute, +p.second) - Math.floor(ms / 1000) * 1000;
}

// slotStart is the instant slot r starts (its wall clock in the venue's
// zone), cached; Infinity when this browser does not know the zone (the
// server then alone leaves started slots out).
const starts = new Map();
function slotStart(r) {
  const k = slotName(r);
  if (!starts.has(k)) {
    let at = Infinity;
    try {
      const wall = Date.parse(k + ':00Z');
      at = wall - zoneOffset(wall, sale.time_zone);
      at = wall - zoneOffset(at, sale.time_zone);
    } catch { /* an unknown zone */ }
    starts.set(k, Number.isNaN(at) ? Infinity : at);
  }
  return starts.get(k);
}

// openSlots are the slots not started by the server's clock: the server
// leaves a started slot out of its next update; the page need not wait.
const openSlots = () => choices().filter((r) => slotStart(r) > clk.now());

// pick is the guest's choice: the slot's name ('' for none) and quantity.
function pick() {
  const el = document.querySelector('#slot-list input[name="slot"]:checked');
  return { slot: el ? el.value : '', quantity: parseInt($('quantity').value || '1', 10) };
}

// slotLeft is the places left in the chosen slot.
function slotLeft() {
  const p = pick();
  const r = choices().find((x) => slotName(x) === p.slot);
  return r ? r.available : 0;
}

// fillSlots draws the days, the chosen day's slots and the quantities,
// when what they show changed (force: the language did). A sold-out slot
// is shown, not selectable. The guest's slot stays chosen while it has
// places; one that sold out under them is unchosen, not swapped for
// another they did not pick.
let slotsShown = '';
function fillSlots(force = false) {
  const open = openSlots();
  const key = JSON.stringify([open.map((r) => [r.date, r.time, r.minutes || 0, r.available, r.left || 0]), lang]);
  if (!force && key === slotsShown) return;
  slotsShown = key;
  const days = [...new Set(open.map((r) => r.date))];
  const hasPlaces = (d) => open.some((r) => r.date === d && r.available > 0);
  const dsel = $('day');
  const keepDay = dsel.value;
  dsel.replaceChildren(...days.map((d) => new Option(hasPlaces(d) ? day(d) : t(wordOf('day_full'), { date: day(d) }), d)));
  if (keepDay && days.includes(keepDay)) dsel.value = keepDay;
  else if (days.some(hasPlaces)) dsel.value = days.find(hasPlaces);
  drawSlots(open);
}

// chosen is the slot the guest picked (or the page picked for them: the
// day's first with places), kept while the slot is on the day shown.
let chosen = '';

// drawSlots draws the chosen day's slots: start, length, places left.
function drawSlots(open = openSlots()) {
  const list = $('slot-list');
  const mine = open.filter((r) => r.date === $('day').value);
  list.replaceChildren(...mine.map((r, i) => {
    const name = slotName(r);
    const full = r.available <= 0;
    const inp = Object.assign(document.createElement('input'), { type: 'radio', name: 'slot', value: name, id: 'slot-' + i, disabled: full });
    const lab = document.createElement('label');
    lab.className = 'slot';
    lab.htmlFor = inp.id;
    lab.dataset.slot = name;
    if (full) lab.dataset.full = 'true';
    const span = (cls, text) => Object.assign(document.createElement('span'), { className: cls, textContent: text });
    lab.append(inp, span('slot-time', r.time));
    if (r.minutes) lab.append(span('slot-len', t('slot.minutes', { n: r.minutes })));
    lab.append(span('slot-left', full ? t(wordOf('full')) : isSeats() ? seatsLeft(r) : t('slot.left', { n: r.available })));
    lab.dataset.left = String(r.available);
    return lab;
  }));
  const kept = mine.find((r) => slotName(r) === chosen);
  const choice = kept ? (kept.available > 0 ? kept : null) : mine.find((r) => r.available > 0);
  if (!kept) chosen = choice ? slotName(choice) : '';
  if (choice) list.querySelector(`input[value="${CSS.escape(slotName(choice))}"]`).checked = true;
  const zone = t(wordOf('zone'), { zone: sale.time_zone || 'UTC' });
  if ($('slot-zone').textContent !== zone) $('slot-zone').textContent = zone;
  fillQuantity();
}

// seatsLeft says a departure's seats: those left, and when its vehicles
// split them, the most a group can book together ("4 seats left · up to 2
// together": two vehicles with 2 each).
function seatsLeft(r) {
  const left = count('seat.left', r.left);
  return r.left > r.available ? left + ' · ' + t('seat.together', { n: r.available }) : left;
}

// fillQuantity offers 1 to the fewer of the chosen slot's places and the
// sale's per-guest limit (per_user_limit counts places).
function fillQuantity() {
  const sel = $('quantity');
  const max = Math.max(1, Math.min(sale.per_user_limit || 1, slotLeft() || 1, 1000));
  const keep = sel.value;
  if (sel.options.length !== max) sel.replaceChildren(...Array.from({ length: max }, (_, i) => new Option(String(i + 1), String(i + 1))));
  if (keep && parseInt(keep, 10) <= max) sel.value = keep;
}

// leftNow is the rooms (places) left for what the guest chose.
const leftNow = () => (isSlot() ? slotLeft() : stayLeft());

// --- rooms left: pushed, or polled when the stream fails -------------------
function applyRooms(v) {
  const before = JSON.stringify([saleStatus, rooms]);
  saleStatus = v.status;
  const dates = rooms.map((r) => r.date).join();
  rooms = v.nights || [];
  if (isSlot()) fillSlots();
  else if (rooms.map((r) => r.date).join() !== dates || rulesKey() !== rulesShown) fillStay();
  const changed = JSON.stringify([saleStatus, rooms]) !== before;
  if (changed && phase === 'sold_out' && leftNow() > 0) phase = ''; // a room came back
  render();
  return changed;
}

function subscribe() {
  if (!window.EventSource) { poll(); return; }
  const es = new EventSource(`/api/sales/${eid}/events`);
  let errors = 0;
  es.addEventListener('rooms', (e) => {
    errors = 0;
    feed = { live: true, every: 0 };
    try { applyRooms(JSON.parse(e.data)); } catch { /* a bad message: keep the last */ }
  });
  es.onerror = () => {
    // The browser retries by itself; a closed stream (an error status) or
    // three failures in a row fall back to polling.
    if (es.readyState === EventSource.CLOSED || ++errors >= 3) {
      es.close();
      poll();
    }
  };
}

// poll reads the sale view with exponential backoff: 2 s after a change,
// doubling up to 30 s while nothing changes or the server refuses; after
// five minutes it tries the stream again.
async function poll() {
  let delay = 2000;
  const until = performance.now() + 5 * 60000;
  while (performance.now() < until) {
    feed = { live: false, every: Math.round(delay / 1000) };
    render();
    await sleep(delay);
    const res = await call('GET', `/api/sales/${eid}`);
    if (res.status === 200) {
      clk.sync(res.body.server_time, res.sentAt, res.receivedAt);
      delay = applyRooms(res.body) ? 2000 : Math.min(delay * 2, 30000);
    } else {
      delay = Math.min(Math.max(delay * 2, res.retryAfter * 1000), 30000);
    }
  }
  subscribe();
}

// --- buying -----------------------------------------------------------------
function setPhase(p, v = {}) {
  phase = p;
  vars = v;
  render();
}

function blockFor(seconds) {
  blockedUntil = performance.now() + Math.max(1, seconds) * 1000;
}

function solveInWorker(challenge, difficulty) {
  return new Promise((resolve, reject) => {
    const w = new Worker(document.body.dataset.worker, { type: 'module' });
    w.onmessage = (e) => { w.terminate(); resolve(e.data.solution); };
    w.onerror = (e) => { w.terminate(); reject(e); };
    w.postMessage({ challenge, difficulty });
  });
}

// fail turns an error answer into the state the guest sees.
async function fail(res) {
  const code = errorCode(res);
  if (isSlot() && res.status === 400) {
    // A slot that started, or left the sale, since the page drew it:
    // say the server's words and draw the slots again from a fresh read.
    setPhase('slot_gone', { reason: errorMessage(res) });
    await reread();
    fillSlots(true);
    render();
    return;
  }
  if (STAY_RULES.includes(code)) {
    // The rules changed since the page read them: say which (the
    // server's message names the rule and the night) and redraw the
    // menus from a fresh read.
    setPhase('stay_rule', { reason: errorMessage(res) });
    await reread();
    fillStay();
    render();
    return;
  }
  switch (code) {
    case 'sold_out': setPhase('sold_out'); break;
    case 'not_eligible': setPhase('not_eligible', { reason: errorMessage(res) }); break;
    case 'rate_limited': blockFor(res.retryAfter); setPhase('rate_limited'); break;
    case 'unavailable': blockFor(res.retryAfter); setPhase('unavailable'); break;
    case 'limit_exceeded': setPhase('limit'); break;
    case 'ended': setPhase('ended'); break;
    case 'paused': saleStatus = 'paused'; setPhase(''); break; // until the stream says it resumed
    case 'not_started': await load(); setPhase(''); break;
    case 'not_admitted': setPhase('not_admitted'); readPlace(); break; // the stream says why soon; read it now
    case 'unauthenticated':
      token = null;
      store.set(TOKEN_KEY, null);
      if (demo) { await demoLogin(); setPhase('retry', { reason: errorMessage(res) }); } else setPhase('no_token');
      break;
    default: setPhase('retry', { reason: errorMessage(res) });
  }
}

// reread reads the sale view once and applies it (the rooms and the rules).
async function reread() {
  const res = await call('GET', `/api/sales/${eid}`);
  if (res.status !== 200) return;
  clk.sync(res.body.server_time, res.sentAt, res.receivedAt);
  applyRooms(res.body);
}

async function buy() {
  if (busy || !canBuy()) return;
  busy = true; // disabled from the first click, before anything is awaited
  $('buy').disabled = true;
  order = null;
  setPhase('buying');
  try {
    let ptoken;
    if (sale.purchase_token) {
      let body;
      // A waiting room asks for the proof of work at the join: the
      // admitted guest's token needs none.
      if (sale.challenge && sale.challenge.difficulty > 0 && !sale.waiting_room) {
        const c = await call('POST', `/api/sales/${eid}/challenge`, { token });
        if (c.status !== 201) return await fail(c);
        setPhase('solving');
        body = { challenge: c.body.challenge, solution: await solveInWorker(c.body.challenge, c.body.difficulty) };
        setPhase('buying');
      }
      const tk = await call('POST', `/api/sales/${eid}/token`, { token, body });
      if (tk.status !== 201) return await fail(tk);
      ptoken = tk.body.token;
    }
    let want;
    if (isSeats()) {
      const p = pick();
      want = { token: ptoken, departure: p.slot, seats: p.quantity };
    } else if (isSlot()) {
      const p = pick();
      want = { token: ptoken, slot: p.slot, quantity: p.quantity };
    } else {
      const s = stay();
      want = { token: ptoken, check_in: s.checkIn, nights: s.nights, rooms: s.rooms };
    }
    const req = { token, body: want, headers: { 'Idempotency-Key': crypto.randomUUID() } };
    let p = await call('POST', `/api/sales/${eid}/purchase`, req);
    for (let i = 0; p.status === 0 && i < 2; i++) { // the same key: a retry cannot buy twice
      await sleep(500 * (i + 1));
      p = await call('POST', `/api/sales/${eid}/purchase`, req);
    }
    if (p.status !== 202) return await fail(p);
    // The purchase's answer may be the short one (order, status, amount,
    // hold): a slot's order says what it holds from the first moment,
    // from what was asked and accepted, until the order's read says it.
    order = isSeats() ? { slot: want.departure, rooms: want.seats, ...p.body } : isSlot() ? { slot: want.slot, rooms: want.quantity, ...p.body } : p.body;
    // The attempt is over; the order speaks from here. Left at 'buying'
    // (sticky), the button stayed disabled after the hold expired or the
    // guest cancelled, until a reload (issue 23).
    phase = '';
    store.set(ORDER_KEY, order.order_id);
    follow();
  } catch (e) {
    setPhase('retry', { reason: String(e && e.message || e) });
  } finally {
    busy = false;
    render();
  }
}

const FINAL = ['paid', 'expired', 'cancelled', 'failed'];

// follow reads the order until it is final: quickly while it is queued,
// every 2 s while it is held (and at the hold's end).
async function follow() {
  let delay = 300;
  while (order && !FINAL.includes(order.status)) {
    render();
    const wait = order.status === 'held' ? Math.min(2000, Math.max(200, Date.parse(order.hold_expires_at) - clk.now() + 300)) : delay;
    delay = Math.min(delay * 2, 3000);
    await sleep(wait);
    const cur = order;
    const res = await call('GET', `/api/orders/${encodeURIComponent(cur.order_id)}`, { token });
    if (order !== cur) return;
    if (res.status === 200) order = { ...order, ...res.body };
    else if (res.retryAfter) await sleep(res.retryAfter * 1000);
  }
  if (order) store.set(ORDER_KEY, null);
  render();
}

// payDemo pays the held order through the demo's own endpoint (demo mode
// only: a real guest pays on the platform, which confirms to the API).
let paying = false;
let payError = '';
async function payDemo() {
  if (!order || paying) return;
  paying = true;
  payError = '';
  render();
  const cur = order;
  const res = await call('POST', `/api/demo/orders/${encodeURIComponent(cur.order_id)}/pay`, { token });
  paying = false;
  if (order !== cur) return;
  if (res.status === 200) order = { ...order, ...res.body };
  else payError = errorMessage(res);
  render();
  // The pay button is gone once paid: keep a keyboard user's place.
  if (document.activeElement === document.body || $('pay').hidden) $('state').focus();
}

async function cancelHold() {
  if (!order) return;
  $('cancel').disabled = true;
  const res = await call('POST', `/api/orders/${encodeURIComponent(order.order_id)}/cancel`, { token });
  if (res.status === 200) order = { ...order, ...res.body };
  $('cancel').disabled = false;
  render();
}

// --- the waiting room -------------------------------------------------------
// A sale with a waiting_room lets a guest buy only once its queue admits
// them. The guest joins (POST .../queue, from prequeue_minutes before the
// start until the end), then follows their place on GET .../queue/events,
// read with fetch() since it needs the Authorization header; while that
// stream is down the place is polled (GET .../queue) at its poll_after_ms
// and the stream tried again after 2 s, doubling to 30 s. Admitted, the
// guest has until admitted_until to take a purchase token; sold_out comes
// pushed, the moment the last room is spoken for.
let place = null;      // the guest's place, the latest read; null: not in the queue
let placeRead = false; // the first read of the place is in: until then no join button
let joining = false;
let qfeed = '';        // how the place comes: 'stream', 'poll', '' (not followed)
let qgen = 0;          // the follower running; a newer one ends the older
let qabort = null;

const hasRoom = () => !!(sale && sale.waiting_room);
const roomOpens = () => Date.parse(sale.starts_at) - (sale.waiting_room.prequeue_minutes || 0) * 60000;

function applyPlace(v) {
  if (!v || typeof v.state !== 'string') return;
  place = v;
  placeRead = true;
  if (phase === 'not_admitted' || phase === 'queue_full') phase = '';
  render();
}

// readPlace reads the guest's place once: 404 is a guest not in the queue.
async function readPlace() {
  if (!token || !hasRoom()) return { status: 0 };
  const res = await call('GET', `/api/sales/${eid}/queue`, { token });
  if (res.status === 200) applyPlace(res.body);
  else if (res.status === 404) { place = null; placeRead = true; render(); }
  else if (res.status === 401) await fail(res);
  return res;
}

// startQueue reads the guest's place (a reload finds the one they had)
// and follows it if there is one.
async function startQueue() {
  if (!hasRoom() || !token) return;
  for (let delay = 1000; ; delay = Math.min(delay * 2, 30000)) {
    const res = await readPlace();
    if (res.status === 200) { followPlace(); return; }
    if (res.status === 404 || res.status === 401) return;
    await sleep(Math.max(delay, (res.retryAfter || 0) * 1000));
  }
}

// followPlace follows the place until the sale ends (or a newer follower
// starts): over the stream, polling while it is down.
async function followPlace() {
  const gen = ++qgen;
  if (qabort) qabort.abort();
  let backoff = 2000;
  const going = () => gen === qgen && place && place.state !== 'closed';
  while (going()) {
    const ctl = qabort = new AbortController();
    const r = await stream(`/api/sales/${eid}/queue/events`, { token, signal: ctl.signal, on: (ev, data) => {
      if (gen !== qgen) return false;
      if (ev !== 'place') return true;
      qfeed = 'stream';
      try { applyPlace(JSON.parse(data)); } catch { /* a bad message: keep the last */ }
      return going();
    } });
    if (!going()) break;
    if (r.heard) backoff = 2000;
    if (r.status === 404) { place = null; render(); break; } // no place (or no sale) any more
    if (r.status === 401) { await fail({ status: 401, body: r.body, retryAfter: 0 }); break; }
    qfeed = 'poll';
    render();
    const until = performance.now() + backoff;
    backoff = Math.min(backoff * 2, 30000);
    while (going() && performance.now() < until) {
      await sleep(Math.min(Math.max(1000, place.poll_after_ms || 2000), Math.max(0, until - performance.now()) + 1));
      if (!going()) break;
      const res = await readPlace();
      if (res.status === 404 || res.status === 401) break;
    }
  }
  if (gen === qgen) { qfeed = ''; render(); }
}

// joinQueue joins (again, after an expired turn: at the back), solving the
// sale's proof of work first if it asks for one.
async function joinQueue() {
  if (joining || !token || !hasRoom()) return;
  joining = true;
  setPhase('joining');
  try {
    let body;
    if (sale.challenge && sale.challenge.difficulty > 0) {
      const c = await call('POST', `/api/sales/${eid}/challenge`, { token });
      if (c.status !== 201) return await fail(c);
      setPhase('solving');
      body = { challenge: c.body.challenge, solution: await solveInWorker(c.body.challenge, c.body.difficulty) };
      setPhase('joining');
    }
    const res = await call('POST', `/api/sales/${eid}/queue`, { token, body });
    if (res.status !== 200 && res.status !== 201) {
      // Sold out to newcomers is not the guest's last word: rooms may
      // come back and the queue open again.
      if (errorCode(res) === 'sold_out') return setPhase('queue_full');
      return await fail(res);
    }
    phase = '';
    applyPlace(res.body);
    followPlace();
  } catch (e) {
    setPhase('retry', { reason: String(e && e.message || e) });
  } finally {
    joining = false;
    render();
  }
}

// queueState is where the guest stands with the waiting room: opens (not
// yet open), join, joining, drawing (in, places not drawn yet), waiting,
// admitted (their turn, unused), used, sold_out, expired, closed.
function queueState(now) {
  if (now >= Date.parse(sale.ends_at) || saleStatus === 'ended' || (place && place.state === 'closed')) return 'closed';
  if (!place) {
    if (now < roomOpens()) return 'opens';
    if (joining) return 'joining';
    return placeRead || !token ? 'join' : 'loading';
  }
  switch (place.state) {
    case 'waiting': return place.position > 0 ? 'waiting' : 'drawing';
    case 'admitted':
      // The token spends the admission: from the order on, the turn is used.
      if (!place.admitted_until || order) return 'used';
      return now < Date.parse(place.admitted_until) ? 'admitted' : 'expired';
    case 'sold_out': return 'sold_out';
    case 'expired': return joining ? 'joining' : 'expired';
    default: return 'closed';
  }
}

// roomBase is the page's state for a sale with a waiting room, or '' when
// the guest is admitted and the sale's own state applies.
function roomBase(now) {
  switch (queueState(now)) {
    case 'opens': return 'waiting';
    case 'join': case 'loading': case 'joining': return 'queue_join';
    case 'drawing': case 'waiting': return 'queue_waiting';
    case 'used': return 'queue_used';
    case 'sold_out': return 'sold_out';
    case 'expired': return 'queue_expired';
    case 'closed': return 'ended';
    default: return '';
  }
}

// eta is a wait in words: m:ss under ten minutes, else about N min.
function eta(s) {
  if (s <= 0) return t('queue.eta_now');
  return s < 600 ? clock(s * 1000) : t('queue.eta_min', { n: Math.round(s / 60) });
}

function renderQueue(now) {
  const box = $('queue');
  box.hidden = !hasRoom();
  if (!hasRoom()) return;
  const qs = queueState(now);
  box.dataset.state = qs;
  box.dataset.place = place ? place.state : ''; // the server's word, where qs may run ahead of it
  box.dataset.feed = qfeed;
  const starts = Date.parse(sale.starts_at);
  const notes = {
    opens: t('queue.opens', { t: clock(roomOpens() - now) }),
    join: t('queue.join_hint'), loading: t('loading'), joining: t('state.joining'),
    drawing: now < starts ? t('queue.drawing', { t: clock(starts - now) }) : t('queue.drawing_now'),
    waiting: t('queue.waiting'), admitted: t('queue.admitted'), used: t('queue.used'),
    sold_out: t('queue.sold_out'), expired: t('queue.expired'), closed: t('queue.closed'),
  };
  const note = notes[qs] || '';
  const q = $('q-note');
  // A change of state is read out; a countdown ticking inside one is not.
  q.setAttribute('aria-live', q.dataset.state === qs && (qs === 'opens' || qs === 'drawing') ? 'off' : 'polite');
  if (q.textContent !== note) q.textContent = note;
  q.dataset.state = qs;

  const showFigures = place && ['drawing', 'waiting', 'sold_out', 'admitted'].includes(qs);
  $('q-figures').hidden = !showFigures;
  for (const k of ['q-position', 'q-ahead', 'q-eta']) $(k).parentElement.hidden = qs === 'admitted'; // the turn says it
  if (showFigures) {
    const drawn = place.position > 0;
    $('q-position').textContent = drawn ? String(place.position) : '–';
    $('q-position').dataset.n = String(place.position);
    $('q-ahead').textContent = drawn ? String(place.ahead) : '–';
    $('q-ahead').dataset.n = String(place.ahead);
    // Before the draw the wait counts to the start, by the server's
    // clock; after it, it is the server's estimate as last read (from
    // the guests ahead at the sale's rate: it falls with the place).
    const s = drawn || now >= starts ? place.eta_seconds : Math.ceil((starts - now) / 1000);
    $('q-eta').textContent = eta(s);
    $('q-eta').dataset.s = String(s);
    $('q-rooms').textContent = String(place.rooms_left);
    $('q-rooms').dataset.n = String(place.rooms_left);
  }
  const turn = $('q-turn');
  turn.hidden = qs !== 'admitted';
  turn.textContent = turn.hidden ? '' : t('queue.turn', { t: clock(Date.parse(place.admitted_until) - now) });
  const join = $('q-join');
  join.hidden = !['join', 'joining', 'expired'].includes(qs) || !token;
  join.disabled = joining || performance.now() < blockedUntil;
  const label = qs === 'expired' || (place && place.state === 'expired') ? 'queue.join_again' : 'queue.join';
  if (join.dataset.i18n !== label || join.dataset.lang !== lang) {
    join.dataset.i18n = label;
    join.dataset.lang = lang;
    join.textContent = t(label);
  }
}

// --- what the guest sees ----------------------------------------------------
// baseState is the sale's own state when no attempt says otherwise.
function baseState(now) {
  if (!sale) return 'loading';
  if (now >= Date.parse(sale.ends_at) || saleStatus === 'ended') return 'ended';
  if (saleStatus === 'paused') return 'paused'; // before the start too: it will not open on time
  if (hasRoom()) {
    if (!token) return demo ? 'signing_in' : 'no_token';
    const q = roomBase(now);
    if (q) return q;
  }
  if (noStay()) return 'no_stay'; // the rules close every stay: choosing cannot help
  if (now < Date.parse(sale.starts_at)) return 'waiting';
  if (saleStatus === 'sold_out' || leftNow() <= 0) {
    // A slot sale with places left but none chosen (the guest's sold out
    // under them): not sold out, a choice to make.
    return isSlot() && !pick().slot && rooms.some((r) => r.available > 0) ? 'pick_slot' : 'sold_out';
  }
  if (!token) return demo ? 'signing_in' : 'no_token';
  return 'ready';
}

// SLOT_WORDS are the states a slot sale says in its own words (places,
// not rooms; no stay to enjoy).
const SLOT_WORDS = ['paid', 'expired', 'limit'];

// sticky are the attempts' outcomes that keep the button disabled.
const sticky = ['buying', 'solving', 'sold_out', 'limit', 'not_eligible', 'ended', 'no_token'];

function canBuy() {
  return !busy && baseState(clk.now()) === 'ready' && !sticky.includes(phase) &&
    performance.now() >= blockedUntil && !(order && ['pending', 'held', 'paid'].includes(order.status));
}

// current is the state shown: the order's, else the last attempt's, else the sale's.
function current(now) {
  if (order) {
    const st = order.status === 'pending' ? 'queued' : order.status;
    return [st, st === 'failed' ? { reason: order.failure_reason || '' } : {}];
  }
  if (phase === 'rate_limited' || phase === 'unavailable') {
    const left = Math.ceil((blockedUntil - performance.now()) / 1000);
    if (left > 0) return [phase, { n: left }];
    phase = '';
  }
  const base = baseState(now);
  if (phase === 'retry' && !['ready', 'queue_join', 'queue_expired'].includes(base)) phase = ''; // a failed join stays said
  if (phase === 'stay_rule' && !['ready', 'no_stay'].includes(base)) phase = ''; // the sale's own word wins
  if (phase === 'slot_gone' && !['ready', 'pick_slot'].includes(base)) phase = '';
  return phase ? [phase, vars] : [base, {}];
}

function render() {
  if (!sale) return;
  const now = clk.now();
  $('hotel').textContent = sale.hotel;
  $('title').textContent = sale.title;
  const tabTitle = `${sale.title} · ${sale.hotel}`;
  if (document.title !== tabTitle) document.title = tabTitle; // was always "Flash sale"
  $('room').textContent = sale.room_type;
  $('price').textContent = money(sale.price, sale.currency);
  $('original').textContent = sale.original_price > sale.price ? money(sale.original_price, sale.currency) : '';
  const slot = isSlot();
  // A slot sale's words: a price per place, places left, its own menus.
  $('stay').hidden = slot;
  $('slots').hidden = !slot;
  $('per-night').hidden = slot;
  for (const [id, stayKey, slotKey] of [['per', 'per_night', 'per_place'], ['left-label', 'rooms_left', 'places_left'], ['quantity-label', '', 'guests'], ['slot-legend', '', 'time']]) {
    const k = slot ? wordOf(slotKey) : stayKey;
    if (!k) continue;
    if ($(id).dataset.i18n !== k) { $(id).dataset.i18n = k; $(id).textContent = t(k); }
  }
  const tiers = sale.price_tiers || [];
  $('tiers-box').hidden = !tiers.length;
  const shownTiers = JSON.stringify([tiers, lang]);
  if ($('tiers').dataset.shown !== shownTiers) {
    $('tiers').replaceChildren(...tiers.map((tr) => {
      const li = document.createElement('li');
      li.textContent = t(slot ? wordOf('tier') : 'tier', { n: tr.rooms, price: money(tr.price, sale.currency) });
      return li;
    }));
    $('tiers').dataset.shown = shownTiers;
  }
  let total, amount;
  if (slot) {
    if (slotsShown) fillSlots(); // a slot that started by now goes
    const q = pick().quantity;
    const unit = unitPrice(q);
    total = unit * q;
    amount = t('slot.amount', { amount: money(total, sale.currency), guests: count(isSeats() ? 'seats_n' : 'guests_n', q), unit: money(unit, sale.currency) });
  } else {
    const s = stay();
    const unit = unitPrice(s.rooms);
    total = unit * s.rooms * s.nights;
    amount = t('amount', { amount: money(total, sale.currency), rooms: count('rooms_n', s.rooms),
      nights: count('nights_n', s.nights), unit: money(unit, sale.currency) });
  }
  if ($('amount').textContent !== amount) $('amount').textContent = amount; // aria-live: only a change is read out
  $('amount').dataset.amount = String(total);
  const left = leftNow();
  $('left').textContent = String(left);
  $('left').dataset.left = String(left);
  if (!slot) {
    $('per-night').replaceChildren(...rooms.map((r) => {
      const li = document.createElement('li');
      li.dataset.date = r.date;
      if (r.stop_sell) li.dataset.closed = 'true';
      li.textContent = r.stop_sell ? t('night_closed', { date: day(r.date) }) : t('night_left', { date: day(r.date), n: r.available });
      return li;
    }));
  }
  // Nothing left to choose once the whole sale is sold out or over: the
  // menus and the total step back (a stay sold out while other nights
  // have rooms keeps them, to pick another night).
  const closed = saleStatus === 'sold_out' || saleStatus === 'ended' || now >= Date.parse(sale.ends_at) || noStay();
  for (const k of slot ? ['day', 'quantity'] : ['checkin', 'nights', 'rooms']) $(k).disabled = closed;
  if (slot) $('slots').classList.toggle('inactive', closed);
  if (slot) for (const r of $('slot-list').querySelectorAll('input')) r.disabled = closed || r.closest('label').dataset.full === 'true';
  $('amount').classList.toggle('inactive', closed);
  const starts = Date.parse(sale.starts_at), ends = Date.parse(sale.ends_at);
  const cd = $('countdown');
  if (now < starts) cd.textContent = t('starts_in', { t: clock(starts - now) });
  else if (now < ends) cd.textContent = t('ends_in', { t: clock(ends - now) }) + ' · ' + (feed.live ? t('live') : t('polling', { n: feed.every }));
  else cd.textContent = t('ended');
  cd.dataset.startsIn = String(Math.max(0, Math.ceil((starts - now) / 1000)));

  const [st, v] = current(now);
  const el = $('state');
  if (el.dataset.state !== st) tellParent({ type: 'flashsale.state', sale_id: id, state: st, order_id: order ? order.order_id : undefined });
  if (el.dataset.state !== st || el.dataset.text !== JSON.stringify(v) || el.dataset.lang !== lang) {
    el.textContent = st === 'loading' ? t('loading') : t(slot && SLOT_WORDS.includes(st) ? wordOf('state.' + st) : 'state.' + st, v);
    el.dataset.state = st;
    el.dataset.text = JSON.stringify(v);
    el.dataset.lang = lang;
  }
  // A slot's order says what it holds: the day, the time where the venue
  // is, and the places.
  const booked = $('booked');
  const what = order && order.slot && ['pending', 'held', 'paid'].includes(order.status) ? t('slot.booked', { date: day(order.slot.slice(0, 10)),
    time: order.slot.slice(11), zone: sale.time_zone || 'UTC', guests: count(isSeats() ? 'seats_n' : 'guests_n', order.rooms) }) : '';
  if (booked.textContent !== what) booked.textContent = what;
  booked.hidden = !what;
  booked.dataset.slot = what ? order.slot : '';
  booked.dataset.quantity = what ? String(order.rooms) : '';
  const hold = $('hold');
  if (order && order.status === 'held') {
    const ms = Date.parse(order.hold_expires_at) - now;
    hold.textContent = t('state.pay_within', { t: clock(ms) }) + ' · ' + money(order.amount, order.currency) + ' · ' +
      (paying ? t('state.paying') : payError ? t('state.retry', { reason: payError }) : t(demo ? 'state.pay_demo' : 'state.pay_platform'));
    $('cancel').hidden = false;
    $('pay').hidden = !demo;
    $('pay').disabled = paying;
  } else {
    // A paid order says which one and what it bought: the guest's receipt
    // until the platform's arrives.
    hold.textContent = order && order.status === 'paid' ? (order.slot ? t('slot.order', { id: order.order_id, amount: money(order.amount, order.currency) })
      : t('state.order', { id: order.order_id, date: day(order.check_in),
        nights: count('nights_n', order.nights), rooms: count('rooms_n', order.rooms), amount: money(order.amount, order.currency) })) : '';
    $('cancel').hidden = true;
    $('pay').hidden = true;
  }
  renderQueue(now);
  $('buy').disabled = !canBuy();
}

// --- start ------------------------------------------------------------------
async function load() {
  for (let delay = 1000; ; delay = Math.min(delay * 2, 30000)) {
    const res = await call('GET', `/api/sales/${eid}`);
    if (res.status === 200) {
      clk.sync(res.body.server_time, res.sentAt, res.receivedAt);
      sale = res.body;
      applyRooms(res.body);
      return true;
    }
    if (res.status === 404) {
      $('fatal').textContent = t('state.not_found');
      $('fatal').hidden = false;
      return false;
    }
    await sleep(Math.max(delay, res.retryAfter * 1000));
  }
}

async function start() {
  setupSwitch(() => { if (isSlot()) fillSlots(true); else fillStay(); render(); });
  // Another stay chosen: a refusal of the last one is no longer the news.
  const chose = () => { if (phase === 'stay_rule') phase = ''; };
  $('checkin').addEventListener('change', () => { chose(); fillStay(); render(); });
  $('nights').addEventListener('change', () => { chose(); render(); });
  $('rooms').addEventListener('change', render);
  // A slot sale's menus: another day or slot chosen clears the news of
  // the last one (sold out, gone).
  const choseSlot = () => { if (['sold_out', 'slot_gone'].includes(phase)) phase = ''; };
  $('day').addEventListener('change', () => { choseSlot(); chosen = ''; drawSlots(); render(); });
  $('slot-list').addEventListener('change', (e) => { choseSlot(); chosen = e.target.value; fillQuantity(); render(); });
  $('quantity').addEventListener('change', render);
  $('buy').addEventListener('click', buy);
  $('cancel').addEventListener('click', cancelHold);
  $('pay').addEventListener('click', payDemo);
  $('q-join').addEventListener('click', joinQueue);
  if (!(await load())) return;
  if (!isSlot()) fillRooms();
  $('sale').hidden = false;
  if (demo && !token) await demoLogin();
  else if (demo) $('who').textContent = t('signed_in', { user: store.get('flashsale.demo_user') || '' });
  const saved = store.get(ORDER_KEY);
  if (saved && token) { order = { order_id: saved, status: 'pending' }; follow(); }
  subscribe();
  startQueue();
  setInterval(render, 250);
  render();
}

start();
