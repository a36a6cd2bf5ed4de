// The console's create-sale form: the body POST /api/admin/sales takes,
// checked here as flashsale.Sale.Validate checks it (so most mistakes are
// named before a request), and the server's 400 mapped back to its field.
import { t } from './i18n.js';

const $ = (x) => document.getElementById(x);

// FIELDS maps a field's JSON path to its input and its error line.
const FIELDS = {
  title: ['f-title', 'e-title'], description: ['f-description', 'e-description'], hotel: ['f-hotel', 'e-hotel'], room_type: ['f-room_type', 'e-room_type'],
  time_zone: ['f-time_zone', 'e-time_zone'],
  price: ['f-price', 'e-price'], price_tiers: ['f-price_tiers', 'e-price_tiers'], original_price: ['f-original_price', 'e-original_price'], currency: ['f-currency', 'e-currency'],
  starts_at: ['f-starts_at', 'e-starts_at'], ends_at: ['f-ends_at', 'e-ends_at'],
  per_user_limit: ['f-per_user_limit', 'e-per_user_limit'], hold_seconds: ['f-hold_seconds', 'e-hold_seconds'],
  purchase_token: ['f-purchase_token', 'e-purchase_token'], 'challenge.difficulty': ['f-challenge', 'e-challenge'],
  'eligibility.min_tier': ['f-min_tier', 'e-min_tier'], 'eligibility.min_stays_30d': ['f-min_stays', 'e-min_stays'],
  'eligibility.channels': ['f-channels', 'e-channels'],
  'limits.per_sale': ['f-per_sale', 'e-per_sale'], 'limits.per_user': ['f-per_user', 'e-per_user'], 'limits.per_ip': ['f-per_ip', 'e-per_ip'],
  'waiting_room.prequeue_minutes': ['f-prequeue_minutes', 'e-prequeue_minutes'], 'waiting_room.admit_per_second': ['f-admit_per_second', 'e-admit_per_second'],
  'waiting_room.admission_seconds': ['f-admission_seconds', 'e-admission_seconds'],
  nights: ['add-night', 'e-nights'], kind: ['f-kind', 'e-kind'],
};

// elementsOf returns a field's input and error line, nights rows included.
function elementsOf(key) {
  const m = /^nights\[(\d+)\]\.(date|time|minutes|vehicles|stock|min_stay|max_stay|closed_to_arrival|closed_to_departure|stop_sell)$/.exec(key);
  if (m) {
    // A seats sale's unit is a vehicle: its row is its departure's.
    const i = kind() === 'seats' ? (unitRow[Number(m[1])] ?? Number(m[1])) : Number(m[1]);
    const row = $('nights-rows').children[i];
    if (row) return [row.querySelector(`[data-part="${m[2]}"]`), row.querySelector('.err')];
  }
  const f = FIELDS[key];
  return f ? [$(f[0]), $(f[1])] : [null, null];
}

const MAX_MONEY = 2 ** 40;
const MAX_TIERS = 10; // flashsale.MaxPriceTiers
const TIER = /^(\d+)\s*:\s*(\d+)$/;
const RATE = /^([0-9]+)\/[smh](?:,([0-9]+))?$/;
const CHANNEL = /^[a-z0-9._-]{1,64}$/;
const DECIMAL = /^\d+(?:\.\d+)?$/;
const ROOM = ['prequeue_minutes', 'admit_per_second', 'admission_seconds']; // a waiting room's fields
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const CLOCK = /^([01]\d|2[0-3]):[0-5]\d$/;
const utf8 = new TextEncoder();

// --- the kind of sale ------------------------------------------------------
// A sale sells stays (nights of a room, the default) or time slots (a
// restaurant's services, a spa's appointments: issue 25's kind slot).
// For slots each row is a slot: its date, its start and length in the
// venue's time zone (then required), and its places; stay rules do not
// apply and are hidden, and the form's words say places, not rooms.
//
// Shuttle seats (kind seats) are timed the same way, each row a departure:
// its date, start, length, vehicles and seats per vehicle, sent as one
// unit per vehicle (the server's representation: a departure's vehicles
// one after another with the same date and time).
export const kind = () => (['slot', 'seats'].includes($('f-kind').value) ? $('f-kind').value : 'stay');

// timed reports whether a kind's units start at a time (slots, departures).
export const timed = (k = kind()) => k === 'slot' || k === 'seats';

// WORDS are the elements whose words change with the kind: [selector,
// a stay's key, a slot sale's key, a seats sale's key].
const WORDS = [
  ['#l-nights', 'f.nights', 'f.slots', 'f.departures'], ['#add-night', 'f.add_night', 'f.add_slot', 'f.add_departure'],
  ['label[for="f-hotel"]', 'f.hotel', 'f.venue', 'f.seat_venue'], ['label[for="f-room_type"]', 'f.room_type', 'f.service', 'f.seat_service'],
  ['label[for="f-time_zone"]', 'f.time_zone', 'f.venue_time_zone', 'f.venue_time_zone'], ['#h-time_zone', 'f.time_zone_hint', 'f.venue_time_zone_hint', 'f.seat_time_zone_hint'],
  ['#l-prices', 'f.prices', 'f.slot_prices', 'f.seat_prices'], ['label[for="f-per_user_limit"]', 'f.per_user_limit', 'f.per_user_places', 'f.per_user_seats'],
  ['label[for="f-price_tiers"]', 'f.price_tiers', 'f.slot_price_tiers', 'f.seat_price_tiers'],
  ['#nights-rows label.stock-label', 'f.night_stock', 'f.slot_stock', 'f.seat_stock'],
  ['#nights-rows label.date-label', 'f.night_date', 'f.slot_date', 'f.slot_date'],
];

// wordFor is a WORDS entry's key for kind k.
const wordFor = (w, k) => w[{ stay: 1, slot: 2, seats: 3 }[k] || 1];

// setKind shows the form for a kind: its words, its rows' parts, the time
// zone required or not.
export function setKind(k) {
  $('f-kind').value = k;
  $('create').dataset.kind = k;
  for (const w of WORDS) {
    for (const e of document.querySelectorAll(w[0])) {
      e.dataset.i18n = wordFor(w, k);
      e.textContent = t(e.dataset.i18n);
    }
  }
  $('f-time_zone').required = timed(k);
  labelRemoveButtons();
}

// --- the nights' rows -------------------------------------------------------
let rowSeq = 0;

// RULES are a night's stay rules (flashsale.StayRules), as the form's
// inputs name them: two numbers, then three switches.
const RULE_NUMBERS = ['min_stay', 'max_stay'];
const RULE_FLAGS = ['closed_to_arrival', 'closed_to_departure', 'stop_sell'];

// addNight adds a night's row: its date, its rooms, and its stay rules in
// a group of their own, open when the night has one.
export function addNight(date = '', stock = '', rules = {}) {
  const i = rowSeq++;
  const row = document.createElement('div');
  row.className = 'night-row';
  const mk = (part, type, label, value) => {
    const id = `n${i}-${part}`;
    const l = document.createElement('label');
    l.htmlFor = id;
    l.textContent = t(label);
    l.dataset.i18n = label;
    const inp = document.createElement('input');
    Object.assign(inp, { id, type });
    if (type === 'checkbox') inp.checked = !!value;
    else inp.value = String(value);
    inp.dataset.part = part;
    inp.setAttribute('aria-describedby', `n${i}-err`);
    if (type === 'number') Object.assign(inp, { min: '0', max: '1000000', step: '1', inputMode: 'numeric' });
    return [l, inp];
  };
  const rm = document.createElement('button');
  rm.type = 'button';
  rm.className = 'remove-night';
  rm.textContent = '×';
  rm.addEventListener('click', () => {
    const rows = $('nights-rows');
    if (rows.children.length > 1) { row.remove(); labelRemoveButtons(); rows.querySelector('input').focus(); }
  });
  const err = document.createElement('p');
  err.className = 'err';
  err.id = `n${i}-err`;
  const group = document.createElement('details');
  group.className = 'night-rules';
  const summary = document.createElement('summary');
  const hint = document.createElement('p');
  hint.className = 'hint';
  hint.dataset.i18n = 'f.stay_rules_hint';
  hint.textContent = t('f.stay_rules_hint');
  const fields = document.createElement('div');
  fields.className = 'rule-fields';
  for (const k of RULE_NUMBERS) {
    const [l, inp] = mk(k, 'number', 'f.' + k, rules[k] || '');
    Object.assign(inp, { max: '366', placeholder: '0' });
    const f = document.createElement('span');
    f.append(l, inp);
    fields.append(f);
  }
  for (const k of RULE_FLAGS) {
    const [l, inp] = mk(k, 'checkbox', 'f.' + k, rules[k]);
    const f = document.createElement('span');
    f.className = 'check';
    f.append(inp, l);
    fields.append(f);
  }
  group.append(summary, hint, fields);
  group.addEventListener('input', () => summarize(row));
  group.addEventListener('change', () => summarize(row));
  // A slot's start and length, shown for a sale of time slots only.
  const slotFields = document.createElement('div');
  slotFields.className = 'slot-fields';
  const [tl, ti] = mk('time', 'time', 'f.slot_time', rules.time || '');
  const [ml, mi] = mk('minutes', 'number', 'f.slot_minutes', rules.minutes || '');
  Object.assign(mi, { max: '1440', placeholder: '–' });
  // A departure's vehicles (a seats sale's only).
  const [vl, vi] = mk('vehicles', 'number', 'f.seat_vehicles', rules.vehicles || 1);
  Object.assign(vi, { min: '1', max: '100' });
  for (const [l, inp] of [[tl, ti], [ml, mi], [vl, vi]]) {
    const f = document.createElement('span');
    if (inp === vi) f.className = 'vehicles-field';
    f.append(l, inp);
    slotFields.append(f);
  }
  const [sl, si] = mk('stock', 'number', wordFor(WORDS[9], kind()), stock);
  sl.className = 'stock-label';
  const [dl, di] = mk('date', 'date', wordFor(WORDS[10], kind()), date);
  dl.className = 'date-label';
  row.append(dl, di, sl, si, rm, slotFields, group, err);
  $('nights-rows').append(row);
  summarize(row);
  group.open = RULE_NUMBERS.some((k) => rules[k] > 0) || RULE_FLAGS.some((k) => rules[k]);
  labelRemoveButtons();
  return row;
}

// rulesOf reads a row's stay rules: only those set, as the API omits the
// others; a number that is not one stays NaN for read to name.
function rulesOf(row) {
  const out = {};
  for (const k of RULE_NUMBERS) {
    const v = row.querySelector(`[data-part="${k}"]`).value.trim();
    const n = v === '' ? 0 : intOf(v);
    if (n !== 0) out[k] = n;
  }
  for (const k of RULE_FLAGS) if (row.querySelector(`[data-part="${k}"]`).checked) out[k] = true;
  return out;
}

// ruleSummary is a night's stay rules in brief ("min 2 · CTA"), as the
// dashboard's nights table says them.
export function ruleSummary(r) {
  const parts = [];
  if (r.min_stay > 0) parts.push(t('console.rule_min', { n: r.min_stay }));
  if (r.max_stay > 0) parts.push(t('console.rule_max', { n: r.max_stay }));
  if (r.closed_to_arrival) parts.push(t('console.rule_cta'));
  if (r.closed_to_departure) parts.push(t('console.rule_ctd'));
  if (r.stop_sell) parts.push(t('console.rule_closed'));
  return parts.join(' · ');
}

// summarize names a row's rules in its group's summary, so a closed group
// still says what it holds.
function summarize(row) {
  const s = ruleSummary(rulesOf(row));
  row.querySelector('.night-rules summary').textContent = t('f.stay_rules') + (s ? ': ' + s : '');
}

// labelRemoveButtons names each row's remove button by its night, and
// disables the last one: a sale has at least one night.
export function labelRemoveButtons() {
  const rows = [...$('nights-rows').children];
  rows.forEach((row, i) => {
    const b = row.querySelector('.remove-night');
    b.setAttribute('aria-label', t({ slot: 'f.remove_slot', seats: 'f.remove_departure' }[kind()] || 'f.remove_night', { n: i + 1 }));
    b.disabled = rows.length === 1;
    summarize(row);
  });
}

// --- times ------------------------------------------------------------------
const pad = (n) => String(n).padStart(2, '0');

// rfc3339 turns a datetime-local value (the operator's own time zone) into
// RFC 3339 with that zone's offset; '' when it is not a time.
export function rfc3339(local) {
  const d = new Date(local);
  if (!local || Number.isNaN(d.getTime())) return '';
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` +
    `${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
}

// localValue is a datetime-local value for a Date.
export function localValue(d) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// TIME_ZONES are the IANA zones this browser knows, offered as the time
// zone's suggestions; browserZone is its own, a new sale's default.
export const TIME_ZONES = new Set(Intl.supportedValuesOf ? Intl.supportedValuesOf('timeZone') : []);
TIME_ZONES.add('UTC');
export const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || '';
$('time-zones').replaceChildren(...[...TIME_ZONES].sort().map((z) => Object.assign(document.createElement('option'), { value: z })));

// --- reading and checking ---------------------------------------------------
const intOf = (v) => (/^-?\d+$/.test(v.trim()) ? Number(v.trim()) : NaN);

// read returns {body, errors}: the request body, and [key, message]
// pairs for every field the server would refuse. With full (an edit), the
// optional objects are sent even when empty, so clearing one clears it.
export function read({ full = false } = {}) {
  const errs = [];
  const bad = (k, msg, vars) => errs.push([k, t(msg, vars)]);
  const val = (id) => $(id).value;
  const body = {};
  for (const k of ['title', 'hotel', 'room_type']) {
    body[k] = val('f-' + k).trim();
    // The server counts bytes of UTF-8: 200 of them is 66 Chinese characters.
    if (!body[k] || utf8.encode(body[k]).length > 200) bad(k, 'v.required', { max: 200 });
  }
  // The browser's own IANA list: a name it does not know, the server's
  // would not either.
  const slot = timed();
  if (slot) body.kind = kind(); // a stay's body is as it was before kinds
  const timeZone = val('f-time_zone').trim();
  if (timeZone || full) body.time_zone = timeZone;
  if (timeZone && !TIME_ZONES.has(timeZone)) bad('time_zone', 'v.time_zone');
  else if (!timeZone && slot) bad('time_zone', 'v.time_zone_required');
  const description = val('f-description').trim();
  if (description || full) body.description = description;
  if (utf8.encode(description).length > 2000) bad('description', 'v.description', { max: 2000 });
  const rows = [...$('nights-rows').children];
  if (slot) readSlots(rows, body, bad);
  else readNights(rows, body, bad);
  for (const k of ['price', 'original_price']) {
    body[k] = intOf(val('f-' + k));
    if (!Number.isInteger(body[k]) || body[k] < 0 || body[k] > MAX_MONEY) bad(k, 'v.money');
  }
  body.currency = val('f-currency').trim().toUpperCase();
  if (!/^[A-Z]{3}$/.test(body.currency)) bad('currency', 'v.currency');
  body.starts_at = rfc3339(val('f-starts_at'));
  body.ends_at = rfc3339(val('f-ends_at'));
  if (!body.starts_at) bad('starts_at', 'v.time');
  if (!body.ends_at) bad('ends_at', 'v.time');
  else if (body.starts_at && Date.parse(body.ends_at) <= Date.parse(body.starts_at)) bad('ends_at', 'v.ends_after');
  const range = (k, id, lo, hi) => {
    const v = intOf(val(id));
    if (!Number.isInteger(v) || v < lo || v > hi) bad(k, 'v.range', { lo, hi });
    return v;
  };
  body.per_user_limit = range('per_user_limit', 'f-per_user_limit', 1, 1000);
  body.hold_seconds = range('hold_seconds', 'f-hold_seconds', 1, 86400);
  body.purchase_token = $('f-purchase_token').checked;
  const difficulty = range('challenge.difficulty', 'f-challenge', 0, 32);
  if (full && Number.isInteger(difficulty)) body.challenge = { difficulty };
  if (difficulty > 0) {
    body.challenge = { difficulty };
    if (!body.purchase_token) bad('challenge.difficulty', 'v.challenge_token');
  }
  // A waiting room, checked as WaitingRoom.validate checks it: all three
  // empty is none (null in an edit, so emptying them turns it off).
  const room = ROOM.map((k) => val('f-' + k).trim());
  if (room.some(Boolean)) {
    const rate = room[1] === '' ? 0 : DECIMAL.test(room[1]) ? Number(room[1]) : NaN;
    if (!(rate === 0 || (rate >= 0.1 && rate <= 100000))) bad('waiting_room.admit_per_second', 'v.admit_rate');
    body.waiting_room = {
      prequeue_minutes: room[0] === '' ? 0 : range('waiting_room.prequeue_minutes', 'f-prequeue_minutes', 0, 1440),
      admit_per_second: rate,
      admission_seconds: range('waiting_room.admission_seconds', 'f-admission_seconds', 10, 3600),
    };
  } else if (full) body.waiting_room = null;
  const elig = {};
  if (val('f-min_tier')) elig.min_tier = val('f-min_tier');
  const stays = range('eligibility.min_stays_30d', 'f-min_stays', 0, 30);
  if (stays > 0) elig.min_stays_30d = stays;
  const channels = val('f-channels').split(',').map((c) => c.trim()).filter(Boolean);
  if (channels.length) {
    elig.channels = channels;
    if (channels.length > 16) bad('eligibility.channels', 'v.channels_count');
    else if (channels.some((c) => !CHANNEL.test(c))) bad('eligibility.channels', 'v.channel');
    else if (new Set(channels).size !== channels.length) bad('eligibility.channels', 'v.channel_repeat');
  }
  if (Object.keys(elig).length || full) body.eligibility = elig;
  const limits = {};
  for (const k of ['per_sale', 'per_user', 'per_ip']) {
    const v = val('f-' + k).trim();
    if (!v) continue;
    limits[k] = v;
    const m = RATE.exec(v);
    if (v !== 'off' && (!m || Number(m[1]) < 1 || Number(m[1]) > 1e6 || (m[2] !== undefined && (Number(m[2]) < 1 || Number(m[2]) > 1e6)))) bad('limits.' + k, 'v.rate');
  }
  if (Object.keys(limits).length || full) body.limits = limits;
  const tiers = readTiers(val('f-price_tiers'), body.price, body.per_user_limit);
  if (tiers.error) bad('price_tiers', ...tiers.error);
  else if (tiers.tiers.length || full) body.price_tiers = tiers.tiers;
  return { body, errors: errs };
}

// readNights reads a stay's nights: each a date and its rooms, with its
// stay rules, checked as Sale.Validate checks them.
function readNights(rows, body, bad) {
  body.nights = rows.map((row) => ({ date: row.querySelector('[data-part="date"]').value, stock: intOf(row.querySelector('[data-part="stock"]').value), ...rulesOf(row) }));
  if (body.nights.length < 1 || body.nights.length > 366) bad('nights', 'v.nights_count');
  let prev = '';
  body.nights.forEach((n, i) => {
    if (!DATE.test(n.date)) bad(`nights[${i}].date`, 'v.night_date');
    else if (prev && n.date <= prev) bad(`nights[${i}].date`, 'v.night_order');
    if (!Number.isInteger(n.stock) || n.stock < 0 || n.stock > 1e6) bad(`nights[${i}].stock`, 'v.night_stock');
    // The stay rules, checked as Sale.validateStayRules checks them.
    for (const k of RULE_NUMBERS) if (k in n && !(Number.isInteger(n[k]) && n[k] >= 0 && n[k] <= 366)) bad(`nights[${i}].${k}`, 'v.stay_len');
    if (n.max_stay > 0 && n.min_stay > 0 && n.max_stay < n.min_stay) bad(`nights[${i}].max_stay`, 'v.max_below_min');
    if (n.closed_to_departure && (i === 0 || !DATE.test(n.date) || Date.parse(n.date) - Date.parse(body.nights[i - 1].date) !== 86400e3)) {
      bad(`nights[${i}].closed_to_departure`, 'v.ctd_never');
    }
    if (DATE.test(n.date)) prev = n.date;
  });
}

// unitRow maps a seats sale's units, as last read, to their rows: a
// vehicle's error (the server's, by unit) is shown at its departure.
let unitRow = [];

// readSlots reads a slot sale's slots: each a date, a start and maybe a
// length in the venue's zone, and its places, checked as
// Sale.validateSlots checks them (a start the clocks skip or repeat that
// day is the server's to name). A seats sale's row is a departure, sent
// as a unit per vehicle, each of the row's seats per vehicle: its errors
// are keyed by its first unit.
function readSlots(rows, body, bad) {
  const seats = kind() === 'seats';
  const part = (row, k) => row.querySelector(`[data-part="${k}"]`).value.trim();
  const read = rows.map((row) => {
    const n = { date: part(row, 'date'), time: part(row, 'time'), stock: intOf(part(row, 'stock')) };
    const m = part(row, 'minutes');
    if (m !== '') n.minutes = intOf(m);
    return n;
  });
  const vehicles = rows.map((row) => (seats ? intOf(part(row, 'vehicles')) : 1));
  const first = []; // each row's first unit
  unitRow = [];
  body.nights = [];
  read.forEach((n, i) => {
    first.push(body.nights.length);
    const v = Number.isInteger(vehicles[i]) && vehicles[i] >= 1 && vehicles[i] <= 100 ? vehicles[i] : 1;
    for (let k = 0; k < v; k++) { body.nights.push(n); unitRow.push(i); }
  });
  if (body.nights.length < 1 || body.nights.length > 366) bad('nights', 'v.nights_count');
  let prev = '';
  read.forEach((n, r) => {
    const i = first[r];
    if (!DATE.test(n.date)) bad(`nights[${i}].date`, 'v.night_date');
    if (!CLOCK.test(n.time)) bad(`nights[${i}].time`, 'v.slot_time');
    else if (DATE.test(n.date)) {
      // A departure's rows may repeat its start (vehicles of two sizes,
      // one after another); a slot's may not.
      const at = n.date + 'T' + n.time;
      if (prev && (seats ? at < prev : at <= prev)) bad(`nights[${i}].time`, seats ? 'v.seat_order' : 'v.slot_order');
      prev = at;
    }
    if ('minutes' in n && !(Number.isInteger(n.minutes) && n.minutes >= 0 && n.minutes <= 1440)) bad(`nights[${i}].minutes`, 'v.slot_minutes');
    if (n.minutes === 0) delete n.minutes;
    if (seats && !(Number.isInteger(vehicles[r]) && vehicles[r] >= 1 && vehicles[r] <= 100)) bad(`nights[${i}].vehicles`, 'v.seat_vehicles');
    if (!Number.isInteger(n.stock) || n.stock < 0 || n.stock > 1e6) bad(`nights[${i}].stock`, seats ? 'v.seat_stock' : 'v.slot_stock');
  });
  body.nights = body.nights.map((n) => ({ ...n })); // a unit per vehicle, each its own object
}

// readTiers parses "rooms:price, rooms:price" and checks it as
// Sale.validatePriceTiers does: rooms going up from 2 to the rooms per
// guest, prices going down, each below the sale's price. It returns
// {tiers} or {error: [message key, vars]}.
export function readTiers(text, price, perUser) {
  const parts = text.split(',').map((x) => x.trim()).filter(Boolean);
  const tiers = [];
  for (const x of parts) {
    const m = TIER.exec(x);
    if (!m) return { error: ['v.tiers_format'] };
    tiers.push({ rooms: Number(m[1]), price: Number(m[2]) });
  }
  if (tiers.length > MAX_TIERS) return { error: ['v.tiers_count', { max: MAX_TIERS }] };
  let rooms = 1, before = price;
  for (const [i, tr] of tiers.entries()) {
    if (tr.rooms <= rooms || !(tr.rooms <= perUser)) return { error: ['v.tiers_rooms', { i: i + 1, max: perUser }] };
    if (Number.isInteger(before) && tr.price >= before) return { error: ['v.tiers_price', { i: i + 1, price: before }] };
    rooms = tr.rooms;
    before = tr.price;
  }
  return { tiers };
}

// fieldOfMessage names the field a server's 400 message is about (its
// messages start with the field's JSON path), or '' for the whole form.
export function fieldOfMessage(msg) {
  if (/^starts_at and ends_at/.test(msg)) return 'ends_at';
  if (/^challenge needs/.test(msg)) return 'challenge.difficulty';
  const m = /^((?:nights\[\d+\]\.(?:date|time|minutes|vehicles|stock|min_stay|max_stay|closed_to_arrival|closed_to_departure|stop_sell))|(?:eligibility\.[a-z_0-9]+)|(?:limits\.[a-z_]+)|(?:waiting_room\.[a-z_]+)|(?:challenge\.difficulty)|[a-z_]+)/.exec(msg || '');
  if (!m) return '';
  const key = m[1];
  return elementsOf(key)[1] ? key : '';
}

// clear removes every error the form shows.
export function clear() {
  for (const el of document.querySelectorAll('#create .err')) el.textContent = '';
  for (const el of document.querySelectorAll('#create [aria-invalid]')) el.removeAttribute('aria-invalid');
  const box = $('create-errors');
  box.hidden = true;
  box.replaceChildren();
}

// show puts each [key, message] at its field (a key with no field goes
// to the summary only), lists them all in the summary (headed by the
// summary key's sentence), and moves focus to the first field in error so
// a keyboard or screen-reader user lands on it.
export function show(errors, summary = 'v.summary') {
  clear();
  const box = $('create-errors');
  const ul = document.createElement('ul');
  let first = null;
  for (const [key, msg] of errors) {
    const [input, line] = elementsOf(key);
    if (line) line.textContent = line.textContent ? line.textContent + ' ' + msg : msg;
    if (input) {
      input.setAttribute('aria-invalid', 'true');
      const group = input.closest('details');
      if (group) group.open = true; // a closed group's input cannot take the focus
      first = first || input;
    }
    // Each item names its field and takes the focus there.
    const li = document.createElement('li');
    li.dataset.field = key;
    const label = input && (document.querySelector(`label[for="${input.id}"]`) || input.closest('fieldset')?.querySelector('legend'));
    if (input) {
      const go = document.createElement('button');
      go.type = 'button';
      go.className = 'link';
      go.textContent = label ? label.textContent : key;
      go.addEventListener('click', () => input.focus());
      li.append(go, ': ');
    }
    li.append(msg);
    ul.append(li);
  }
  const h = document.createElement('p');
  h.textContent = t(summary, { n: errors.length });
  box.append(h, ul);
  box.hidden = false;
  (first || box).focus();
}

// --- editing ----------------------------------------------------------------
// EDITABLE are the fields a started sale may still change (flashsale's
// SalePatch.Apply): the others are what guests holding purchase tokens
// were promised.
export const EDITABLE = ['title', 'description', 'ends_at', 'limits.per_sale', 'limits.per_user', 'limits.per_ip'];

// fill puts a sale (the admin view) in the form.
export function fill(v) {
  const set = (id, x) => { $(id).value = x == null ? '' : String(x); };
  for (const k of ['title', 'description', 'hotel', 'room_type', 'time_zone', 'price', 'original_price', 'currency', 'per_user_limit', 'hold_seconds']) set('f-' + k, v[k]);
  $('nights-rows').replaceChildren();
  setKind(timed(v.kind) ? v.kind : 'stay');
  if (v.kind === 'seats') {
    // A departure's vehicles of one size are one row.
    const rows = [];
    for (const n of v.nights || []) {
      const last = rows[rows.length - 1];
      if (last && last.date === n.date && last.time === n.time && last.stock === n.stock && (last.minutes || 0) === (n.minutes || 0)) last.vehicles++;
      else rows.push({ ...n, vehicles: 1 });
    }
    for (const n of rows) addNight(n.date, n.stock, n);
  } else for (const n of v.nights || []) addNight(n.date, n.stock, n);
  set('f-price_tiers', (v.price_tiers || []).map((x) => `${x.rooms}:${x.price}`).join(', '));
  set('f-starts_at', localValue(new Date(v.starts_at)));
  set('f-ends_at', localValue(new Date(v.ends_at)));
  $('f-purchase_token').checked = !!v.purchase_token;
  set('f-challenge', (v.challenge && v.challenge.difficulty) || 0);
  const e = v.eligibility || {};
  set('f-min_tier', e.min_tier || '');
  set('f-min_stays', e.min_stays_30d || 0);
  set('f-channels', (e.channels || []).join(', '));
  const l = v.limits || {};
  for (const k of ['per_sale', 'per_user', 'per_ip']) set('f-' + k, l[k] || '');
  const w = v.waiting_room;
  for (const k of ROOM) set('f-' + k, w ? w[k] : '');
  $('waiting-room').open = !!w;
}

// inputOf is the input of a field's JSON path (EDITABLE's included).
export const inputOf = (key) => elementsOf(key)[0];

// lock makes every field a started sale may not change read-only (or, for
// what has no read-only state, disabled), each described by the note that
// says why; lock(false) undoes it.
export function lock(on, note = 'edit-locked') {
  const fixed = Object.keys(FIELDS).filter((k) => !EDITABLE.includes(k) && k !== 'nights').map((k) => $(FIELDS[k][0]));
  fixed.push(...$('nights-rows').querySelectorAll('input'));
  for (const inp of fixed) {
    if (inp.tagName === 'SELECT' || inp.type === 'checkbox') inp.disabled = on;
    else inp.readOnly = on;
    const ids = (inp.getAttribute('aria-describedby') || '').split(' ').filter((x) => x && x !== note);
    if (on) ids.push(note);
    inp.setAttribute('aria-describedby', ids.join(' '));
  }
  for (const b of document.querySelectorAll('#add-night, #nights-rows .remove-night')) b.disabled = on;
  if (!on) labelRemoveButtons();
  $(note).hidden = !on;
}
